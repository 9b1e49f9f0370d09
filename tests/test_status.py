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
