"""Budgets in the sandbox's own time: a cell and a notebook are limited by the time they
compute or wait, less the time the machine kept them from a CPU (measured), or by the CPU
their sandbox uses where that is more; a loaded machine cannot spend them, sleeping does. A
wall-clock ceiling several times larger stops a notebook only when the machine starves it,
and says so; the second time, the notebook is graded at its ceiling."""
import nbformat
import pytest
from nbconvert.preprocessors import CoalesceStreamsPreprocessor
from traitlets.config import Config

from grader.grading.execute import CELL_CPU_ERROR, MEMORY_ERROR, WALL_CEILING_ERROR, GradingExecute
from grader.isolation import KERNEL_NAME, cgroups, isolation_available, sandbox_settings
from support.starve import BUSY, BusyExecute, StarvedExecute

available, why = isolation_available()
support = cgroups.support()
pytestmark = [pytest.mark.skipif(not available, reason=f"no isolation here: {why}"),
              pytest.mark.skipif(not support.version, reason=support.reason),
              pytest.mark.xdist_group("isolation")]

SPIN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\nprint('done')"


def execute(tmp_path, cells, timeout, budget, wall_factor=100, executor=GradingExecute, **settings):
    """Run cells through GradingExecute in a sandboxed kernel; each cell's (type, name or text).
    The wall-clock ceiling is far off (100 x the CPU limits) unless a test is about it: a
    machine loaded by other work may give a sandbox a few percent of a core."""
    config = sandbox_settings(Config({"GradingExecute": {
        "kernel_name": KERNEL_NAME, "timeout": timeout, "notebook_budget": budget,
        "wall_factor": wall_factor, **settings}}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    executor(config=config).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    CoalesceStreamsPreprocessor().preprocess(nb, {})  # a print the kernel flushed in two pieces, as one
    return [[(o.output_type, o.get("ename") or o.get("text", "")) for o in c.outputs] for c in nb.cells]


def errors(outputs):
    return [name for kind, name in outputs if kind == "error"]


def test_a_busy_machine_does_not_spend_a_cells_cpu_limit(tmp_path):
    """On a machine that spinning processes keep busy (support.starve.spinners, while each
    `# busy` cell runs), a cell that computes for 0.5 s of CPU takes longer than its 1 s limit
    in wall time (at most 0.4 of a core: 1.25 s), and is within that limit; a cell that spins
    forever is interrupted once it has used 1 s of CPU."""
    computed, spun, after = execute(tmp_path, [f"{BUSY}\n" + SPIN.format(seconds=0.5), f"{BUSY}\nwhile True: pass",
                                               "print('after')"], timeout=1, budget=60, executor=BusyExecute)
    assert computed == [("stream", "done\n")]
    assert CELL_CPU_ERROR in errors(spun)
    assert after == [("stream", "after\n")]


def test_a_cell_that_only_waits_is_stopped_after_its_limit(tmp_path):
    waited, after = execute(tmp_path, ["import time\ntime.sleep(600)", "print('after')"],
                            timeout=2, budget=60)
    assert CELL_CPU_ERROR in errors(waited)
    assert after == [("stream", "after\n")]


def test_waiting_uses_the_budget_like_computing_and_the_cells_after_time_out(tmp_path):
    """A notebook's time is its own whether it computes or waits: a cell that sleeps is
    interrupted when it has used what is left of a 3 s budget (the sleep spends it by
    construction, on any machine), the cell before keeps its output and the cell after
    is not run and says it timed out."""
    cells = ["print('before')", "import time\ntime.sleep(600)", "print('after')"]
    config = sandbox_settings(Config({"GradingExecute": {
        "kernel_name": KERNEL_NAME, "timeout": 60, "notebook_budget": 3, "wall_factor": 100}}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    ex = GradingExecute(config=config)
    ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    before, slept, after = ([(o.get("ename"), o.get("evalue") or o.get("text")) for o in c.outputs]
                            for c in nb.cells)
    assert before == [(None, "before\n")]
    assert any(name == CELL_CPU_ERROR and "ran for more than" in text and "waiting" in text
               for name, text in slept), slept
    assert [name for name, _ in after] == ["NotebookTimeBudgetExceeded"]
    assert "timed out: the notebook used up its time budget of 3 s" in after[0][1]
    assert ex._checks.budget_exceeded and not ex._checks.stalled


def starved_run(tmp_path, grade_at_ceiling):
    """A cell that computes while the machine starves it: budget 3 s, ceiling 3 x 3 s."""
    config = sandbox_settings(Config({"GradingExecute": {
        "kernel_name": KERNEL_NAME, "timeout": 30, "notebook_budget": 3, "wall_factor": 3,
        "grade_at_ceiling": grade_at_ceiling}}))
    cells = ["print('before')", "# starved\nwhile True: pass", "print('after')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    ex = StarvedExecute(config=config)
    ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return ex._checks, [[(o.get("ename"), o.get("evalue") or o.get("text") or "") for o in c.outputs]
                        for c in nb.cells]


def test_a_starved_notebook_needs_attention_once_then_is_graded_at_its_ceiling(tmp_path):
    """Starved (its kernel measured waiting for a CPU), the notebook reaches its wall-clock
    ceiling with most of its budget left: the machine was too busy, it is graded again
    later, never scored from that run. The second time (grade_at_ceiling, which make
    autograde sets) it is graded as it stands: the cell before keeps its output, the
    starved cell and the cell after time out."""
    checks, (before, starved, after) = starved_run(tmp_path, grade_at_ceiling=False)
    assert before == [(None, "before\n")]
    assert checks.stalled and "the machine was too busy" in checks.stall_reason, checks
    assert "waited" in checks.stall_reason and "for a CPU" in checks.stall_reason
    assert [name for name, _ in after] == [WALL_CEILING_ERROR]

    checks, (before, starved, after) = starved_run(tmp_path, grade_at_ceiling=True)
    assert before == [(None, "before\n")]
    assert not checks.stalled and checks.budget_exceeded
    assert any("timed out" in text and "too busy for this submission twice" in text
               for _, text in starved + after), (starved, after)
    assert after and all(name for name, _ in after)  # not run: an error says why


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



def test_time_hidden_in_a_child_or_a_stopped_kernel_is_still_the_notebooks(tmp_path):
    """Ways to wait without computing: a child process that sleeps while the kernel waits
    for it, a read from a pipe that never gets data, a kernel that stops itself (SIGSTOP,
    which an interrupt cannot end). Each is charged like computing: the first two are
    interrupted at their 2 s limit, the stopped kernel is stopped with its sandbox, and
    the notebook is graded (the cells after it are not run and say why)."""
    child = ("import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(600)\n    os._exit(0)\n"
             "os.waitpid(pid, 0)")
    pipe = "import os\nr, w = os.pipe()\nos.read(r, 1)"
    stop = "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)"
    outputs = execute(tmp_path, ["print('before')", child, pipe, "print('between')", stop, "print('after')"],
                      timeout=2, budget=60, interrupt_grace=2)
    assert outputs[0] == [("stream", "before\n")]
    assert CELL_CPU_ERROR in errors(outputs[1]) and CELL_CPU_ERROR in errors(outputs[2])
    assert outputs[3] == [("stream", "between\n")]
    assert CELL_CPU_ERROR in errors(outputs[4]) and len(errors(outputs[4])) >= 2  # interrupted, then stopped
    assert errors(outputs[5]) == ["CellTimeoutError"]  # not run: the kernel was stopped
