"""The status file of a large class: journaled, folded, and safe against a kill."""
import json

from grader.grading import status as status_module
from grader.grading.status import Status


def entry(i):
    return {"fingerprint": f"fp{i}", "status": "graded", "graded_at": i, "elapsed": 1.0}


def test_a_large_class_is_journaled_then_folded_and_reads_back_the_same(tmp_path):
    status = Status(tmp_path)
    n = status_module.SMALL + 40
    for i in range(n):
        status.set(f"s{i:04d}", "05_scaled_attention", entry(i))
    assert status.journal.exists()  # past SMALL entries, results are appended
    assert len(json.loads(status.path.read_text())) < n
    again = Status(tmp_path)
    assert again.data == status.data and len(again.data) == n
    again.set("s0000", "05_scaled_attention", {**entry(0), "status": "needs_attention"})
    assert Status(tmp_path).get("s0000", "05_scaled_attention")["status"] == "needs_attention"

    again.flush()
    assert not again.journal.exists()
    assert json.loads(again.path.read_text()) == again.data == Status(tmp_path).data


def test_the_journal_is_folded_once_it_holds_an_eighth_of_the_entries(tmp_path):
    status = Status(tmp_path)
    for i in range(status_module.SMALL):
        status.set(f"s{i:04d}", "a", entry(i))
    writes = []
    original = status._write
    status._write = lambda: (writes.append(1), original())
    for i in range(status_module.SMALL, 2 * status_module.SMALL):
        status.set(f"s{i:04d}", "a", entry(i))
    assert 1 <= len(writes) <= 8  # not one full rewrite per submission
    assert Status(tmp_path).data == status.data


def test_a_line_cut_short_by_a_kill_loses_only_that_submission(tmp_path):
    status = Status(tmp_path)
    for i in range(status_module.SMALL + 5):
        status.set(f"s{i:04d}", "a", entry(i))
    with open(status.journal, "a") as f:
        f.write('\n{"student": "cut", "assignment": "a", "entr')  # killed mid-write
    later = Status(tmp_path)
    assert later.get("cut", "a") is None and later.get("s0000", "a") == entry(0)
    later.set("after", "a", entry(1))  # the next run's line is not glued to the cut one
    assert Status(tmp_path).get("after", "a") == entry(1)


def test_an_unchanged_submission_is_skipped_without_reading_its_files(tmp_path, monkeypatch):
    """A run that changes nothing reads no submission (its folder's quick signature is the
    one recorded); a file written again, even with the same bytes, size and modification
    time, is read and fingerprinted again (its change time moved); new bytes are graded."""
    import os

    from grader.grading import autograde
    from support import synthetic

    A = "05_scaled_attention"
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    synthetic.make_submission(root, "ada", A, "correct")
    grading = autograde.Grading(root)
    (_, _, _, fp), = grading.plan()[0]
    Status(root).set("ada", A, {"fingerprint": fp, "status": "graded", "graded_at": 1.0, "elapsed": 1.0,
                                "quick": grading._quick[("ada", A)]})
    reads = []
    real = autograde.read_submission
    monkeypatch.setattr(autograde, "read_submission", lambda folder: reads.append(folder) or real(folder))

    def plan():
        reads.clear()
        todo, refused, skipped = autograde.Grading(root).plan()
        return len(todo), skipped, len(reads)

    assert plan() == (0, 1, 0)
    notebook = root / "submitted" / "ada" / A / f"{A}.ipynb"
    before = os.stat(notebook)
    notebook.write_bytes(notebook.read_bytes())
    os.utime(notebook, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert plan() == (0, 1, 1)  # read again, same fingerprint: still skipped
    assert plan() == (0, 1, 0)  # and recorded: not read the next time
    synthetic.make_submission(root, "ada", A, "stub")
    assert plan() == (1, 0, 1)
