"""Benchmark: one synthetic class graded by plain nbgrader and on Dask, 1 and 2 workers.

    python scripts/bench_autograde.py [--students 6] [--assignments 05_scaled_attention ...]
                                      [--runs stock,plain,local1,local2,external2]
                                      [--estimate-submissions 10000] [--estimate-workers 64]

Builds a synthetic class (every student submits every assignment; answers mixed:
correct, left as the stub, raising, softmax over the wrong dimension) and grades one
copy of it each way, in this order:

  stock      stock nbgrader: `nbgrader autograde` on a copy of the course whose
             nbgrader_config.py only names its folders, so nbgrader's own Execute runs
             every cell, test cells included, in the notebook's plain python3 kernel
  plain      plain `nbgrader autograde` (its CLI), one assignment after another; the
             course's nbgrader_config.py makes it grade the way make autograde does
  local1     `python -m grader.grading.autograde --jobs 1`: the embedded LocalCluster
  local2     the same with --jobs 2
  hostile2   local2 on the same class with hostile classmates beside it (tests/support/synthetic.py's
             RESOURCE_HOGS: 120 CPU-bound processes, memory spread over processes, a fork
             bomb; they need a cgroup per sandbox): the class's own submissions' worker
             time is compared with local2's
  external2  `--scheduler` on a `dask scheduler` with two `dask worker` processes
             started here (their start is timed apart)

and prints, for each: wall time, seconds per notebook, and against local1 the speed-up
and the scaling efficiency (throughput with N workers / (N x throughput with 1)). Then
the floor (start the grading kernel and import torch, measured alone), a worker's time
per submission (as the workers report it), what the client spends merging one result
into a class of --estimate-submissions, and from those figures an ESTIMATE of the
time to grade --estimate-submissions on --estimate-workers workers. Every gradebook is
compared at the end: each way must give every student the same scores.
"""
import argparse
import dataclasses
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from grader.grading import layout

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support import synthetic  # noqa: E402 (tests/support: the test classes)

MIX = ["correct"] * 5 + ["stub"] * 2 + ["exception"] * 2 + ["softmax_wrong_dim"]
RUNS = ("stock", "plain", "local1", "local2", "hostile2", "external2")
STOCK_CONFIG = """c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "self-attention"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
"""


def build_class(root, students, assignments, seed=0):
    rng = random.Random(seed)
    for i in range(students):
        for assignment in assignments:
            synthetic.make_submission(root, f"student{i:03d}", assignment, rng.choice(MIX))


def timed(cmd, cwd, echo=False):
    """Seconds cmd takes; echo: its output lines are shown as they come (autograde's own
    progress), indented, instead of kept for an error message only."""
    start = time.perf_counter()
    if not echo:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        out, err = proc.stdout, proc.stderr
    else:
        with tempfile.TemporaryFile("w+") as errors:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=errors, text=True)
            lines = []
            for line in proc.stdout:
                lines.append(line)
                print(f"    {line.rstrip()}", flush=True)
            proc.wait()
            errors.seek(0)
            out, err = "".join(lines), errors.read()
    if proc.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{out[-2000:]}\n{err[-3000:]}")
    return time.perf_counter() - start


def kernel_floor(kernel_name, repeats=3):
    """Seconds to start the grading kernel and import torch in it (median of repeats, after
    one start that is not counted: it starts this process's warm template)."""
    from jupyter_client.manager import KernelManager

    times = []
    for _ in range(repeats + 1):
        workdir = tempfile.mkdtemp(prefix="bench-floor-")
        start = time.perf_counter()
        km = KernelManager(kernel_name=kernel_name)
        km.start_kernel(cwd=workdir)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=300)
        reply = kc.execute_interactive("import torch", timeout=300)
        times.append(time.perf_counter() - start)
        assert reply["content"]["status"] == "ok", reply["content"]
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return statistics.median(times[1:])


def scores(root, assignments):
    """{(student, assignment): score or "needs attention"} from the gradebook and status."""
    from nbgrader.api import Gradebook

    from grader.grading.status import Status

    config = layout.load_config(root)
    found = {}
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        for assignment in assignments:
            for sub in gb.assignment_submissions(assignment):
                found[(sub.student.id, assignment)] = sub.score
    for student, assignment, entry in Status(root).entries():
        if entry["status"] == "needs_attention":
            found[(student, assignment)] = "needs attention"
    return found


def task_seconds(root, students=None):
    """The seconds each submission took on its worker, as recorded in the status (of the
    given students only, if any)."""
    from grader.grading.status import Status

    return [e["elapsed"] for student, _, e in Status(root).entries()
            if e.get("elapsed") and (students is None or student in students)]


def merge_cost(root, entries, samples=10):
    """Seconds the client spends merging one result into a class whose status holds
    `entries` submissions: one real result, graded here, merged under new names."""
    from grader.grading.autograde import Grading
    from grader.grading.status import Status
    from grader.grading.submission import grade_submission

    warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings, as in make autograde
    grading = Grading(root, force=True)
    todo, _, _ = grading.plan()
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
        job, fp = next(grading.complete_jobs(todo[:1], tmp))
        result = grade_submission(job)
    known = list(Status(root).entries())
    _, assignment, entry = known[0]
    padded = {f"padding{i:06d}": {assignment: entry} for i in range(entries - len(known))}
    status = Status(root)
    status.data.update(padded)
    status._write()
    grading.status = Status(root)
    names = [f"merged{i:03d}" for i in range(samples)]
    layout.add_students(root, grading.config, names)
    times = []
    for name in names:
        start = time.perf_counter()
        grading.merge(dataclasses.replace(result, student=name), fp)
        times.append(time.perf_counter() - start)
    grading.status.flush()
    return statistics.median(times), result.status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--assignments", nargs="*", default=None)
    parser.add_argument("--runs", default=",".join(RUNS),
                        help=f"which of {','.join(RUNS)} to run (local1 is the reference)")
    parser.add_argument("--estimate-submissions", type=int, default=10_000)
    parser.add_argument("--estimate-workers", type=int, default=64)
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = sorted(set(runs) - set(RUNS))
    if unknown or "local1" not in runs:
        parser.error(f"--runs takes some of {', '.join(RUNS)}, local1 included (unknown: {unknown})")
    if "hostile2" in runs:
        from grader.isolation import cgroups, isolation_available

        available, why = isolation_available()
        if not (available and cgroups.support().version):
            print(f"hostile2 left out: its classmates need a sandbox with a cgroup of its own "
                  f"({why or cgroups.support().reason})")
            runs.remove("hostile2")
    assignments = args.assignments or layout.assignments()
    n = args.students * len(assignments)
    print(f"synthetic class: {args.students} students x {len(assignments)} assignments = "
          f"{n} notebooks (one per submission)", flush=True)

    from grader.grading.autograde import WORKER_MEMORY
    from support.processes import ProcessCluster
    from grader.grading.status import Status

    autograde = [sys.executable, "-m", "grader.grading.autograde", "--force"]
    wall, roots = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        template = synthetic.make_course(Path(tmp) / "template")
        print(f"building the class: {n} submissions, then {len(runs)} runs: {', '.join(runs)}", flush=True)
        build_class(template, args.students, assignments)
        layout.ensure_gradebook(template, layout.load_config(template))  # not timed
        for run in runs:
            roots[run] = Path(shutil.copytree(template, Path(tmp) / run))
        if "hostile2" in roots:
            for hog in synthetic.RESOURCE_HOGS:
                synthetic.make_hog(roots["hostile2"], f"hostile_{hog}", hog)

        def sequential(nbgrader, root, run):
            total = 0.0
            for k, a in enumerate(assignments, 1):
                print(f"    nbgrader autograde {a} ({k}/{len(assignments)}, {args.students} submissions)", flush=True)
                total += timed(nbgrader + [a], root)
            return total

        for number, run in enumerate(runs, 1):
            root = roots[run]
            print(f"[{number}/{len(runs)}] {run}: grading {n} notebooks ...", flush=True)
            if run == "stock":
                (root / "nbgrader_config.py").write_text(STOCK_CONFIG.format(root=str(root)))
                nbgrader = [sys.executable, "-m", "nbgrader", "autograde", "--force"]
                wall[run] = sequential(nbgrader, root, run)
                label = "stock nbgrader (its Execute, python3 kernel), sequential"
            elif run == "plain":
                nbgrader = [sys.executable, "-m", "nbgrader", "autograde", "--force"]
                wall[run] = sequential(nbgrader, root, run)
                label = "plain nbgrader autograde, sequential"
            elif run.startswith("local") or run == "hostile2":
                jobs = int(run[-1])
                wall[run] = timed(autograde + ["--root", root, "--jobs", str(jobs)], root, echo=True)
                label = f"embedded LocalCluster, {jobs} worker(s)" + (
                    f", {len(synthetic.RESOURCE_HOGS)} hostile classmates added" if run == "hostile2" else "")
            else:
                start = time.perf_counter()
                with ProcessCluster(Path(tmp) / "cluster", workers=2, memory=WORKER_MEMORY) as cluster:
                    started = time.perf_counter() - start
                    wall[run] = timed(autograde + ["--root", root, "--scheduler", cluster.address], root, echo=True)
                label = f"external scheduler, 2 workers (their start: {started:.1f} s, not counted)"
            print(f"{run:10s} {label:62s} {wall[run]:8.1f} s  {wall[run] / n:6.2f} s/notebook",
                  flush=True)

        per_task = task_seconds(roots["local1"])
        own = {f"student{i:03d}" for i in range(args.students)}
        beside = {run: task_seconds(roots[run], own) for run in ("local2", "hostile2") if run in runs}
        # stock nbgrader runs the checks in the student's kernel: its scores are its own
        graded = {run: {k: v for k, v in scores(roots[run], assignments).items() if k[0] in own}
                  for run in runs if run != "stock"}
        reference = graded["local1"]
        disagree = {run: sorted(k for k in set(g) | set(reference) if g.get(k) != reference.get(k))
                    for run, g in graded.items()}
        why = {}  # what each way recorded for a submission the ways disagree on (folders go next)
        for key in sorted({k for keys in disagree.values() for k in keys}):
            for run in runs:
                entry = Status(roots[run]).get(*key) or {}
                why[(run, key)] = (entry.get("status"), round(entry.get("elapsed") or 0, 1),
                                   (entry.get("reason") or "")[:300])
        merge, merged = merge_cost(roots["local1"], args.estimate_submissions)

    floor = kernel_floor(layout.load_config(layout.ROOT).GradingExecute.get("kernel_name")
                         or "python3")
    print()
    print("throughput against local1 (1 worker):")
    for run in runs:
        workers = 1 if run in ("stock", "plain", "local1") else 2
        if run == "hostile2":
            continue  # more submissions than the others: its worker times are compared below
        speedup = wall["local1"] / wall[run]
        efficiency = speedup / workers
        print(f"  {run:10s} {workers} worker(s): {speedup:5.2f}x the throughput, "
              f"scaling efficiency {efficiency:4.2f}")
    if "plain" in wall:
        print(f"  local2 against plain nbgrader: {wall['plain'] / wall.get('local2', wall['local1']):.2f}x")
    if "stock" in wall:
        for run in ("local1", "local2"):
            if run in wall:
                print(f"  {run} against stock nbgrader: {wall['stock'] / wall[run]:.2f}x")
    mean_task = statistics.mean(per_task)
    print(f"floor: start the grading kernel and import torch     {floor:6.2f} s "
          "(a submission's fixed cost in its kernel)")
    print(f"one worker's time per submission (local1, mean)      {mean_task:6.2f} s "
          f"({mean_task / floor:.2f}x the floor; min {min(per_task):.1f}, max {max(per_task):.1f})")
    for run, times in beside.items():
        print(f"the class's own submissions' worker time, {run:8s}      {statistics.mean(times):6.2f} s "
              f"mean, {max(times):.1f} s max ({'beside' if run == 'hostile2' else 'without'} "
              "the hostile classmates)")
    print(f"client: merging one result into {args.estimate_submissions} submissions    "
          f"{merge * 1000:6.0f} ms (a {merged} result)")
    for run, keys in disagree.items():
        if keys:
            print(f"SCORES DIFFER in {run} from local1 for {len(keys)} submission(s): {keys[:5]}")
    for (run, key), (status, elapsed, reason) in why.items():
        print(f"  {run:10s} {key[0]} {key[1]}: score {graded[run].get(key)}, {status}, "
              f"{elapsed} s{', ' + reason if reason else ''}")
    if not any(disagree.values()):
        print(f"scores: every run gave every submission the same score ({len(reference)} submissions)")

    N, W = args.estimate_submissions, args.estimate_workers
    efficiency = min([wall["local1"] / wall[r] / 2 for r in ("local2", "external2") if r in wall] or [1.0])
    best = N * mean_task / W
    worst = best / min(1.0, efficiency)
    client = N * merge
    print()
    print(f"ESTIMATE, not a measurement: {N} submissions on {W} workers (one core each, this "
          "machine's per-submission cost)")
    print(f"  workers: {best / 60:5.1f} min if they scale perfectly, {worst / 60:5.1f} min at the "
          f"scaling efficiency measured here ({min(1.0, efficiency):.2f})")
    print(f"  client:  {client / 60:5.1f} min of merging, done while the workers grade "
          f"({'not' if client < best else 'IS'} the limit)")
    print(f"  total:   about {max(best, client) / 60:.0f} to {max(worst, client) / 60:.0f} min, "
          "plus starting the workers")
    print(json.dumps({"notebooks": n, "wall": wall, "floor": floor, "task_mean": mean_task,
                      "own_task_mean": {run: statistics.mean(t) for run, t in beside.items()},
                      "merge": merge, "estimate_min": [max(best, client) / 60, max(worst, client) / 60]}))


if __name__ == "__main__":
    main()
