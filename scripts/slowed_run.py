"""Run a command as if this machine were FACTOR times slower: the ten-minute goal of `make test`
holds on the slowest machines of a kind, which a maintainer rarely has at hand.

    python scripts/slowed_run.py [--factor 1.7] [--] [command ...]     (default: make test)
    make test-slowed [FACTOR=1.7] [SLOWED_CMD="bash .ci/run"]

How: a control group of the cpu controller (cgroup v1, as root) whose CPU time is capped at
1 / FACTOR of the machine's (cpu.cfs_quota_us: the cores times the period, over FACTOR); the
command and everything it starts run in it. Where the command keeps every core busy, as the
test suite does (busy 96 to 98 % of a run), its CPU-bound work then takes FACTOR times as long,
while sleeps, timeouts and waits on a clock take as long as they do anywhere, as on a slower
machine. The groups the grading sandboxes make (grader.isolation.cgroups) are made inside the
command's group, so they are capped with it. A stretch where the command keeps only one core
busy stays under the cap and runs at this machine's speed (a slower machine would slow it too),
so the figure is a lower bound there. The cap is measured first (a pure-Python loop on every
core at once, then on one: its wall time over its CPU time), and the share of the command's
scheduling periods that hit the cap is printed at the end.

Prints the command's own output, then its wall time, slowed and measured factors included.
Needs root and the cpu controller of cgroup v1 (`/sys/fs/cgroup/cpu`); elsewhere it says so
and runs nothing (on one core, `taskset -c 0 make test` slows a 2-core machine about 2x).
"""
import argparse
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file: the repository's packages
from grader.isolation.cgroups import own_groups, remove_groups  # noqa: E402 (standard library only, no venv needed)

CPU = Path("/sys/fs/cgroup/cpu")
PERIOD = 100_000  # microseconds: the kernel's default scheduling period for a quota
# The calibration: a pure-Python loop that runs for 3 s of wall time in a process of its own; on
# a machine otherwise idle it gets as much CPU time, so wall / CPU is the slow-down it saw (copies
# run at once all run for the same 3 s, none gets the cores to itself at the end).
SPIN = ("import time\nwall, cpu = time.perf_counter(), time.process_time()\n"
        "while time.perf_counter() - wall < 3:\n    sum(range(10_000))\n"
        "print((time.perf_counter() - wall) / (time.process_time() - cpu))")


def _own_group():
    """This process's group of the cpu controller, or None."""
    path = own_groups().get("cpu")
    return None if path is None else CPU / path.lstrip("/")


def _unavailable():
    """Why this machine cannot be slowed here, or ""."""
    if os.geteuid() != 0:
        return "needs root (it makes control groups)"
    if not (CPU / "cgroup.procs").exists():
        return ("needs the cpu controller of cgroup v1 at /sys/fs/cgroup/cpu; this machine "
                "has cgroup v2 or none")
    group = _own_group()
    if group is None or not group.is_dir():
        return "this process is in no group of the cpu controller"
    return ""


def _enclosing_cap(group):
    """The smallest CPU cap, in cores, of `group` and the groups above it (inf where none has one)."""
    cap = float("inf")
    while group != CPU.parent and (group / "cpu.cfs_quota_us").exists():
        quota = int((group / "cpu.cfs_quota_us").read_text())
        if quota > 0:
            cap = min(cap, quota / int((group / "cpu.cfs_period_us").read_text()))
        group = group.parent
    return cap


class Capped:
    """The command's group, under this process's group: its CPU time capped at 1 / factor of
    every core's."""

    def __init__(self, factor):
        parent = _own_group()
        self.folder = parent / f"slowed-{uuid.uuid4().hex[:8]}"
        self.folder.mkdir()
        # the kernel refuses a cap above an enclosing group's (this run inside a slowed one)
        cores = min(len(os.sched_getaffinity(0)) / factor, _enclosing_cap(parent))
        (self.folder / "cpu.cfs_period_us").write_text(str(PERIOD))
        (self.folder / "cpu.cfs_quota_us").write_text(str(max(1000, int(cores * PERIOD))))

    def enter(self):
        """A preexec_fn: the child process joins the group before it runs anything."""
        return lambda: (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def stat(self):
        """The group's cpu.stat: {nr_periods, nr_throttled, throttled_time}."""
        return {k: int(v) for k, v in (l.split() for l in (self.folder / "cpu.stat").read_text().splitlines())}

    def close(self, wait=5.0):
        """Remove the group, and the groups of sandboxes the command left in it (those of killed
        gradings, which a later grading sweeps: grader.isolation.cgroups), waiting at most
        `wait` seconds for their processes to end; True if gone."""
        inner = sorted((f for f in self.folder.rglob("*") if f.is_dir()), key=lambda f: -len(f.parts))
        return remove_groups([*inner, self.folder], wait)


def _calibrate(group):
    """(the slow-down of a loop run on every core at once, of one run alone): its wall time
    over its CPU time, run in the group."""
    def measure(copies):
        loops = [subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True,
                                  preexec_fn=group.enter()) for _ in range(copies)]
        return min(float(loop.communicate()[0]) for loop in loops)  # the least slowed
    return measure(len(os.sched_getaffinity(0))), measure(1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factor", type=float, default=1.7, help="how many times slower (default 1.7)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command (default: make test)")
    args = parser.parse_args(argv)
    command = [a for a in args.command if a != "--"] or ["make", "test"]
    if args.factor <= 1:
        parser.error("--factor must be more than 1")
    problem = _unavailable()
    if problem:
        print(f"slowed_run: cannot slow this machine: {problem}", file=sys.stderr)
        return 2
    group = Capped(args.factor)
    try:
        every, one = _calibrate(group)
        print(f"==> slowed {args.factor:g}x: measured {every:.2f}x with every core busy, {one:.2f}x "
              f"with one; running: {shlex.join(command)}", flush=True)
        before = group.stat()
        start = time.perf_counter()
        status = subprocess.run(command, preexec_fn=group.enter()).returncode
        wall = time.perf_counter() - start
        after = group.stat()
    finally:
        if not group.close():
            print(f"slowed_run: the group {group.folder} is left: processes the command started are "
                  "still in it (rmdir it once they have ended)", file=sys.stderr)
    periods = after["nr_periods"] - before["nr_periods"]
    capped = (after["nr_throttled"] - before["nr_throttled"]) / periods if periods else 0.0
    minutes, seconds = divmod(round(wall), 60)
    print(f"==> {shlex.join(command)}: exit status {status}, {minutes} min {seconds} s of wall time "
          f"slowed {args.factor:g}x (measured {every:.2f}x with every core busy, {one:.2f}x with one; "
          f"{capped:.0%} of its busy periods hit the cap)", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
