"""A submission's fixed cost: a worker's time for everything but the submission's own
cells and checks, and where it goes.

    python scripts/bench_fixed_cost.py [--submissions 8]

Grades, in this process and one after another (as one Dask worker does), submissions of
05 whose code cells are all blank: no cell of the student's runs and every check fails
at once on a missing name, so a worker's time for them is the fixed cost (the
gradebook copied in and out, nbgrader's autograde preprocessors, the sandboxed kernel
forked from the warm template, its handshake, the channel's code sent once, the
autograded notebook and results read back). The first submission, which starts the
warm template, is not counted. Prints the median and best of the others, then the
phases of one more: cumulative seconds of a few calls (cProfile), and the wall time of
the kernel's start, handshake and shutdown (coroutines, timed by a wrapper).
"""
import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import nbformat

from grader.grading import layout

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support import synthetic  # noqa: E402 (tests/support: the test classes)

A = "05_scaled_attention"
SYNC_PHASES = {  # label: (file part, function) in the profile, cumulative seconds
    "nbgrader autograde, in all": ("nbgrader/apps/api.py", "autograde"),
    "test cells: checks, the channel's code sent once": ("grader/grading/execute.py", "_grade_test_cell"),
    "gradebook: nbgrader's database sessions": ("nbgrader/api.py", "__init__"),
    "reading the results back": ("grader/grading/submission.py", "_results"),
}
ASYNC_PHASES = {  # label: (class, coroutine method) timed by a wrapper (cProfile splits coroutines)
    "kernel start (the sandbox forked from the template)": ("jupyter_client.manager:AsyncKernelManager", "start_kernel"),
    "  of which the sandbox's launch, until its kernel runs": ("grader.isolation.provisioner:SandboxProvisioner", "launch_kernel"),
    "kernel handshake (nbclient waits for kernel_info)": ("grader.grading.kernel_client:GradingKernelClient", "wait_for_ready"),
    "kernel shutdown": ("jupyter_client.manager:AsyncKernelManager", "shutdown_kernel"),
}
TIMED = {}


def time_coroutines():
    """Wrap each ASYNC_PHASES coroutine so that its wall time is added to TIMED."""
    import functools
    import importlib

    for label, (where, method) in ASYNC_PHASES.items():
        module, cls = where.split(":")
        owner = getattr(importlib.import_module(module), cls)
        original = getattr(owner, method)

        @functools.wraps(original)
        async def timed(*args, __original=original, __label=label, **kwargs):
            start = time.perf_counter()
            try:
                return await __original(*args, **kwargs)
            finally:
                TIMED[__label] = TIMED.get(__label, 0.0) + time.perf_counter() - start
        setattr(owner, method, timed)


def blank(nb):
    for cell in nb.cells:
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = ""
    return nb


def jobs(root, count):
    from grader.grading.autograde import Grading

    for i in range(count):
        folder = Path(root) / "submitted" / f"blank{i:03d}" / A
        folder.mkdir(parents=True)
        nb = nbformat.read(Path(root) / "notebooks" / A / f"{A}.ipynb", as_version=4)
        nbformat.write(blank(nb), folder / f"{A}.ipynb")
    grading = Grading(root, force=True)
    todo, _, _ = grading.plan()
    return grading, todo


def phases(profile):
    stats = pstats.Stats(profile)
    found = {}
    for (path, _, name), (_, _, _, cumulative, _) in stats.stats.items():
        for label, (part, function) in SYNC_PHASES.items():
            if name == function and path.endswith(part):
                found[label] = max(found.get(label, 0.0), cumulative)
    return {label: found.get(label, 0.0) for label in SYNC_PHASES}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=8)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings, as in make autograde
    from grader.grading.submission import grade_submission

    with tempfile.TemporaryDirectory(prefix="bench-fixed-") as tmp:
        root = synthetic.make_course(Path(tmp) / "course")
        layout.ensure_gradebook(root, layout.load_config(root))
        grading, todo = jobs(root, args.submissions + 2)
        work = Path(tmp) / "work"
        work.mkdir()
        pending = list(grading.complete_jobs(todo, str(work)))
        seconds, cpu = [], []
        for job, _ in pending[:-1]:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            result = grade_submission(job)
            seconds.append(time.perf_counter() - wall0)
            cpu.append(time.process_time() - cpu0)
            assert result.status == "graded", result.reason
        time_coroutines()
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.runcall(grade_submission, pending[-1][0])
        profiled = time.perf_counter() - start
    counted, counted_cpu = seconds[1:], cpu[1:]
    print(f"fixed cost of a submission (05, {len(counted)} blank submissions, one worker, "
          f"warm template): median {statistics.median(counted):.2f} s, best {min(counted):.2f} s "
          f"(the worker process's own CPU: median {statistics.median(counted_cpu):.2f} s)")
    print(f"first submission (starts the warm template, not counted): {seconds[0]:.2f} s")
    print(f"one more, profiled ({profiled:.2f} s with the profiler's overhead):")
    for label, value in {**phases(profile), **{k: TIMED.get(k, 0.0) for k in ASYNC_PHASES}}.items():
        print(f"  {label:62s} {value:6.2f} s")


if __name__ == "__main__":
    main()
