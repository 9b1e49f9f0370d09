"""`make collect` on the exchange route (the local one: this account writes the exchange, as
the suite's simulated students do; tests/instructor/test_exchange_accounts.py does the same
with real accounts) against a student who attacks the collect itself:

- a submission folder holding a 150 MB sparse file (no disk to speak of, but over nbgrader's
  max_dir_size): nbgrader's copy raised on it and stopped the whole assignment's collect,
  every classmate after it uncollected, at every run. Now it is refused with the reason
  before anything is copied, and the class is collected;
- a submission folder swapped for a link to the instructor's solutions after collect checked
  it and before it copied it: the copy went by name, so collect took the solutions as the
  student's. Now the copy goes through the folder it checked (file descriptors, no link
  followed): the swapped entry is refused and listed, the student's earlier copy stays, and
  the class is collected."""
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.instructor import cli, exchange
from support import synthetic

pytestmark = pytest.mark.xdist_group("collect_bounds")

A = "03_masked_softmax"
NB = f"{A}.ipynb"


@pytest.fixture
def course(tmp_path):
    root = synthetic.make_course(tmp_path / "course")
    cli.release_exchange(root, A)
    return root


def inbound(root):
    return root / "exchange" / "self-attention" / "inbound"


def hand_in(root, student, time, nb=None, extra=()):
    """A submission folder in inbound/ as nbgrader's submit writes one."""
    folder = inbound(root) / f"{student}+{A}+{time}+x{student}"
    folder.mkdir()
    nbformat.write(nb or synthetic.answered(root, A, A), folder / NB)
    (folder / "timestamp.txt").write_text(time)
    for name, size in extra:
        with open(folder / name, "wb") as f:
            f.truncate(size)  # sparse: its size as written, no disk
    return folder


def test_an_oversized_submission_is_refused_and_the_class_collected(course, capsys):
    for i, student in enumerate(("ada", "bob", "zed")):
        hand_in(course, student, f"2025-10-01 10:00:0{i}.000000 UTC")
    hand_in(course, "mallory", "2099-01-01 00:00:00.000000 UTC", extra=[("big.bin", 150 * 10**6)])
    cli.collect(course, assignment=A)
    out = capsys.readouterr().out
    assert "collect failed" not in out, out
    assert "3 new" in out and "new: ada, bob, zed" in out, out
    assert "mallory+" in out and "it holds more than 100 MB" in out, out
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["ada", "bob", "zed"]


def test_a_submission_swapped_for_a_link_after_it_was_checked_is_refused(course, capsys, monkeypatch):
    hand_in(course, "ada", "2025-10-01 10:00:00.000000 UTC")
    first = hand_in(course, "mallory", "2025-10-01 10:00:01.000000 UTC")
    cli.collect(course, assignment=A)
    mine = (course / "submitted" / "mallory" / A / NB).read_text()
    capsys.readouterr()
    later = hand_in(course, "mallory", "2025-10-02 10:00:00.000000 UTC")  # handed in again ...
    hand_in(course, "zed", "2025-10-01 10:00:02.000000 UTC")
    solutions = course / "solutions" / A
    checked = exchange.OwnedCollect.init_src

    def then_swap(self):  # ... and swapped for a link once collect has checked it
        checked(self)
        os.rename(later, later.with_name("kept"))
        os.symlink(solutions, later)
    monkeypatch.setattr(exchange.OwnedCollect, "init_src", then_swap)
    cli.collect(course, assignment=A)
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if later.name in l)  # listed as refused, once, with a reason
    assert "a link" in line and out.count(later.name) == 1, out
    assert "new: zed" in out, out
    collected = course / "submitted" / "mallory" / A
    assert (collected / NB).read_text() == mine  # the earlier copy stays
    assert "BEGIN SOLUTION" not in "".join(p.read_text() for p in collected.iterdir() if p.is_file())
    assert not any(p.is_symlink() for p in collected.rglob("*"))
    assert first.exists()


def test_a_file_swapped_inside_a_checked_submission_is_refused(course, capsys, monkeypatch):
    """The folder stays; the notebook in it becomes a link to the solutions after the check."""
    folder = hand_in(course, "mallory", "2025-10-01 10:00:01.000000 UTC")
    hand_in(course, "ada", "2025-10-01 10:00:00.000000 UTC")
    checked = exchange.OwnedCollect.init_src

    def then_swap(self):
        checked(self)
        (folder / NB).unlink()
        os.symlink(course / "solutions" / A / NB, folder / NB)
    monkeypatch.setattr(exchange.OwnedCollect, "init_src", then_swap)
    cli.collect(course, assignment=A)
    out = capsys.readouterr().out
    assert f"{NB} in it is a symbolic link" in out and out.count(f"{folder.name}:") == 1, out
    assert "new: ada" in out and not (course / "submitted" / "mallory").exists(), out


def test_the_copy_keeps_what_nbgrader_leaves_out_and_the_times(tmp_path):
    """copy_folder as nbgrader's copy: ignored names left out, regular files and folders as they are."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / NB).write_text("{}")
    (src / "sub" / "data.txt").write_text("x")
    (src / ".ipynb_checkpoints").mkdir()
    (src / ".ipynb_checkpoints" / "old.ipynb").write_text("{}")
    newest = exchange.copy_folder(src, tmp_path / "dest", ignore=[".ipynb_checkpoints"], include=["*"])
    assert sorted(str(p.relative_to(tmp_path / "dest")) for p in (tmp_path / "dest").rglob("*")) == \
        [NB, "sub", "sub/data.txt"]
    assert newest >= os.lstat(src / NB).st_ctime
    os.symlink(src / NB, src / "link.ipynb")
    with pytest.raises(exchange.Unsafe, match="link.ipynb in it cannot be opened without following a link"):
        exchange.copy_folder(src, tmp_path / "dest2")
