"""A cell past its time limit: interrupted, or stopped with its kernel when it ignores the
interrupt; either way the notebook is still graded, in a real kernel."""
import nbformat
import psutil

from grader.grading.execute import TIMEOUT_ERROR, GradingExecute

# it waits rather than spins: ignoring the interrupt is what is tested, and a spinning cell
# would spend its seconds of CPU for nothing (the sandbox's CPU limits: test_budgets.py)
IGNORES_INTERRUPT = ("import signal, os, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                     "print(os.getpid(), flush=True)\nwhile True:\n    time.sleep(0.05)")


def run(tmp_path, *sources):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    ex = GradingExecute(kernel_name="python3", timeout=2, interrupt_grace=2)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb


def text(cell):
    return "".join(o.get("text", "") + o.get("evalue", "") for o in cell.outputs)


def test_a_cell_that_ignores_its_interrupt_is_stopped_with_its_kernel(tmp_path):
    nb = run(tmp_path, "print('before')", IGNORES_INTERRUPT, "print('after')")
    assert text(nb.cells[0]) == "before\n"
    kernel_pid = int(nb.cells[1].outputs[0].text.split()[0])
    assert any(o.get("ename") == TIMEOUT_ERROR and "kernel was stopped" in o.evalue
               for o in nb.cells[1].outputs), nb.cells[1].outputs
    assert "not run: timed out" in text(nb.cells[2])
    assert not psutil.pid_exists(kernel_pid) or psutil.Process(kernel_pid).status() == "zombie"


def test_a_cell_that_obeys_its_interrupt_leaves_the_kernel_running(tmp_path):
    nb = run(tmp_path, "import time\nwhile True:\n    time.sleep(0.1)", "print('after')")
    assert any(o.get("ename") == "KeyboardInterrupt" for o in nb.cells[0].outputs), nb.cells[0].outputs
    assert text(nb.cells[1]) == "after\n"
