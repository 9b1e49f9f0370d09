"""Submissions no grader expects (a file name that is not UTF-8, folders nested deeper than
any course needs), handed in through `nbgrader submit` and `make collect` or put straight
into submitted/: the class is graded, and that student is listed with the reason."""
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from support.classes import CLASS_ASSIGNMENT as A, CLASS_BUDGET
from support.gradebook import db_scores
from grader.instructor import cli as instructor
from support import synthetic
from grader.grading.autograde import Grading
from grader.grading.status import Status

pytestmark = pytest.mark.xdist_group("odd")
NB = f"{A}.ipynb"
ODD_NAME = b"caf\xe9 notes.txt"  # Latin-1, not UTF-8


def _nest(base, depth):
    """base/a/a/.../a, depth folders deep (os.makedirs itself recurses), with a file at the end."""
    path = str(base)
    os.mkdir(path)
    for _ in range(depth - 1):
        path = os.path.join(path, "a")
        os.mkdir(path)
    Path(path, "x.txt").write_text("deep")


def _remove(top):
    """Remove a folder tree bottom-up without recursion (shutil.rmtree and pytest's own
    clean-up recurse, and fail on the 1,100-deep folder)."""
    folders, stack = [], [str(top)]
    while stack:
        folder = stack.pop()
        folders.append(folder)
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.unlink(entry.path)
    for folder in reversed(folders):
        os.rmdir(folder)


@pytest.fixture(scope="module")
def odd_class(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("odd")
    root = synthetic.make_course(tmp / "course")
    instructor.release_exchange(root, A)
    home = tmp / "home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        f'c = get_config()\nc.Exchange.root = "{root / "exchange"}"\n'
        'c.CourseDirectory.course_id = "self-attention"\n')
    env = {"HOME": str(home), "PATH": str(Path(sys.executable).parent)}

    def nbgrader(*args):
        return subprocess.run([sys.executable, "-m", "nbgrader", *args], capture_output=True,
                              text=True, cwd=home, env=env, timeout=300)

    assert nbgrader("fetch_assignment", A).returncode == 0
    work = home / A
    nbformat.write(synthetic.answered(root, A, A), work / NB)
    assert nbgrader("submit", A, "--student=ada").returncode == 0  # an ordinary classmate
    odd_file = os.path.join(os.fsencode(work), ODD_NAME)
    Path(os.fsdecode(odd_file)).write_bytes(b"notes")
    assert nbgrader("submit", A, "--student=latin").returncode == 0
    os.unlink(odd_file)
    _nest(work / "deep", 200)  # deeper than any course needs, within what nbgrader submit copies
    assert nbgrader("submit", A, "--student=deep").returncode == 0
    instructor.collect(root, assignment=A)  # make collect

    for student, odd in {"latin2": "name", "deeper": "folder"}.items():  # straight into submitted/
        folder = root / "submitted" / student / A
        folder.mkdir(parents=True)
        nbformat.write(synthetic.answered(root, A, A), folder / NB)
        if odd == "name":
            Path(os.fsdecode(os.path.join(os.fsencode(folder), ODD_NAME))).write_bytes(b"notes")
        else:
            _nest(folder / "deep", 1100)  # deeper than Python's recursion limit
    summary = Grading(root, jobs=1, budget=CLASS_BUDGET).run(progress=False)
    yield root, summary
    _remove(tmp)


def test_the_class_is_graded_and_odd_submissions_are_listed_with_the_reason(odd_class):
    root, summary = odd_class
    assert summary["graded"] == 1 and summary["needs_attention"] == 4, summary
    assert db_scores(root) == {"ada": 10.0}
    status = Status(root)
    for student in ("latin", "latin2"):
        entry = status.get(student, A)
        assert entry["status"] == "needs_attention"
        assert "caf\\xe9 notes.txt" in entry["reason"] and "not UTF-8" in entry["reason"], entry
    for student in ("deep", "deeper"):
        entry = status.get(student, A)
        assert entry["status"] == "needs_attention"
        assert "nested more than 32 deep" in entry["reason"], entry


@pytest.mark.usefixtures("commands_share_the_template")
def test_make_autograde_lists_them_and_a_rerun_skips_them(odd_class):
    root, _ = odd_class
    out = subprocess.run([sys.executable, "-m", "grader.grading.autograde", "--root", str(root),
                          "--jobs", "1", "--budget", str(CLASS_BUDGET)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    # nothing is graded again; refused submissions are listed on every run
    assert "0 graded, 4 need attention, 1 unchanged and skipped" in out.stdout, out.stdout
    listed = [line for line in out.stdout.splitlines() if "NEEDS ATTENTION" in line]
    assert sorted(line.split()[2] for line in listed) == ["deep", "deeper", "latin", "latin2"]
