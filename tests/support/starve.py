"""A machine that keeps a sandbox from the CPU, made deterministic for the tests: while a
cell marked `# starved` runs, the sandbox's cgroup may use 2 % of one CPU (a CPU quota,
which its kernel spends waiting in the run queue, as on a machine busy with other work;
the kernel's run-queue delay says so, as it would there). While a cell marked `# busy`
runs, the machine is busy for real: processes spinning on the host, outside any sandbox."""
import os
import subprocess
import sys

from jupyter_core.utils import run_sync

from grader.grading.execute import GradingExecute

MARK = "# starved"
SHARE = 0.02
BUSY = "# busy"
SPINNING = "spinning"  # what a spinner writes once it runs
SPINNER = f"import sys\nsys.stdout.write({SPINNING!r})\nsys.stdout.flush()\nwhile True: pass"


def cpu_quota(group, share):
    """Limit a sandbox's cgroup (grader.isolation.cgroups.SandboxCgroup) to `share` of one
    CPU; None lifts the limit."""
    period = 100_000
    if group.support.version == "v1":
        (group.folders["cpu"] / "cpu.cfs_quota_us").write_text(str(int(share * period)) if share else "-1")
    else:
        (group.folders["unified"] / "cpu.max").write_text(f"{int(share * period)} {period}" if share else "max")


class StarvedExecute(GradingExecute):
    """GradingExecute whose sandbox is starved while a cell marked `# starved` runs. Name it
    in nbgrader's configuration (`support.starve.StarvedExecute`) in place of
    grader.grading.execute.GradingExecute."""

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        starved = MARK in cell.source
        if starved:
            cpu_quota(self.km.provisioner.cgroup, SHARE)
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        finally:
            if starved:
                cpu_quota(self.km.provisioner.cgroup, None)

    execute_cell = run_sync(async_execute_cell)


def spinners():
    """Two processes more than the machine has cores, each spinning on the host: a kernel
    then gets at most cores / (cores + 3) of a core (0.4 of a core on two), so a cell's CPU
    seconds take over twice as long in wall time. Returned once every one of them spins."""
    hogs = [subprocess.Popen([sys.executable, "-I", "-S", "-c", SPINNER], stdout=subprocess.PIPE)
            for _ in range((os.cpu_count() or 1) + 2)]
    for hog in hogs:
        hog.stdout.read(len(SPINNING))
    return hogs


class BusyExecute(GradingExecute):
    """GradingExecute on a machine kept busy (spinners()) while a cell marked `# busy` runs,
    and only then: spinning through the kernel's start and the other cells as well would
    only take CPU from the rest of the suite."""

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        hogs = spinners() if BUSY in cell.source else []
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
                hog.stdout.close()

    execute_cell = run_sync(async_execute_cell)
