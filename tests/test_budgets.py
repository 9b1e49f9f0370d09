"""Budgets in CPU time: a cell and a notebook are limited by the CPU their own sandbox
uses, not by the wall clock that a loaded machine stretches; a wall-clock ceiling several
times larger stops a notebook only when the machine stalls, and says so."""
import subprocess
import sys

import nbformat
import pytest
from traitlets.config import Config

from grader.grading.execute import CELL_CPU_ERROR, MEMORY_ERROR, WALL_CEILING_ERROR, GradingExecute
from grader.isolation import KERNEL_NAME, cgroups, isolation_available, sandbox_settings

available, why = isolation_available()
support = cgroups.support()
pytestmark = [pytest.mark.skipif(not available, reason=f"no isolation here: {why}"),
              pytest.mark.skipif(not support.version, reason=support.reason),
              pytest.mark.xdist_group("isolation")]

SPIN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\nprint('done')"


def execute(tmp_path, cells, timeout, budget, wall_factor=100):
    """Run cells through GradingExecute in a sandboxed kernel; each cell's (type, name or text).
    The wall-clock ceiling is far off (100 x the CPU limits) unless a test is about it: a
    machine loaded by other work may give a sandbox a few percent of a core."""
    config = sandbox_settings(Config({"GradingExecute": {
        "kernel_name": KERNEL_NAME, "timeout": timeout, "notebook_budget": budget,
        "wall_factor": wall_factor}}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    GradingExecute(config=config).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return [[(o.output_type, o.get("ename") or o.get("text", "")) for o in c.outputs] for c in nb.cells]


def errors(outputs):
    return [name for kind, name in outputs if kind == "error"]


@pytest.fixture
def busy_machine():
    """Six processes that spin on the host (outside any sandbox) while the test runs."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(6)]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


def test_a_busy_machine_does_not_spend_a_cells_cpu_limit(tmp_path, busy_machine):
    """On a machine that six spinning processes keep busy, a cell that computes for 2 s of
    CPU takes longer than that in wall time, and is within its 3 s CPU limit; a cell that
    spins forever is interrupted once it has used 3 s of CPU."""
    computed, spun, after = execute(tmp_path, [SPIN.format(seconds=2), "while True: pass",
                                               "print('after')"], timeout=3, budget=60)
    assert computed == [("stream", "done\n")]
    assert CELL_CPU_ERROR in errors(spun)
    assert after == [("stream", "after\n")]


def test_a_cell_that_only_waits_is_stopped_after_its_limit(tmp_path):
    waited, after = execute(tmp_path, ["import time\ntime.sleep(600)", "print('after')"],
                            timeout=2, budget=60)
    assert CELL_CPU_ERROR in errors(waited)
    assert after == [("stream", "after\n")]


def test_the_notebook_budget_counts_cpu_not_waiting(tmp_path):
    """Three cells that wait 1 s each fit a 3 s CPU budget; CPU spent past it is refused."""
    cells = ["import time\ntime.sleep(1)\nprint(1)"] * 3 + [SPIN.format(seconds=4), "print('late')"]
    outputs = execute(tmp_path, cells, timeout=30, budget=3)
    assert outputs[:3] == [[("stream", "1\n")]] * 3
    assert errors(outputs[3])  # stopped at what was left of the budget
    assert errors(outputs[4]) == ["NotebookTimeBudgetExceeded"]


def test_a_stalled_notebook_reaches_its_wall_ceiling_and_says_so(tmp_path):
    """Budget 4 s of CPU, ceiling 2 x 4 s of wall time: cells that wait 3 s each (each
    within its 4 s limit) reach it."""
    cells = ["import time\ntime.sleep(3)"] * 4
    outputs = execute(tmp_path, cells, timeout=30, budget=4, wall_factor=2)
    assert errors(outputs[-1]) == [WALL_CEILING_ERROR]



def test_a_cell_that_ignores_its_interrupt_is_stopped_at_its_cpu_limit(tmp_path):
    """A cell that ignores SIGINT and spins is stopped with its sandbox once it has used its
    2 s CPU limit and a short grace, not at the wall-clock ceiling (here 600 x 2 s, which
    the test would sit out): the cell before it keeps its output, the cells after it are
    not run and say why."""
    ignores = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    config = sandbox_settings(Config({"GradingExecute": {
        "kernel_name": KERNEL_NAME, "timeout": 2, "notebook_budget": 600, "wall_factor": 600}}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c)
                                         for c in ["print('before')", ignores, "print('after')"]])
    GradingExecute(config=config).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    before, spun, after = ([(o.output_type, o.get("evalue") or o.get("text")) for o in c.outputs]
                           for c in nb.cells)
    assert before == [("stream", "before\n")]
    messages = [text for kind, text in spun if kind == "error"]
    assert "used more than 2 s of CPU time and was interrupted" in messages[0]
    assert "ignored the interrupt, so the kernel was stopped" in messages[-1]
    assert after and after[0][0] == "error" and "not run: timed out" in after[0][1]


def test_a_kernel_killed_for_memory_says_so_and_the_notebook_is_still_graded(tmp_path):
    """A cell that touches 1 GiB in a sandbox allowed 512 MiB for all its processes: the
    kernel is killed by the sandbox's memory limit, the cell says so (not 'the kernel
    died'), the cells before it keep their outputs and the cells after it are not run."""
    config = sandbox_settings(Config({"GradingExecute": {
        "kernel_name": KERNEL_NAME, "timeout": 30, "notebook_budget": 60}}), total_memory=2**29)
    hog = "x = bytearray(2**30)\nx[::4096] = b'1' * len(x[::4096])"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c)
                                         for c in ["print('before')", hog, "print('after')"]])
    GradingExecute(config=config).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    before, hogged, after = ([(o.get("ename"), o.get("evalue") or o.get("text")) for o in c.outputs]
                             for c in nb.cells)
    assert before == [(None, "before\n")]
    assert [name for name, _ in hogged] == [MEMORY_ERROR]
    assert "stopped for using more than its memory limit (0.5 GiB" in hogged[0][1]
    assert after[0][0] == MEMORY_ERROR and "not run" in after[0][1]
