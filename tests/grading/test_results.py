"""Results as data: every type that crosses a process or a file reads back as it was
written, and the report reads outcomes from the one store, autograded/.status.json."""
import csv
import json

import pytest

from grader.grading.results import CellGrade, NotebookChecks, NotebookResult, Record
from grader.grading.scan import Flag
from grader.grading.status import Status
from grader.grading.submission import SubmissionResult
from grader.outcome import Outcome, check_label

A = "05_scaled_attention"


def _outcomes():
    passed = Outcome("scaled_dot_product_attention", "scaled_dot_product_attention", "values",
                     hidden=True, seed=1234, passed=True,
                     label=check_label("scaled_dot_product_attention", "matches the reference", True, 1234),
                     notes=("uses torch.cumsum",))
    failed = Outcome("masked_softmax", "masked_softmax", "rows_sum_to_one", hidden=False, seed=None,
                     passed=False, label="masked_softmax: each row sums to one",
                     message="masked_softmax: each row sums to one\n  Likely mistake: softmax over the "
                             "wrong dimension \u2014 use dim=-1",
                     mistake="softmax_wrong_dim", mistake_name="softmax over the wrong dimension")
    return passed, failed


def _checks(budget_exceeded=False):
    passed, failed = _outcomes()
    return NotebookChecks(outcomes={"test_sdpa_values": [passed], "test_softmax_rows": [passed, failed]},
                          flags=[Flag("dynamic_access", 3, 2, "getattr with a built name")],
                          budget_exceeded=budget_exceeded)


def _through_json(obj):
    """to_json, through a JSON text (what a file or another process sees), then from_json."""
    return type(obj).from_json(json.loads(json.dumps(obj.to_json())))


def test_an_outcome_reads_back_as_it_was_written_without_its_picture():
    passed, failed = _outcomes()
    assert _through_json(passed) == passed and _through_json(failed) == failed
    assert _through_json(passed).notes == ("uses torch.cumsum",)  # a tuple again, not a list
    pictured = Outcome(**{**vars(failed), "picture": b"\x89PNG..."})
    assert "picture" not in pictured.to_json()  # shown in the graded cell, never stored
    assert _through_json(pictured) == failed
    assert passed.label == "scaled_dot_product_attention: matches the reference (hidden check, seed 1234)"


def test_a_notebooks_checks_and_result_read_back_as_they_were_written():
    checks = _checks(budget_exceeded=True)
    assert _through_json(checks) == checks
    assert isinstance(_through_json(checks).flags[0], Flag)
    result = NotebookResult(grades={"test_sdpa_values": CellGrade(3.0, 3.0, False),
                                    "test_softmax_rows": CellGrade(0.0, 1.0, False),
                                    "written_answer": CellGrade(None, 2.0, True)},
                            comments={"sdpa": "Flagged for review", "other": None},
                            late_penalty=0.6, checks=checks)
    assert _through_json(result) == result


def test_a_submission_result_reads_back_as_it_was_written_without_its_files():
    notebook = NotebookResult(grades={"test_sdpa_values": CellGrade(3.0, 3.0, False)}, checks=_checks())
    result = SubmissionResult("ada", A, "graded", elapsed=4.5, timestamp="2025-10-01T12:00:00",
                              notebooks={A: notebook}, files={f"{A}.ipynb": b"{}"})
    back = _through_json(result)
    assert back == SubmissionResult(**{**vars(result), "files": {}})
    attention = SubmissionResult("bo", A, "needs_attention", "the kernel died", retry=True)
    assert _through_json(attention) == attention


def test_a_status_record_reads_back_as_it_was_written():
    graded = Record("graded", "fp1", 1700000000.5, 4.2, notebooks={A: _checks()})
    attention = Record("needs_attention", "fp2", 1700000001.0, 0.3, reason="the kernel died")
    for record in (graded, attention):
        assert _through_json(record) == record
    assert graded.mistakes() == {f"{A}/test_softmax_rows": "softmax over the wrong dimension"}


def test_the_report_reads_mistakes_flags_and_budgets_from_the_status_file(tmp_path):
    from grader.instructor import report

    status = Status(tmp_path)
    status.set("ada", A, Record("graded", "fp1", 1.0, 4.0, notebooks={A: _checks(budget_exceeded=True)}).to_json())
    status.set("bo", A, Record("needs_attention", "fp2", 2.0, 0.5, reason="the kernel died").to_json())
    read = report.read_status(tmp_path)
    ada, bo = read[("ada", A)], read[("bo", A)]
    assert ada.status == "graded" and ada.notebooks == {A: _checks(budget_exceeded=True)}
    assert ada.mistakes() == {f"{A}/test_softmax_rows": "softmax over the wrong dimension"}
    assert ada.flag_texts() == [f"{A}: ran out of its time budget",
                                f"{A}: cell 4, line 2: getattr with a built name"]
    assert (bo.status, bo.reason, bo.flag_texts()) == ("needs_attention", "the kernel died", [])
    # nothing else is read: a file of outcomes beside an autograded notebook changes nothing
    stray = tmp_path / "autograded" / "bo" / A / f"{A}.grading.json"
    stray.parent.mkdir(parents=True)
    stray.write_text(json.dumps(_checks().to_json()))
    assert report.read_status(tmp_path) == read


def test_grades_csv_and_the_report_take_mistakes_and_flags_from_the_status_file(tmp_path):
    """A submission in the gradebook: its row's mistakes and flags are those of its record."""
    import datetime

    from nbgrader.api import Gradebook

    from grader.instructor import report
    from support import synthetic
    from grader.grading import layout

    root = synthetic.make_course(tmp_path, gradebook=True)
    with Gradebook(layout.db_url(root)) as gb:
        gb.update_or_create_assignment(A, duedate=datetime.datetime(2025, 10, 1, 17, 0))
        gb.update_or_create_student("ada")
        gb.update_or_create_submission(A, "ada", timestamp=datetime.datetime(2025, 10, 1, 12, 0))
    Status(root).set("ada", A, Record("graded", "fp1", 1.0, 4.0, notebooks={A: _checks(True)}).to_json())
    rows = report.gather(root, layout.load_config(root)).rows
    row = next(r for r in rows if (r.student, r.assignment) == ("ada", A))
    assert row.mistakes == {f"{A}/test_softmax_rows": "softmax over the wrong dimension"}
    assert row.flags[:2] == [f"{A}: ran out of its time budget", f"{A}: cell 4, line 2: getattr with a built name"]
    written = report.export(root, quiet=True)
    with open(written["grades"], newline="", encoding="utf-8") as f:
        line = next(r for r in csv.DictReader(f) if r["student_id"] == "ada")
    assert "softmax over the wrong dimension" in line["mistakes"]
    assert "ran out of its time budget" in line["flags"]


def test_the_merge_writes_the_workers_penalty_and_recomputes_it_only_for_a_score_given_by_hand(tmp_path):
    """The late penalty is computed once per score: the worker's is written as it is; a
    regrade that keeps a manual grade (a score the worker never saw) gets the policy's
    penalty for the gradebook's score."""
    import datetime

    from nbgrader.api import Gradebook

    from grader.grading import layout
    from grader.grading.autograde import Grading
    from support import synthetic

    root = synthetic.make_course(tmp_path, gradebook=True)
    due = datetime.datetime(2025, 10, 1, 17, 0)
    with Gradebook(layout.db_url(root)) as gb:
        gb.update_or_create_assignment(A, duedate=due)
        gb.update_or_create_student("ada")
        cells = {g.name: g.max_score for g in gb.find_notebook(A, A).grade_cells}
    late_by = due + datetime.timedelta(days=2, hours=1)  # 3 started days: 30 % under the course's policy

    def merge(penalty):
        result = SubmissionResult("ada", A, "graded", timestamp=late_by.isoformat(), notebooks={A: NotebookResult(
            grades={name: CellGrade(points, points, False) for name, points in cells.items()},
            late_penalty=penalty, checks=_checks())})
        Grading(root).merge(result, "fp")
        with Gradebook(layout.db_url(root)) as gb:
            return gb.find_submission_notebook(A, A, "ada").late_submission_penalty

    total = sum(cells.values())
    assert merge(1.25) == 1.25  # the worker's, not recomputed (the policy would give 30 %)
    first = next(iter(cells))
    with Gradebook(layout.db_url(root)) as gb:
        gb.find_grade(first, A, A, "ada").manual_score = 0.0
        gb.db.commit()
    assert merge(1.25) == pytest.approx(0.3 * (total - cells[first]))
