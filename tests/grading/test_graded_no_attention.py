"""Notebooks 01 to 06 graded end to end by the real pipeline (as `make autograde` grades)
with answers that do no attention: each earns at most a tenth of each part's points.
(07 and 08: tests/grading/test_graded_07_08.py; every exercise's baselines through the checks
themselves: tests/checks/test_no_points_without_attention.py.) The submissions:
tests/support/later_class.py, graded with 07's, 08's and 09's in one run."""
import pytest

from support.gradebook import cell_points, cell_scores, stored_outcomes
from support.later_class import LATER_GROUP, SUBMISSIONS_NO_ATTENTION

grouped = pytest.mark.xdist_group(LATER_GROUP)


@pytest.fixture
def graded(later_class):
    return later_class[0]


@grouped
@pytest.mark.parametrize("student", list(SUBMISSIONS_NO_ATTENTION))
def test_answers_without_attention_earn_at_most_a_tenth_of_each_part(graded, student):
    assignment = SUBMISSIONS_NO_ATTENTION[student][0]
    earned = cell_scores(graded, student, assignment)
    parts = {}  # exercise -> (earned, total)
    for cell, outs in stored_outcomes(graded, student, assignment).items():
        got, total = parts.get(outs[0].exercise, (0, 0))
        parts[outs[0].exercise] = (got + earned[cell], total + cell_points(assignment, cell))
    assert parts and all(total > 0 for _, total in parts.values())
    assert {e: p for e, p in parts.items() if p[0] > p[1] / 10} == {}
