import collections
import gc
import importlib.util
import os
import resource
import shutil
import sys
import tempfile

from pathlib import Path

import pytest

# tests/ mirrors the code (README "Layout"): tests/checks, tests/grading, tests/isolation,
# tests/instructor, tests/notebooks, tests/browser, tests/install, each with the conftest.py of
# its own fixtures; what tests of several folders share lives in tests/support/ (imported as
# `support`, this folder being on sys.path), never in a test module or a conftest.
TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
os.environ.pop("GRADER_DEVICE", None)
# One thread per torch process: the suite runs a process per core and more (xdist workers,
# kernels, grading workers), where a second thread per process only spins (measured: the
# student bundle's build takes 14 s of CPU with two threads and 9 s with one, in the same
# time). Set before anything imports torch; the processes started here inherit it.
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")
# pytest compiles every test module, and every module of a plugin's package (hypothesis's
# hundred, loaded after this file), with its assertions rewritten, and keeps the result in
# __pycache__ (gitignored) unless bytecode may not be written: where PYTHONDONTWRITEBYTECODE
# is set, each test process compiled them all again (measured: collecting the suite took
# 8.4 CPU s each time, 5.2 s with the cache). The test processes write it; the processes they
# start keep the environment's setting (what `make install` compiles is all they import).
sys.dont_write_bytecode = False

# Files whose tests grade whole notebooks, run notebooks, start clusters, sandboxes, a lab
# server or the browser, or install into a fresh environment: marked `grading`, and left
# out by `make test-fast`.
FULL_GRADING = {
    "grading/test_autograde.py", "grading/test_autograde_resume.py", "grading/test_trust.py",
    "grading/test_dask.py", "grading/test_odd_submissions.py", "grading/test_hostile_class.py",
    "grading/test_budgets.py", "grading/test_feedback_channel.py", "grading/test_graded_07_08.py",
    "grading/test_graded_no_attention.py",
    "isolation/test_isolation.py", "isolation/test_cgroups.py", "isolation/test_warm_kernels.py",
    "instructor/test_term.py", "instructor/test_lms_term.py", "instructor/test_make.py",
    "install/test_install.py", "install/test_bundle.py", "install/test_student_install.py",
    "notebooks/test_notebooks.py", "notebooks/test_cache_demo.py",
    "browser/test_browser.py", "browser/test_lab.py", "checks/test_gpu_check.py",
    "instructor/test_feedback_pages.py", "instructor/test_class_size.py", "grading/test_timeouts.py",
    "checks/test_attempts.py"}  # paths under tests/ (the attempts: `pytest tests/checks/test_attempts.py` alone)


def _under_tests(path):
    """A test file's path under tests/, as FULL_GRADING names it ("grading/test_trust.py")."""
    try:
        return path.relative_to(TESTS).as_posix()
    except ValueError:  # a file outside tests/ (a notebook given to nbval, a test's own tmp_path)
        return path.name


@pytest.fixture
def commands_share_the_template(monkeypatch):
    """For tests that grade through a command (`make autograde`, `nbgrader autograde`, the
    formgrader's server) only to compare what it gives (`@pytest.mark.usefixtures(...)`): the
    command's kernels fork from this test process's warm template (grader.isolation.template.ENV,
    as a grading process's Dask workers do) instead of the command starting one of its own
    (about 6 CPU seconds). Never for a run that is interrupted or killed, or one on real Dask
    workers (the first two runs of tests/grading/test_autograde_resume.py, tests/grading/test_dask.py):
    what they show is that a command's own template and kernels end with it."""
    from support.templates import template_env

    for name, value in template_env().items():
        monkeypatch.setenv(name, value)


# Wall seconds of the longest xdist groups and ungrouped tests in a full run on the 2-core
# machine (`--durations`, loaded): the collection is sorted longest first, so that the workers
# fill the time around them with short tests instead of ending on a long one alone. xdist then
# hands out the groups with the most tests first (--dist loadgroup reorders its units by their
# number of tests unless --no-loadscope-reorder is given; a stable sort): this order decides
# among groups of as many tests, and among the single tests, which come after every group.
# Only the order depends on these figures, never a verdict.
LONGEST = {"bundle": 460, "graded_class": 450, "browser": 410, "dask": 390, "hostile": 215, "term": 200,
           "test_formgrader_nbgrader_and_make_autograde_grade_the_same": 170,
           "test_a_pypi_only_machine_gets_the_cpu_build_and_no_cuda_package": 160,
           "test_ctrl_c_then_a_crash_then_a_plain_rerun_grade_everything_once": 145,
           "later_class": 200, "isolation": 130, "odd": 125, "lms_term": 110,
           "test_the_quick_run_compares_every_exercise_and_mistake_cpu_against_cpu": 85,
           "test_make_autograde_regrades_one_student": 70,
           "test_victims_graded_right_after_attackers_in_one_worker_keep_their_grades": 55,
           "feedback_channel": 50, "exchange_accounts": 50, "nbval_strict": 85, "nbval_lax": 15, "idle_time": 35}


# The most the suite has written under the temp folder at once (a full run on the 2-core machine:
# 1.9 GiB under pytest's base folder at its peak, kernels' and gradings' folders besides).
TEMP_PEAK_GIB = 2.5


def pytest_report_header(config):
    """The temp folder's free space, first thing in the run: a disk that fills up fails hundreds
    of tests at once, each with an error far from its cause (No space left on device, or
    tempfile's "No usable temporary directory found")."""
    try:
        folder = tempfile.gettempdir()
        free = shutil.disk_usage(folder).free / 2**30
    except OSError as err:
        return f"temp folder: unusable ({err}): expect most tests to fail"
    low = (f": less than the {TEMP_PEAK_GIB} GiB the suite writes there at its peak, expect "
           "'No space left on device'") if free < TEMP_PEAK_GIB else ""
    return f"temp folder {folder}: {free:.1f} GiB free{low}"


def _group(item):
    groups = [m.args[0] for m in item.iter_markers("xdist_group") if m.args]
    return groups[0] if groups else None


def pytest_collection_modifyitems(items):
    for item in items:
        if _under_tests(item.path) in FULL_GRADING or _group(item):  # a group shares a costly fixture
            item.add_marker(pytest.mark.grading)
    # longest first (a stable sort: a group's or a file's tests stay together and in order)
    items.sort(key=lambda item: (-LONGEST.get(_group(item) or item.originalname, 0),
                                 item.get_closest_marker("grading") is None))


_FIGURES = []
_BROWSER = {"seconds": 0.0, "tests": 0, "skipped": 0}
_CPU = collections.Counter()  # test file under tests/ -> CPU seconds of its tests (set-up, call and teardown)
_CPU_KEY = pytest.StashKey[float]()


def _cpu_seconds():
    """User and system time of this process and of every process it started and waited for
    (kernels, sandboxes, Dask workers, pip, make: reaped by their parents in turn)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _measured(item):
    """The body of the three hookwrappers below: the CPU seconds of one phase of a test."""
    start = _cpu_seconds()
    yield
    item.stash[_CPU_KEY] = _cpu_seconds() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    report.user_properties.append(("cpu", item.stash.get(_CPU_KEY, 0.0)))  # reaches the xdist controller
    item.stash[_CPU_KEY] = 0.0


def pytest_runtest_logreport(report):
    for name, value in getattr(report, "user_properties", []):
        if name == "figure" and report.when == "call":
            _FIGURES.append(value)
    cpu = [value for name, value in getattr(report, "user_properties", []) if name == "cpu"]
    if cpu:
        path = report.nodeid.split("::")[0].removeprefix("tests/")
        _CPU[path] += cpu[-1]  # the phase's own, the last one appended
    if "browser/test_browser.py::" in report.nodeid:  # their own time: set-up (lab, Chromium), calls, teardown
        _BROWSER["seconds"] += report.duration
        _BROWSER["tests"] += report.when == "call"
        _BROWSER["skipped"] += bool(report.skipped)


_MACHINE = {}


def pytest_sessionstart(session):
    from support import machine

    _MACHINE.update(busy=machine.busy_cpu_seconds(), stalls=machine.stall_seconds())


def pytest_terminal_summary(terminalreporter):
    for figure in _FIGURES:
        terminalreporter.write_line(f"verification: {figure}")
    if _MACHINE:
        from support import machine

        busy, stalls = machine.since(_MACHINE["busy"], _MACHINE["stalls"])
        shown = [f"{busy:.0f} CPU s busy in all (every process, /proc/stat)"] if busy is not None else []
        if stalls:
            shown.append("tasks kept waiting for " + ", ".join(f"{kind} {seconds:.0f} s" for kind, seconds
                                                             in stalls.items()) + " (/proc/pressure)")
        if shown:
            terminalreporter.write_line("the machine during the run: " + "; ".join(shown))
    if _CPU:
        folders = collections.Counter()
        for path, seconds in _CPU.items():
            folders["(servers)" if path == SHARED else path.rpartition("/")[0] or "."] += seconds
        by_folder = ", ".join(f"{folder} {seconds:.0f}" for folder, seconds in folders.most_common())
        terminalreporter.write_line(f"CPU seconds of the tests (user and system, processes they waited for "
                                    f"included): {sum(_CPU.values()):.0f} in all; by folder: {by_folder}")
        costliest = _CPU.most_common(12)
        terminalreporter.write_line("the costliest files: " + ", ".join(f"{path} {seconds:.0f}"
                                                                        for path, seconds in costliest))
    if _BROWSER["tests"] or _BROWSER["skipped"]:
        terminalreporter.write_line(
            f"browser tests: {_BROWSER['tests']} run, {_BROWSER['skipped']} skipped, "
            f"{_BROWSER['seconds']:.0f} s in all (lab server and Chromium included)")
    # the run's own process, its tests done; where psutil is installed (not in the bare
    # environment of the GPU tests: tests/checks/test_gpu_check.py)
    if not hasattr(terminalreporter.config, "workerinput") and importlib.util.find_spec("psutil"):
        from support.processes import stop_left_running

        left = stop_left_running(str(terminalreporter.config._tmp_path_factory.getbasetemp()))
        if left:
            terminalreporter.write_line(
                f"processes the tests left running, stopped now: {len(left)}: "
                + "; ".join(f"pid {pid}: {command[:200]}" for pid, command in left), red=True)


SHARED = "(servers kept by a test process: kernel template, worker forkserver)"


def _stop_shared_servers():
    """Stop and reap what a test process keeps between gradings: the warm kernel template
    (grader.isolation.template) and multiprocessing's forkserver that forks the embedded Dask
    workers. Their CPU, and that of the kernels and workers they reaped, is counted only
    once they are reaped: at the end of the session, not in any one test."""
    if "grader.isolation.template" in sys.modules:
        sys.modules["grader.isolation.template"].close_shared()
    if "multiprocessing.forkserver" in sys.modules:
        sys.modules["multiprocessing.forkserver"]._forkserver._stop()  # waits for it


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a venv without xdist runs these tests too
def pytest_testnodedown(node, error):
    """The controller: the CPU seconds an xdist worker's kept servers used (its session's end)."""
    _CPU[SHARED] += getattr(node, "workeroutput", {}).get("shared_cpu", 0.0)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """An xdist worker collects its garbage before it reports that it has finished, then
    freezes what is left. pytest ends each process with two full gc.collect() calls
    (_pytest/unraisableexception.py) over some 600,000 objects (torch, nbgrader, the checks):
    a second of CPU, so several seconds on a loaded machine; but once every worker has
    reported, the controller ends them, and execnet sends a worker still busy 5 s later a
    SIGINT, which printed a KeyboardInterrupt traceback after [100%]. Collected here (pytest's
    hook for unraisable exceptions still installed, so any is reported as before) while the
    controller waits for the report, those two calls find nothing left to traverse. First,
    the servers the process kept are stopped and their CPU counted (_stop_shared_servers)."""
    worker = hasattr(session.config, "workeroutput")  # an xdist worker (not a pytest one started)
    before = _cpu_seconds()
    _stop_shared_servers()
    if not worker:
        _CPU[SHARED] += _cpu_seconds() - before
        return
    session.config.workeroutput["shared_cpu"] = _cpu_seconds() - before
    gc.collect()
    gc.freeze()
