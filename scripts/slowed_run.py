"""Run a command as if this machine were FACTOR times slower: the ten-minute goal of `make test`
holds on the slowest machines of a kind, which a maintainer rarely has at hand.

    python scripts/slowed_run.py [--factor 1.7] [--] [command ...]     (default: make test)
    make test-slowed [FACTOR=1.7] [SLOWED_CMD="bash .ci/run"]

How: two control groups of the cpu controller (cgroup v1, as root), side by side. The command
and everything it starts run in one, with the default weight (cpu.shares 1024); in the other a
busy loop pinned to each core, with the weight 1024 * (FACTOR - 1). Where the command keeps
every core busy, as the test suite does (busy 96 to 98 % of a run), each core gives it
1 / FACTOR of its time: its CPU-bound work takes FACTOR times as long, while sleeps, timeouts
and waits on a clock take as long as they do anywhere, as on a slower machine. The groups the
grading sandboxes make (grader.isolation.cgroups) are made inside the command's group, so
they are slowed too. Where the command runs on one core only, the kernel's scheduler gives
the group's whole weight to that core and it is slowed less: both factors are measured and
printed first (a pure-Python loop run on every core at once, then on one: its wall
time over its CPU time).

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
from grader.isolation.cgroups import remove_groups  # noqa: E402 (standard library only, no venv needed)

CPU = Path("/sys/fs/cgroup/cpu")
SHARES = 1024  # cgroup v1's default weight
# The calibration: a pure-Python loop of about 2 s of CPU, timed inside its own process; on a
# machine otherwise idle its wall time is its CPU time, so wall / CPU is the slow-down it saw.
SPIN = ("import time\nwall, cpu = time.perf_counter(), time.process_time()\ntotal = 0\n"
        "for i in range(40_000_000):\n    total += i\n"
        "print((time.perf_counter() - wall) / (time.process_time() - cpu))")
BUSY = "while True:\n    pass"


def _own_group():
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return CPU / path.lstrip("/")
    return None


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


class Groups:
    """The command's group and the load's, made beside each other under this process's group."""

    def __init__(self, factor):
        base = _own_group() / f"slowed-{uuid.uuid4().hex[:8]}"
        self.command, self.load = base / "command", base / "load"
        self.base, self.loops = base, []
        for folder in (base, self.command, self.load):
            folder.mkdir()
        (self.command / "cpu.shares").write_text(str(SHARES))
        (self.load / "cpu.shares").write_text(str(max(2, round(SHARES * (factor - 1)))))

    def enter(self, group):
        """A preexec_fn: the child process joins `group` before it runs anything."""
        return lambda: (group / "cgroup.procs").write_text(str(os.getpid()))

    def start_load(self):
        for core in sorted(os.sched_getaffinity(0)):
            loop = subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=self.enter(self.load))
            os.sched_setaffinity(loop.pid, {core})
            self.loops.append(loop)

    def close(self):
        for loop in self.loops:
            loop.kill()
            loop.wait()
        remove_groups((self.command, self.load, self.base))


def _calibrate(groups):
    """(the slow-down on every core at once, on one core), with the load running: a loop's wall
    time over its CPU time, the loop run in the command's group on every core, then on one."""
    def measure(copies):
        loops = [subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True,
                                  preexec_fn=groups.enter(groups.command)) for _ in range(copies)]
        return min(float(loop.communicate()[0]) for loop in loops)
    groups.start_load()
    time.sleep(0.5)  # the loops started
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
    groups = Groups(args.factor)
    try:
        every, one = _calibrate(groups)
        print(f"==> slowed {args.factor:g}x: measured {every:.2f}x with every core busy, {one:.2f}x "
              f"on one core; running: {shlex.join(command)}", flush=True)
        start = time.perf_counter()
        status = subprocess.run(command, preexec_fn=groups.enter(groups.command)).returncode
        wall = time.perf_counter() - start
    finally:
        groups.close()
    minutes, seconds = divmod(round(wall), 60)
    print(f"==> {shlex.join(command)}: exit status {status}, {minutes} min {seconds} s of wall time "
          f"slowed {args.factor:g}x (measured {every:.2f}x on every core, {one:.2f}x on one)", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
