"""The notebook's time budget, from the clocks grader.grading.execute reads: what a cell was
charged stays charged. The readings are built here (a sandbox's CPU, its kernel's threads'
run-queue delays, the grading process's own time), so the verdicts hold on any machine;
tests/grading/test_idle_time.py grades a sleeping notebook through the whole pipeline."""
import time
from types import SimpleNamespace

from jupyter_core.utils import run_sync

from grader.grading.execute import GradingExecute, Sample

BUDGET, BEFORE, LIMIT = 10, 0.8, 9  # the cells before the sleep were charged BEFORE seconds


def _sleeping_cell(end_kept):
    """GradingExecute after a cell that slept past its limit of LIMIT s: its watch read the
    clocks once (9.5 s charged), interrupted the kernel and the cell ended half a second
    later with the kernel's threads' delays `end_kept`. (grading, interrupts sent)"""
    grading = GradingExecute(notebook_budget=BUDGET)
    grading._cells_used, grading._cells_kept, grading._running = BEFORE, 0.0, None
    grading._cpu_start = 0.0
    t0 = time.monotonic() - 30  # past the limit in wall time: the watch reads every clock
    start = Sample(t0, 0.9, {1: 0.0, 2: 0.0}, False, 5.0, 0.0)
    readings = iter([Sample(t0 + 9.5, 0.95, {1: 0.0, 2: 0.0}, False, 5.0, 0.0),  # the watch's
                     Sample(t0 + 10.0, 0.96, end_kept, False, 5.0, 0.0)])  # the cell's end
    grading._sample = lambda: next(readings)
    grading._sandbox_cpu = lambda: 0.96
    interrupts = []
    grading.km = SimpleNamespace(interrupt_kernel=lambda: interrupts.append("SIGINT"))

    async def stopped(cpu, limit):
        return None
    grading._stop_if_still_busy = stopped
    interrupted = []
    run_sync(grading._watch)(start, LIMIT, interrupted)  # as nbclient runs it (a loop may be running)
    assert interrupted == ["time"] and interrupts == ["SIGINT"]
    grading._running = start
    grading._end_cell(start)
    return grading


def test_a_cell_stopped_at_its_limit_stays_charged_when_a_thread_adds_its_wait_later():
    # thread 2 of the kernel was ready to run all along and kept from a CPU: the kernel adds
    # its 9 s wait to its delay only once it runs, after the watch read it, so the cell's
    # end reading charges the cell 1 s where the watch stopped it at 9.5
    grading = _sleeping_cell({1: 0.0, 2: 9.0})
    assert grading._cells_used < BEFORE + LIMIT  # the end reading alone gives time back
    assert grading._remaining(Sample(time.monotonic(), 0.97, {1: 0.0, 2: 9.0})) <= 0, \
        "the next cell would run on time the watch had already charged"


def test_a_cell_stopped_at_its_limit_is_charged_what_its_end_reading_says_where_more():
    grading = _sleeping_cell({1: 0.0, 2: 0.0})
    assert abs(grading._cells_used - (BEFORE + 10.0)) < 1e-9
    assert abs(grading._remaining(Sample(time.monotonic(), 0.97, {1: 0.0, 2: 0.0}))
               - (BUDGET - BEFORE - 10.0)) < 1e-9
