"""Notebook 09 graded end to end by the real pipeline (nbgrader's autograde with
GradingExecute, the sandboxed kernel, the plans stored in the source): a correct submission
gets full marks; wrong ones get exactly the points of the checks they pass, with the
mistakes of issue #32 named in autograded/.status.json (RoPE's pairing, positions from 0,
GQA's tile and head 0, a window of W + 1, a cache that grows, which only the module's
report of what it holds, read through the kernel channel, can show). Answers that do no
attention are graded with the notebook's own plans by tests/checks/test_no_points_without_attention.py.
The submissions: tests/support/later_class.py, graded with 07's, 08's and 01 to 06's in one run."""
import re

import nbformat
import pytest

from support.gradebook import db_scores
from support.later_class import LATER_GROUP, NB09, SUBMISSIONS_09
from grader.grading.status import Status
from support.paths import ROOT

pytestmark = [pytest.mark.grading, pytest.mark.xdist_group(LATER_GROUP)]


@pytest.fixture
def graded_09(later_class):
    return later_class


def _outcomes(root, student):
    record = next(r for s, a, r in Status(root).records() if (s, a) == (student, NB09))
    return record.notebooks[NB09].outcomes


def _points(root, student):
    from nbgrader.api import Gradebook

    from grader.grading import layout

    assert Status(root).get(student, NB09)["status"] == "graded"
    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        notebook = gb.find_submission(NB09, student).notebooks[0]
        return {grade.name: grade.score for grade in notebook.grades}


def _cell_points():
    path = ROOT / "solutions" / NB09 / f"{NB09}.ipynb"
    return {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
            for c in nbformat.read(path, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade")}


def test_a_correct_submission_gets_full_marks(graded_09):
    root, _ = graded_09
    outcomes = _outcomes(root, "correct_09")
    failed = {cell: [o.message for o in outs if not o.passed] for cell, outs in outcomes.items()
              if not all(o.passed for o in outs)}
    assert failed == {}
    assert any(o.hidden for outs in outcomes.values() for o in outs)  # hidden checks ran too
    assert db_scores(root, NB09)["correct_09"] == sum(_cell_points().values()) == 27.0


@pytest.mark.parametrize("student", ["half_split_tiled_plus_one", "from_zero_head_zero_uncropped"])
def test_a_wrong_submission_gets_the_points_of_the_checks_it_passes_and_its_mistakes_named(graded_09, student):
    root, _ = graded_09
    _, points, named = SUBMISSIONS_09[student]
    assert _points(root, student) == points
    assert db_scores(root, NB09)[student] == sum(points.values())
    outcomes = _outcomes(root, student)
    for cell, key in named.items():
        failed = next(o for o in outcomes[cell] if not o.passed)
        assert failed.mistake == key, failed
        if key != "cache_grows":  # the memory check says what it saw in its own words
            # named once: in full where first seen, by reference in a later check
            assert failed.mistake_name and (f"Likely mistake: {failed.mistake_name}" in failed.message or re.search(
                rf'the same mistake as in the check ".+" above: {re.escape(failed.mistake_name)}', failed.message))
    first = [o for outs in outcomes.values() for o in outs if not o.passed and o.mistake in named.values()]
    for key in set(named.values()) - {"cache_grows"}:
        o = next(o for o in first if o.mistake == key)
        assert f"Likely mistake: {o.mistake_name}" in o.message, o.message


def test_the_window_of_w_plus_one_is_named_where_the_students_own_parts_are_right(graded_09):
    """In the first wrong submission Part C also uses the wrong apply_rope and GQA: its
    prompt check names the first cause it recognises, never a mistake it does not make."""
    root, _ = graded_09
    outcomes = _outcomes(root, "half_split_tiled_plus_one")
    failed = next(o for o in outcomes["test_window_prompt"] if not o.passed)
    assert failed.mistake in (None, "kv_tiled", "window_plus_one"), failed
