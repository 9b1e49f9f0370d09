"""What a newcomer meets first: `make` lists every command, the self-study route works in
work/ (a copy that make release never touches), one student is regraded through make."""
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from support import synthetic
from support.paths import ROOT

A = "05_scaled_attention"


def _make(*args, cwd=ROOT):
    proc = subprocess.run(["make", "-s", *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _targets():
    text = (ROOT / "Makefile").read_text() + (ROOT / "install.mk").read_text()
    return re.findall(r"^([a-z][a-z-]*):", text, re.M)


def test_make_alone_lists_every_target_with_one_line_each():
    listing = _make()
    assert listing == _make("help")
    lines = listing.splitlines()
    assert sorted(line.split()[1] for line in lines) == sorted(_targets())
    for line in lines:
        target, text = re.fullmatch(r"  make (\S+) +(\S.*)", line).groups()
        assert len(text) > 10, line


def _course_copy(tmp_path):
    for name in ("Makefile", "install.mk", "requirements.lock"):
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    return tmp_path


def test_work_holds_the_students_copies_and_never_overwrites_them(tmp_path):
    course = _course_copy(tmp_path)
    released = sorted(p.relative_to(course / "notebooks") for p in (course / "notebooks").glob("*/*.ipynb"))
    out = _make("work", cwd=course)
    assert sorted(p.relative_to(course / "work") for p in (course / "work").glob("*/*.ipynb")) == released
    assert out.count("copied ") == len(released)
    mine = course / "work" / released[0]
    mine.write_text(mine.read_text().replace("raise NotImplementedError()", "return 42", 1))
    edited = mine.read_bytes()
    (course / "work" / released[1]).unlink()  # a notebook the student deleted comes back
    assert _make("work", cwd=course).splitlines() == [f"copied notebooks/{released[1]} to work/{released[1]}"]
    assert mine.read_bytes() == edited
    assert "/lab/tree/work " in _make("lab-command", cwd=course) + " "


def _autograde_command(root, *make_args):
    """The command `make autograde ...` runs, pointed at the course in root."""
    line = _make("-n", "-o", ".venv/.installed", "autograde", *make_args).strip().splitlines()[-1]
    args = shlex.split(line)
    assert args[1:3] == ["-m", "grader.grading.autograde"], line
    return [sys.executable, *args[1:], "--root", str(root)]


@pytest.mark.usefixtures("commands_share_the_template")
def test_make_autograde_regrades_one_student(tmp_path):
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    synthetic.make_submission(root, "ada", A, "correct")
    synthetic.make_submission(root, "ben", A, "stub")
    command = _autograde_command(root, "STUDENT=ada", f"ASSIGNMENT={A}")
    assert command[3:5] == ["--student", "ada"] and command[5:7] == ["--assignment", A]
    status = root / "autograded" / ".status.json"
    for _ in range(2):  # the second time the submission is unchanged, and graded again
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (f"1 submission(s) of ada / {A}: 1 graded, 0 need attention, 0 unchanged and skipped"
                in proc.stdout), proc.stdout
        assert "ben" not in status.read_text()  # the other student is left alone
    unknown = subprocess.run(_autograde_command(root, "STUDENT=ava"), capture_output=True, text=True,
                             timeout=600)
    assert unknown.returncode == 2
    assert f"no submission of ava / every assignment under {root / 'submitted'}" in unknown.stderr
