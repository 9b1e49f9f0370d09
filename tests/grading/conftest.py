"""Fixtures of the grading tests: the graded class and the later class, each graded once per
session (and its starved notebooks once more, where a loaded machine starved some:
tests/support/settle.py)."""
import pytest

from support.classes import (BROKEN, CLASS_ASSIGNMENT, CLASS_BUDGET, CLASS_CALL_TIMEOUT, CLASS_CELL_TIMEOUT,
                             EXPECTED, HONEST_MINOR, SECRET_ENV)


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """One synthetic class graded once by the whole pipeline (the embedded Dask cluster,
    two workers, export and feedback): the variants of tests/grading/test_autograde.py and
    the honest answers and attacks of tests/grading/test_trust.py (their tables:
    tests/support/classes.py). Tests using it are kept on one xdist worker (xdist_group)."""
    from grader.instructor import cli as instructor
    from support import settle, synthetic
    from grader.grading.autograde import Grading

    root = synthetic.make_course(tmp_path_factory.mktemp("class"), gradebook=True)
    with open(root / "nbgrader_config.py", "a") as config:  # the class's three hanging answers
        config.write(f"\nc.Execute.timeout = {CLASS_CELL_TIMEOUT}\n")  # hang in a given cell too
    for variant in [*EXPECTED, *BROKEN]:
        synthetic.make_submission(root, variant, CLASS_ASSIGNMENT, variant)
    for variant in synthetic.HONEST_VARIANTS:
        synthetic.make_honest(root, f"honest_{variant}", variant)
    synthetic.make_honest(root, HONEST_MINOR, "einsum", nbformat_minor=4)
    for attack in synthetic.ATTACKS:
        synthetic.make_attack(root, f"attack_{attack}", attack)
    mp = pytest.MonkeyPatch()
    mp.setenv(SECRET_ENV, "do-not-leak-7f3a")
    summary = settle.grade_settled(
        root, lambda: Grading(root, jobs=2, budget=CLASS_BUDGET, call_timeout=CLASS_CALL_TIMEOUT))
    mp.undo()
    instructor.export(root)
    instructor.feedback(root)
    return root, summary


@pytest.fixture(scope="session")
def later_class(tmp_path_factory):
    """The submissions of notebooks 01 to 04, 06, 07, 08 and 09 of tests/support/later_class.py,
    graded in one run with the course's limits (the embedded Dask cluster, two workers):
    (course folder, summary). Tests using it share the xdist group LATER_GROUP."""
    import nbformat

    from support import settle, synthetic
    from support.later_class import LATER_BUDGET, LATER_CALL_TIMEOUT, later_submissions
    from grader.grading.autograde import Grading

    root = synthetic.make_course(tmp_path_factory.mktemp("later_class"), gradebook=True)
    for student, assignment, edits in later_submissions():
        nb = synthetic.answered(root, assignment, assignment,
                                edit=lambda gid, src, edits=edits: edits.get(gid, lambda s: s)(src))
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    summary = settle.grade_settled(
        root, lambda: Grading(root, jobs=2, budget=LATER_BUDGET, call_timeout=LATER_CALL_TIMEOUT))
    return root, summary
