"""Notebooks 07 and 08 graded end to end by the real pipeline (Grading: nbgrader's
autograde with GradingExecute, the sandboxed kernel, the plans stored in the sources):
a correct submission gets full marks, and wrong ones get exactly the points of the
checks they pass, with their mistakes named in autograded/.status.json. The submissions:
tests/support/later_class.py, graded with 09's and 01 to 06's in one run."""

import nbformat
import pytest

from support.gradebook import cell_points, cell_scores, db_scores, stored_outcomes
from support.later_class import LATER_GROUP, SUBMISSIONS_07_08
from grader.grading import plan
from grader.grading.status import Status

grouped = pytest.mark.xdist_group(LATER_GROUP)


@pytest.fixture
def graded_07_08(later_class):
    return later_class


@grouped
@pytest.mark.parametrize("student", ["correct_07", "correct_08"])
def test_a_correct_submission_gets_full_marks(graded_07_08, student):
    root, _ = graded_07_08
    assignment = SUBMISSIONS_07_08[student][0]
    outcomes = stored_outcomes(root, student, assignment)
    failed = {cell: [o.message for o in outs if not o.passed] for cell, outs in outcomes.items()
              if not all(o.passed for o in outs)}
    assert failed == {}
    assert any(o.hidden for outs in outcomes.values() for o in outs)  # hidden checks ran too
    assert db_scores(root, assignment)[student] == 30.0


@grouped
@pytest.mark.parametrize("student", ["post_norm_hot_after_softmax", "unrescaled_uncropped"])
def test_a_wrong_submission_gets_the_points_of_the_checks_it_passes_and_its_mistakes_named(
        graded_07_08, student):
    root, _ = graded_07_08
    assignment, _, points, named = SUBMISSIONS_07_08[student]
    assert cell_scores(root, student, assignment) == points
    assert db_scores(root, assignment)[student] == sum(points.values())
    outcomes = stored_outcomes(root, student, assignment)
    for cell, key in named.items():
        failed = next(o for o in outcomes[cell] if not o.passed)
        assert failed.mistake == key, failed
        # the first failing check of an exercise names it whole, the later ones in one line (recall)
        assert failed.mistake_name and (f"Likely mistake: {failed.mistake_name}" in failed.message or
                                        f"above: {failed.mistake_name}." in failed.message), failed.message


@grouped
@pytest.mark.parametrize("student", ["no_attention_07", "no_attention_08"])
def test_answers_without_attention_earn_at_most_a_tenth_of_each_part(graded_07_08, student):
    root, _ = graded_07_08
    assignment = SUBMISSIONS_07_08[student][0]
    earned = cell_scores(root, student, assignment)
    parts = {}  # exercise -> (earned, total), from the stored plans
    for cell, outs in stored_outcomes(root, student, assignment).items():
        exercise = outs[0].exercise
        got, total = parts.get(exercise, (0, 0))
        parts[exercise] = (got + earned[cell], total + cell_points(assignment, cell))
    assert len(parts) == 3 and all(total > 0 for _, total in parts.values())
    assert {e: p for e, p in parts.items() if p[0] > p[1] / 10} == {}


@grouped
def test_outcomes_are_stored_once_in_the_status_file(graded_07_08):
    """Each graded test cell's outcomes are in autograded/.status.json and nowhere else
    (the autograded folder keeps the notebooks nbgrader shows, not a second copy)."""
    root, _ = graded_07_08
    assert sorted(p.name for p in (root / "autograded").rglob("*.grading.json")) == []
    for student, (assignment, *_) in SUBMISSIONS_07_08.items():
        record = next(r for s, a, r in Status(root).records() if (s, a) == (student, assignment))
        graded = {c.metadata["nbgrader"]["grade_id"] for c in nbformat.read(
            root / "autograded" / student / assignment / f"{assignment}.ipynb", as_version=4).cells
            if plan.is_test_cell(c)}
        assert set(record.notebooks[assignment].outcomes) == graded, student
        assert all(outs for outs in record.notebooks[assignment].outcomes.values()), student
