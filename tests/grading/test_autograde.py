"""The instructor pipeline end to end, on a small synthetic class built from the solutions."""
import csv
import html
import re

import nbformat
import pytest

from support.classes import BROKEN, EXPECTED, CLASS_ASSIGNMENT as A, CLASS_BUDGET as BUDGET
from support import settle
from support.gradebook import db_scores
from grader.grading.execute import GradingExecute
from grader.grading.status import Status

pytestmark = pytest.mark.xdist_group("graded_class")
TAMPERED = {  # variant -> what the flag names (graded as usual, flagged for the instructor)
    "deleted_test_cell": "test_sdpa_output was deleted", "edited_test_cell": "was edited",
    "tampered_metadata": "nbgrader metadata changed (grade: True -> False; solution: False -> True",
}


@pytest.fixture
def course(graded_class):
    return graded_class


def test_every_variant_gets_exactly_its_expected_score(course):
    root, summary = course
    assert summary["skipped"] == 0
    scores = db_scores(root)
    assert {k: scores[k] for k in EXPECTED} == {k: float(v) for k, v in EXPECTED.items()}
    for student, assignment, reason in settle.STARVED[root]:  # a loaded machine's first run
        assert "the machine was too busy" in reason and "waited" in reason, (student, reason)
        assert Status(root).get(student, assignment)["status"] == "graded", student


def test_broken_submissions_need_attention_with_their_reason(course):
    root, _ = course
    attention = {s: e["reason"] for s, a, e in Status(root).attention()}
    assert set(attention) == set(BROKEN) | {"attack_os_exit"}  # that one kills the kernel
    for student, words in BROKEN.items():
        assert words in attention[student], attention[student]


def test_export_lists_broken_submissions_and_never_a_silent_zero(course):
    root, _ = course
    with open(root / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == A}
    assert list(rows[next(iter(rows))])[:11] == [
        "assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
        "raw_score", "late_submission_penalty", "score", "max_score"]  # nbgrader's columns first
    for student in BROKEN:
        assert rows[student]["score"] == "" and BROKEN[student] in rows[student]["needs_attention"]
    for student, score in EXPECTED.items():
        assert float(rows[student]["score"]) == score and rows[student]["needs_attention"] == ""


def test_each_test_cell_shows_the_outcome_that_decided_it(course):
    root, _ = course
    nb = nbformat.read(root / "autograded" / "softmax_wrong_dim" / A / f"{A}.ipynb", as_version=4)
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
             if c.metadata.get("nbgrader", {}).get("grade")}
    out = cells["test_sdpa_values"].outputs  # the picture of the smallest failing case, then why
    assert [o.output_type for o in out] == ["display_data", "error"] and out[1].ename == "CheckError"
    assert out[0].data["image/png"]
    # the first failing cell of the exercise names the mistake whole, a later one in a line
    assert 'the same mistake as in the check "matches the reference values without a mask" above: ' \
        "softmax over the wrong dimension" in out[1].evalue
    assert len(out[1].traceback) <= 6  # the message, no grader frame
    first = cells["test_sdpa_no_mask"].outputs
    assert "Likely mistake: softmax over the wrong dimension" in first[-1].evalue
    ok = cells["test_sdpa_output"].outputs
    lines = "".join(o.text for o in ok).splitlines()  # the visible check, then its twin on fresh inputs
    assert {o.output_type for o in ok} == {"stream"} and len(lines) == 2
    assert all(line.startswith("\u2713 ") for line in lines) and "(hidden check, seed" in lines[1]
    entry = Status(root).get("softmax_wrong_dim", A)
    outcome = entry["notebooks"][A]["outcomes"]["test_sdpa_values"][0]
    assert outcome["passed"] is False and outcome["mistake"] == "softmax_wrong_dim"


def test_report_shows_attention_pass_rates_and_misconceptions(course):
    root, _ = course
    report = (root / "reports" / "grade_report.md").read_text()
    for student in BROKEN:
        assert f"| {student} | {A} |" in report
    assert "softmax over the wrong dimension" in report and "no scale" in report
    assert re.search(r"\| test_sdpa_no_mask \| \d+ \| \d+ \|", report)
    for png in ("score_histogram.png", "pass_rate.png", "misconceptions.png"):
        assert (root / "reports" / png).stat().st_size > 1000


def test_feedback_has_no_hidden_test_source(course):
    root, _ = course
    for student in EXPECTED:
        page = root / "feedback" / student / A / f"{A}.html"
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert "hidden=True" not in text and "HIDDEN TESTS" not in text, student
    text = html.unescape(re.sub(r"<[^>]+>", "", (root / "feedback" / "softmax_wrong_dim" / A / f"{A}.html").read_text()))
    assert "Likely mistake: softmax over the wrong dimension" in text


def test_a_hanging_submission_costs_at_most_one_notebook_budget(course):
    root, _ = course
    entry = Status(root).get("infinite_loop", A)
    # one budget of CPU time, within the wall-clock ceiling of wall_factor budgets (not 60 s x 7 cells)
    ceiling = BUDGET * GradingExecute.wall_factor.default_value
    assert entry["status"] == "graded" and entry["elapsed"] < ceiling
    messages = [o["message"] for outs in entry["notebooks"][A]["outcomes"].values() for o in outs
                if not o["passed"]]
    said = ["no answer within"]
    if any(student == "infinite_loop" for student, _, _ in settle.STARVED[root]):
        # a loaded machine starved it in the first run: the second graded it on its ceiling
        said.append("the machine was too busy for this submission twice, so it is graded as it stands")
    assert messages and all(any(s in m for s in said) for m in messages), messages


def test_deleted_test_cell_is_restored_and_graded(course):
    root, _ = course
    nb = nbformat.read(root / "autograded" / "deleted_test_cell" / A / f"{A}.ipynb", as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert "test_sdpa_output" in ids


def test_cells_after_the_last_graded_cell_are_not_run(course):
    """Demonstrations after the last solution or test cell cannot change a grade: grading
    leaves them out (GradingExecute.run_after_last_graded) and says so in their output."""
    from grader.grading.execute import NOT_RUN_NOTE

    root, _ = course
    nb = nbformat.read(root / "autograded" / "correct" / A / f"{A}.ipynb", as_version=4)
    graded = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade")
              or c.metadata.get("nbgrader", {}).get("solution")]
    before = [c for c in nb.cells[:graded[-1]] if c.cell_type == "code" and "nbgrader" not in c.metadata]
    after = [c for c in nb.cells[graded[-1] + 1:] if c.cell_type == "code"]
    assert after and all(c.execution_count is None and [o.get("text") for o in c.outputs] == [NOT_RUN_NOTE]
                         for c in after)
    assert before and all(c.execution_count for c in before)  # the cells before it all ran


def test_tampering_is_flagged_where_the_instructor_looks_and_honest_work_is_not(course):
    """grades.csv, the report and the formgrader's comment name the changed cells; the
    score is the one the course's own cells give."""
    from nbgrader.api import Gradebook

    from support import synthetic
    from grader.grading import layout
    from grader.grading.flags import HEADING

    root, _ = course
    with open(root / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == A}
    report = (root / "reports" / "grade_report.md").read_text()
    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        comments = {s: " ".join(c.auto_comment or "" for c in gb.find_submission_notebook(A, A, s).comments)
                    for s in rows if rows[s]["status"] == "graded"}
    for student, words in TAMPERED.items():
        assert words in rows[student]["flags"], rows[student]["flags"]
        assert HEADING in comments[student] and words in comments[student]
        assert f"| {student} | {A} |" in report
    assert "appears 2 times" in rows["honest_duplicated_test_cell"]["flags"]  # flagged, full marks
    honest = [f"honest_{v}" for v in synthetic.HONEST_VARIANTS if v != "duplicated_test_cell"]
    for student in honest + ["correct", "softmax_wrong_dim", "stub"]:
        assert rows[student]["flags"] == "" and HEADING not in comments[student], student


def test_a_shortcut_hidden_from_the_kernel_fails_and_is_flagged(course):
    root, _ = course
    entry = Status(root).get("attack_hidden_shortcut", A)
    outcomes = [o for outs in entry["notebooks"][A]["outcomes"].values() for o in outs]
    assert outcomes and all(o["mistake"] == "shortcut" for o in outcomes if not o["passed"])
    assert "uses F.scaled_dot_product_attention" in " ".join(o["message"] for o in outcomes)
    kinds = {f["kind"] for f in entry["notebooks"][A]["flags"]}
    assert {"import_machinery", "dynamic_access"} <= kinds
