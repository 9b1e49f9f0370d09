import gc
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.pop("GRADER_DEVICE", None)
# One thread per torch process: the suite runs a process per core and more (xdist workers,
# kernels, grading workers), where a second thread per process only spins (measured: the
# student bundle's build takes 14 s of CPU with two threads and 9 s with one, in the same
# time). Set before anything imports torch; the processes started here inherit it.
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

CLASS_ASSIGNMENT = "05_scaled_attention"  # 5 test cells: 1 + 1 points for properties, 3 + 3 + 2 for values
CLASS_BUDGET = 90  # seconds per notebook: roomy, since the suite grades and runs notebooks in parallel on two cores


def db_scores(root, assignment=CLASS_ASSIGNMENT):
    """{student: total score} of one assignment, read from the course gradebook."""
    from nbgrader.api import Gradebook

    from grader.grading import layout

    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(assignment)}


CLASS_CALL_TIMEOUT = 2  # seconds per call of the student's code (an honest call needs milliseconds): short, for the looping and sleeping answers
CLASS_CELL_TIMEOUT = 5  # seconds per cell (the course's is 60; an honest cell of 05 needs under 0.5): the given cell that calls a hanging answer
SECRET_ENV = "COURSE_INSTRUCTOR_SECRET"  # set in the grading process; must never reach a student


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """One synthetic class graded once by the whole pipeline (the embedded Dask cluster,
    two workers, export and feedback): the variants of tests/test_pipeline.py and the
    honest answers and attacks of tests/test_trust.py. Tests using it are kept on one
    xdist worker (xdist_group)."""
    from grader.instructor import cli as instructor
    from support import synthetic
    from grader.grading.autograde import Grading
    from test_pipeline import BROKEN, EXPECTED
    from test_trust import HONEST_MINOR

    root = synthetic.make_course(tmp_path_factory.mktemp("class"))
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
    summary = Grading(root, jobs=2, budget=CLASS_BUDGET, call_timeout=CLASS_CALL_TIMEOUT).run(progress=False)
    mp.undo()
    instructor.export(root)
    instructor.feedback(root)
    return root, summary

@pytest.fixture(scope="session")
def student_bundle(tmp_path_factory):
    """The student bundle (make student-bundle), built once (about 10 s of CPU) for
    tests/test_bundle.py and tests/test_student_install.py, which share its xdist_group
    ("bundle"): (the bundle's folder, the student package's wheel in it, the wheel unpacked,
    the progress lines the build printed)."""
    import zipfile

    from grader.instructor import bundle

    lines = []
    built = bundle.build(tmp_path_factory.mktemp("dist") / "self-attention-student", progress=lines.append)
    wheel = next(built.glob("*.whl"))
    unpacked = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    return built, wheel, unpacked, lines


# Files whose tests grade whole notebooks, run notebooks, start clusters, sandboxes, a lab
# server or the browser, or install into a fresh environment: marked `grading`, and left
# out by `make test-fast`.
FULL_GRADING = {"test_pipeline.py", "test_pipeline_resume.py", "test_trust.py", "test_term.py",
                "test_dask.py", "test_odd_submissions.py", "test_hostile_class.py",
                "test_budgets.py", "test_cgroups.py",
                "test_warm_kernels.py", "test_lms_term.py", "test_make.py", "test_install.py",
                "test_feedback_channel.py", "test_grading_07_08.py", "test_isolation.py",
                "test_browser.py", "test_notebooks.py", "test_bundle.py", "test_student_install.py", "test_lab.py", "test_cache_demo.py",
                "test_grading_no_attention.py"}


def pytest_collection_modifyitems(items):
    for item in items:
        groups = {m.args[0] for m in item.iter_markers("xdist_group") if m.args}
        if item.path.name in FULL_GRADING or "graded_class" in groups:
            item.add_marker(pytest.mark.grading)
    # the long tests first (a stable sort: each file's tests stay together and in order), so
    # that xdist's workers fill the time around them with the short ones instead of ending
    # on a long one alone
    items.sort(key=lambda item: item.get_closest_marker("grading") is None)


_FIGURES = []
_BROWSER = {"seconds": 0.0, "tests": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    for name, value in getattr(report, "user_properties", []):
        if name == "figure" and report.when == "call":
            _FIGURES.append(value)
    if "test_browser.py::" in report.nodeid:  # their own time: set-up (lab, Chromium), calls, teardown
        _BROWSER["seconds"] += report.duration
        _BROWSER["tests"] += report.when == "call"
        _BROWSER["skipped"] += bool(report.skipped)


def pytest_terminal_summary(terminalreporter):
    for figure in _FIGURES:
        terminalreporter.write_line(f"verification: {figure}")
    if _BROWSER["tests"] or _BROWSER["skipped"]:
        terminalreporter.write_line(
            f"browser tests: {_BROWSER['tests']} run, {_BROWSER['skipped']} skipped, "
            f"{_BROWSER['seconds']:.0f} s in all (lab server and Chromium included)")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """An xdist worker collects its garbage before it reports that it has finished, then
    freezes what is left. pytest ends each process with two full gc.collect() calls
    (_pytest/unraisableexception.py) over some 600,000 objects (torch, nbgrader, the checks):
    a second of CPU, so several seconds on a loaded machine; but once every worker has
    reported, the controller ends them, and execnet sends a worker still busy 5 s later a
    SIGINT, which printed a KeyboardInterrupt traceback after [100%]. Collected here (pytest's
    hook for unraisable exceptions still installed, so any is reported as before) while the
    controller waits for the report, those two calls find nothing left to traverse."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        gc.collect()
        gc.freeze()
