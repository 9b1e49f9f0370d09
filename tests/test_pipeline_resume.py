"""Interrupted and repeated autograde runs, and collecting from an LMS zip."""
import os
import signal
import subprocess
import sys
import time
import zipfile

import nbformat

from conftest import db_scores
from grader.instructor import cli as instructor
from support import synthetic
from grader.grading.status import Status

A = "05_scaled_attention"


def _run_cli(root, *args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "grader.grading.autograde", "--root", str(root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)


def test_interrupted_run_resumes_to_a_consistent_gradebook(tmp_path):
    root = synthetic.make_course(tmp_path / "course")
    students = [f"s{i}" for i in range(5)]
    for s in students:
        synthetic.make_submission(root, s, A, "correct")
    proc = _run_cli(root, "--jobs", "2")
    status_file = root / "autograded" / ".status.json"
    deadline = time.monotonic() + 600  # a bound for a loaded machine, never a timing goal
    while time.monotonic() < deadline and len(Status(root).data) < 2:
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # killed half-way, workers and kernels included
    proc.wait()
    done_before = len(Status(root).data)
    assert 2 <= done_before < len(students)

    proc = _run_cli(root, "--jobs", "1")  # the rest, on one worker (each costs about 5 s of CPU to start)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert f"{len(students) - done_before} graded" in out
    # not on a terminal: a line per finished submission (on a terminal, a bar)
    assert f"autograde: [1/{len(students) - done_before}] s" in err and f"/ {A} graded (" in err, err[-2000:]
    assert db_scores(root) == {s: 10.0 for s in students}
    assert not list((root / "autograded").glob("*/.*.incoming"))

    # unchanged submissions are skipped; a changed one is regraded, a broken one loses its grade
    synthetic.make_submission(root, "s0", A, "missing_scale")
    synthetic.make_submission(root, "s1", A, "invalid_json")
    out, err = _run_cli(root, "--jobs", "1").communicate(timeout=300)
    assert "1 graded, 1 need attention, 3 unchanged and skipped" in out
    scores = db_scores(root)
    assert scores["s0"] == 2.0 and "s1" not in scores
    assert status_file.exists()


def test_zip_collect_uses_the_documented_file_name_pattern(tmp_path):
    root = synthetic.make_course(tmp_path / "course")
    archive = tmp_path / "lms.zip"
    nb = synthetic.answered(root, A, A)
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"downloads/ada_{A}.ipynb", nbformat.writes(nb))
        z.writestr(f"grace.hopper_{A}.ipynb", nbformat.writes(nb))
    instructor.collect(root, archive, A)
    for student in ("ada", "grace.hopper"):
        assert (root / "submitted" / student / A / f"{A}.ipynb").exists()
