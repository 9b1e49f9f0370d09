"""Interrupted and repeated autograde runs, and collecting from an LMS zip."""
import contextlib
import os
import signal
import subprocess
import sys
import time
import zipfile

import nbformat
import psutil

from support.gradebook import db_scores
from support.templates import template_env
from grader.instructor import cli as instructor
from support import synthetic
from grader.grading.status import Status

A = "05_scaled_attention"


def _run_cli(root, *args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "grader.grading.autograde", "--root", str(root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)


def _entries(root):
    return len(Status(root).data)


def _wait_for_entries(root, proc, count):
    """Until the status holds `count` submissions (the run is still going: it cannot end
    while the sleeper sleeps)."""
    deadline = time.monotonic() + 900  # a bound for a loaded machine, never a timing goal
    while _entries(root) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no submission was graded in 15 minutes"
        time.sleep(0.5)


def _tree(proc):
    return [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]


def test_ctrl_c_then_a_crash_then_a_plain_rerun_grade_everything_once(tmp_path):
    """make autograde stopped by Ctrl-C (SIGINT to the terminal's process group), then
    killed outright (every process of the run), then run again plainly: the first stops
    cleanly, says how many were kept and that a plain rerun continues, and leaves no
    process behind; nothing recorded is lost or graded twice.

    One submission sleeps in the student's function (for an hour: its limits are set so),
    so neither run can end by itself before it is stopped, on any machine."""
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    with open(root / "nbgrader_config.py", "a") as config:
        config.write("\nc.GradingExecute.call_timeout = 3600\nc.Execute.timeout = 3600\n"
                     "c.GradingExecute.notebook_budget = 3600\n")
    students = [f"s{i}" for i in range(5)]
    for s in students:
        synthetic.make_submission(root, s, A, "correct")
    synthetic.make_attack(root, "sleeper", "sleeps")
    total = len(students) + 1
    tmp = tmp_path / "tmp"  # the runs' temp folder, to see what they leave there
    tmp.mkdir()
    plain = dict(os.environ, TMPDIR=str(tmp))

    proc = _run_cli(root, "--jobs", "2", env=plain)
    _wait_for_entries(root, proc, 1)
    running = _tree(proc)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    out, err = proc.communicate(timeout=300)
    kept = _entries(root)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert (f"INTERRUPTED (Ctrl-C): {kept} submission(s) finished in this run are recorded and kept "
            f"({kept} graded, 0 need attention); {total - kept} were not graded.") in err, err[-3000:]
    assert "A plain `make autograde` (no FORCE=1) continues" in err
    assert f"{kept} graded, 0 need attention" in out, out
    _gone, alive = psutil.wait_procs(running, timeout=120)  # the workers and kernels were stopped
    assert not alive, [p.cmdline() for p in alive]
    assert set(db_scores(root)) == {s for s, _a, _e in Status(root).entries()}
    assert list(tmp.glob("autograde-*")) == []  # the stopped run removed its work folder

    proc = _run_cli(root, "--jobs", "2", env=plain)
    _wait_for_entries(root, proc, kept + 1)
    for p in _tree(proc):  # the machine lost: driver, workers and kernels killed at once
        with contextlib.suppress(psutil.Error):
            p.kill()
    proc.wait()
    done = _entries(root)
    assert kept < done < total  # the sleeper cannot have finished
    left = list(tmp.glob("autograde-*"))
    assert len(left) == 1, left  # the killed run could not remove its work folder

    synthetic.make_submission(root, "sleeper", A, "correct")  # handed in again, awake
    # the plain reruns fork their kernels from this process's warm template (the two runs
    # above, stopped and killed, had their own: that each ends with its run is part of what
    # they show)
    env = dict(plain, **template_env())
    proc = _run_cli(root, "--jobs", "1", env=env)  # the rest, on one worker (each costs about 5 s of CPU to start)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert f"{total - done} graded, 0 need attention, {done} unchanged and skipped" in out, out
    # not on a terminal: a line per finished submission (on a terminal, a bar)
    assert f"autograde: [1/{total - done}] " in err and f"/ {A} graded (" in err, err[-2000:]
    assert db_scores(root) == {s: 10.0 for s in [*students, "sleeper"]}
    assert not list((root / "autograded").glob("*/.*.incoming"))
    assert not left[0].exists() and list(tmp.glob("autograde-*")) == []  # the next run removed it

    # unchanged submissions are skipped; a changed one is regraded, a broken one loses its grade
    synthetic.make_submission(root, "s0", A, "missing_scale")
    synthetic.make_submission(root, "s1", A, "invalid_json")
    out, err = _run_cli(root, "--jobs", "1", env=env).communicate(timeout=300)
    assert f"1 graded, 1 need attention, {total - 2} unchanged and skipped" in out
    scores = db_scores(root)
    assert scores["s0"] == 2.0 and "s1" not in scores
    assert (root / "autograded" / ".status.json").exists()


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
