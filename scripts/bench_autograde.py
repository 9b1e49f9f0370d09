"""Benchmark: plain sequential `nbgrader autograde` against `make autograde JOBS=N`.

    python scripts/bench_autograde.py [--students 40] [--jobs 2] [--assignments 01_bag_of_words ...]

Builds a synthetic class (every student submits every assignment; answers mixed:
correct, left as the stub, raising, softmax over the wrong dimension), grades one copy
with nbgrader's own CLI, one assignment after another, one copy with grader.autograde
(verification included, as `make autograde` runs it) and one with --no-verify, then
prints the wall times, the speed-up, the seconds per notebook, what verification adds
per submission, and the floor: what starting a kernel and importing torch costs,
measured alone.
"""
import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader import pipeline, synthetic

MIX = ["correct"] * 5 + ["stub"] * 2 + ["exception"] * 2 + ["softmax_wrong_dim"]


def build_class(root, students, assignments, seed=0):
    rng = random.Random(seed)
    for i in range(students):
        for assignment in assignments:
            synthetic.make_submission(root, f"student{i:02d}", assignment, rng.choice(MIX))


def kernel_floor(repeats=3):
    """Seconds to start a Python kernel and import torch in it (median)."""
    from jupyter_client.manager import start_new_kernel

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3")
        kc.execute_interactive("import torch", timeout=120)
        times.append(time.perf_counter() - start)
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return statistics.median(times)


def timed(cmd, cwd):
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--assignments", nargs="*", default=None)
    args = parser.parse_args(argv)
    assignments = args.assignments or pipeline.assignments()
    n = args.students * len(assignments)
    print(f"synthetic class: {args.students} students x {len(assignments)} assignments = {n} notebooks",
          flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        plain = synthetic.make_course(Path(tmp) / "plain")
        ours = synthetic.make_course(Path(tmp) / "ours")
        bare = synthetic.make_course(Path(tmp) / "bare")
        for root in (plain, ours, bare):
            build_class(root, args.students, assignments)
            pipeline.ensure_gradebook(root, pipeline.load_config(root))

        nbgrader = [sys.executable, "-m", "nbgrader", "autograde", "--force"]
        t_plain = sum(timed(nbgrader + [a], plain) for a in assignments)
        print(f"plain nbgrader autograde, sequential: {t_plain:8.1f} s", flush=True)
        t_ours = timed([sys.executable, "-m", "grader.autograde", "--root", str(ours),
                        "--jobs", str(args.jobs)], ours)
        print(f"grader.autograde --jobs {args.jobs}:           {t_ours:8.1f} s", flush=True)
        t_bare = timed([sys.executable, "-m", "grader.autograde", "--root", str(bare),
                        "--jobs", str(args.jobs), "--no-verify"], bare)
        print(f"grader.autograde --jobs {args.jobs} --no-verify: {t_bare:8.1f} s", flush=True)

    floor = kernel_floor()
    print(f"speed-up, verified:                   {t_plain / t_ours:8.2f} x")
    print(f"speed-up, --no-verify:                {t_plain / t_bare:8.2f} x")
    print(f"seconds per notebook, plain:          {t_plain / n:8.2f}")
    print(f"seconds per notebook, verified:       {t_ours / n:8.2f}")
    print(f"seconds per notebook, --no-verify:    {t_bare / n:8.2f}")
    print(f"verification adds per submission:     {(t_ours - t_bare) / n * args.jobs:8.2f} s"
          f" of one worker ({(t_ours - t_bare) / n:.2f} s of wall time with {args.jobs} jobs)")
    print(f"floor (kernel start + import torch):  {floor:8.2f} s")
    print(f"per notebook / floor, --no-verify:    {t_bare / n / floor:8.2f}")
    print(f"per notebook / floor, verified:       {t_ours / n / floor:8.2f}")


if __name__ == "__main__":
    main()
