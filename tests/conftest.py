import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.pop("GRADER_DEVICE", None)

CLASS_ASSIGNMENT = "05_scaled_attention"  # 5 test cells: 1 + 1 points for properties, 3 + 3 + 2 for values
CLASS_BUDGET = 90  # seconds per notebook: roomy, since the suite grades and runs notebooks in parallel on two cores


def db_scores(root, assignment=CLASS_ASSIGNMENT):
    """{student: total score} of one assignment, read from the course gradebook."""
    from nbgrader.api import Gradebook

    from grader import pipeline

    config = pipeline.load_config(root)
    with Gradebook(pipeline.db_url(root), config.CourseDirectory.course_id) as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(assignment)}


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """One synthetic class graded once by the whole pipeline (workers, verification,
    export, feedback): the variants of tests/test_pipeline.py and the attacks of
    tests/test_verify.py. Tests using it are kept on one xdist worker (xdist_group)."""
    from grader import autograde, instructor, synthetic, verify
    from test_pipeline import BROKEN, EXPECTED
    from test_verify import HONEST

    root = synthetic.make_course(tmp_path_factory.mktemp("class"))
    for variant in [*EXPECTED, *BROKEN]:
        synthetic.make_submission(root, variant, CLASS_ASSIGNMENT, variant)
    for student, (variant, _) in HONEST.items():
        synthetic.make_submission(root, student, CLASS_ASSIGNMENT, variant)
    for attack in synthetic.ATTACKS:
        synthetic.make_attack(root, f"attack_{attack}", attack)
    mp = pytest.MonkeyPatch()
    mp.setattr(verify, "CALL_TIMEOUT", 10)
    summary = autograde.Grading(root, jobs=2, budget=CLASS_BUDGET).run(progress=False)
    mp.undo()
    instructor.export(root)
    instructor.feedback(root)
    return root, summary

_FIGURES = []


def pytest_runtest_logreport(report):
    for name, value in getattr(report, "user_properties", []):
        if name == "figure" and report.when == "call":
            _FIGURES.append(value)


def pytest_terminal_summary(terminalreporter):
    for figure in _FIGURES:
        terminalreporter.write_line(f"verification: {figure}")
