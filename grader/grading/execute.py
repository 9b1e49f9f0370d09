"""The one way a notebook is graded: nbgrader's Execute, with the checks outside the kernel.

Configured in nbgrader_config.py as the first autograde preprocessor, so `make autograde`,
plain `nbgrader autograde` and the formgrader's Autograde button all grade the same way:

- every code cell of the submitted notebook except its test cells runs once, in order,
  in a fresh kernel (the isolated kernel spec where the machine allows it), with
  nbgrader's semantics: IPython syntax, an error does not stop later cells, and a time
  budget for the whole notebook on top of the per-cell timeout. Where the kernel's
  sandbox counts its CPU time (a cgroup of its own), both count the submission's own
  time: the time a cell ran less the time its kernel was kept from a CPU (its run-queue
  delay), or the CPU its sandbox used (children included) where that is more. Sleeping
  and waiting are the notebook's own time; a loaded machine cannot spend it. A
  wall-clock ceiling `wall_factor` times larger stops a notebook the machine starved
  (measured: the kernel and the grading process waited for a CPU); such a notebook is
  graded again later (WALL_CEILING_ERROR), never scored from that run, and on its
  second try (`grade_at_ceiling`) graded as it stands at the ceiling;
- a test cell is never executed in the kernel. Its checks are read from the grading plan
  that `make release` stored in the *source* notebook's cell (grader.grading.plan), and run
  here, in the trusted process, calling the student's objects in the kernel through
  grader.grading.channel on inputs chosen here (visible checks: the fixed inputs; hidden
  checks: fresh sizes and seeds). Each check's outcome becomes the cell's output: one
  tick line per passing check, or the message of the first failing one as an error (so
  nbgrader's SaveAutoGrades scores it 0). For `make autograde` (`write_checks`), the typed
  outcomes, the flags and whether the budget ran out (grader.grading.results.NotebookChecks)
  leave nbgrader's run as <notebook>.grading.json beside the autograded notebook, which
  grader.grading.submission reads and takes out again: the merge records them in
  autograded/.status.json;
- the given code cells after the notebook's last solution or test cell (demonstrations:
  plots, a model trained to look at) are not run unless `run_after_last_graded` is set:
  nothing there can change a grade, and in 04–06 they are a third of a notebook's time.
"""
import asyncio
import base64
import copy
import json
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple, Optional

import nbformat
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import NotebookNode
from traitlets import Bool, Enum, Float, Integer, Unicode, default

from nbgrader import utils
from nbgrader.preprocessors import Execute

from grader.checks import shortcuts
from grader.grading import bounds, plan, scan, tamper
from grader.grading.results import NotebookChecks
from grader.outcome import Outcome, check_label, draw_seed

BUDGET_ERROR = "NotebookTimeBudgetExceeded"
TIMEOUT_ERROR = "CellTimeoutError"
WALL_CEILING_ERROR = "NotebookWallClockCeilingReached"
MEMORY_ERROR = "MemoryLimitExceeded"  # the sandbox's memory limit stopped its kernel
CELL_CPU_ERROR = TIMEOUT_ERROR
# At its wall-clock ceiling, a notebook was starved by the machine (and is graded again
# later) where the kernel and the grading process waited for a CPU for at least this
# share of the time the notebook was not charged.
STARVED_SHARE = 0.5
NOT_RUN_NOTE = "(not run when graded: no solution or test cell follows this cell)\n"
CHECK_ERROR = "CheckError"
OUTCOMES_SUFFIX = ".grading.json"  # NotebookChecks, from nbgrader's run to the worker
FLAGS_KEY = "grading_flags"  # resources: [Flag] for grader.grading.flags.SaveFlags


def outcomes_path(autograded_dir, notebook):
    return Path(autograded_dir) / f"{notebook}{OUTCOMES_SUFFIX}"


class Sample(NamedTuple):
    """The clocks at one moment: wall time; the sandbox's CPU seconds; the seconds each
    thread of its kernel has waited for a CPU ({thread id: seconds}, None where that cannot
    be read) and whether the main thread is ready to run (or running) then; and the grading
    process's own CPU seconds and the seconds this thread of it waited for a CPU."""
    wall: float
    cpu: float
    kept: Optional[dict]
    ready: bool = False
    own_cpu: float = 0.0
    own_kept: float = 0.0


def used_between(start, end):
    """(CPU seconds, seconds charged, seconds the kernel was kept from a CPU) from one
    Sample to a later one. Charged: the time that passed, less the time the kernel was
    kept from a CPU (the longest any of its threads waited: the main thread may wait for
    the one that sends its output) and the time the grading process was busy or kept from
    a CPU itself
    (reading a flood of output, say, while the kernel is done and waits), or the CPU the
    sandbox used where that is more (several processes at once)."""
    cpu = end.cpu - start.cpu
    kept = 0.0  # the longest a thread of the kernel waited: its cells wait on each other
    if start.kept is not None and end.kept is not None:
        kept = max((delay - start.kept.get(tid, 0.0) for tid, delay in end.kept.items()), default=0.0)
    own = (end.own_cpu - start.own_cpu) + (end.own_kept - start.own_kept)
    return cpu, max(cpu, end.wall - start.wall - kept - own), kept


def _own_wait_for_cpu():
    """Seconds this thread has waited for a CPU (its run-queue delay), or 0 where unknown."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def error_output(ename, message):
    return NotebookNode(output_type="error", ename=ename, evalue=message,
                        traceback=message.splitlines() or [ename])


class GradingExecute(Execute):
    notebook_budget = Integer(
        180, help="Seconds the whole notebook may run; later cells are skipped.").tag(config=True)
    call_timeout = Integer(
        20, help="Seconds one call of the student's code by a check may take.").tag(config=True)
    device = Unicode(
        help="Device the checks run on (default: $GRADER_DEVICE, else cpu).").tag(config=True)
    max_output_bytes = Integer(
        bounds.OutputBounds.output, help="Bytes of one output a graded notebook keeps (the rest "
                                         "is replaced by a note).").tag(config=True)
    max_cell_output_bytes = Integer(
        bounds.OutputBounds.cell, help="Bytes of one cell's outputs a graded notebook keeps.").tag(config=True)
    max_notebook_output_bytes = Integer(
        bounds.OutputBounds.notebook, help="Bytes of outputs a graded notebook keeps in all.").tag(config=True)
    # A cell that ignores its interrupt is stopped with its kernel (and its sandbox), and the
    # notebook is still graded: nbclient must not raise when the kernel stays busy.
    raise_on_iopub_timeout = Bool(False).tag(config=True)
    interrupt_grace = Integer(
        10, help="Seconds a kernel interrupted at a cell's time limit has to become idle (after "
                 "nbclient's iopub_timeout) before it is stopped.").tag(config=True)
    interrupt_cpu_grace = Float(
        2.0, help="Where budgets count CPU time: CPU seconds a cell interrupted at its CPU limit "
                  "may still use before it counts as ignoring the interrupt and its kernel, with "
                  "its whole sandbox, is stopped (or interrupt_grace seconds of waiting).").tag(config=True)
    wall_factor = Integer(
        4, help="Where the sandbox's time is counted: the wall-clock ceiling of a cell and of "
                "the notebook, as a multiple of their limits (only a machine that keeps the "
                "sandbox from a CPU reaches it; the submission is then graded again later).").tag(config=True)
    grade_at_ceiling = Bool(
        False, help="Grade a notebook that reaches its wall-clock ceiling as it stands (the "
                    "cells not reached time out) instead of leaving it to a later run; make "
                    "autograde sets it for a submission the machine starved once "
                    "already.").tag(config=True)
    write_checks = Bool(
        False, help="Write the checks' typed outcomes beside the autograded notebook as "
                    "<notebook>.grading.json (make autograde's worker reads it and takes it "
                    "out again).").tag(config=True)
    # A graded kernel's shutdown hooks (atexit) are the student's code and cost a graceful
    # wait: its sandbox is killed instead, with every process in it.
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate").tag(config=True)
    run_after_last_graded = Bool(
        False, help="Also run the given code cells after the last solution or test cell "
                    "(they cannot change a grade).").tag(config=True)
    unseen_twins = Bool(
        True, help="Grade each visible check that its test cell does not also run hidden (on "
                   "fresh inputs) a second time on fresh inputs: the visible checks' inputs and "
                   "expected outputs ship with the student bundle, so an answer that only "
                   "looks them up would otherwise earn their points.").tag(config=True)

    @default("device")
    def _default_device(self):
        """The device, decided here once for the whole notebook: $GRADER_DEVICE, else cpu."""
        from grader.checks.core import device_name

        return device_name()

    def create_kernel_manager(self):
        """nbclient's kernel manager, whose clients are ready as soon as the kernel is, read
        no message over the bounds, and make the kernel keep the output bounds itself
        (grader.grading.kernel_client), and whose sandbox shows the student's login name
        and home folder, as their own lab does (grader.isolation)."""
        from grader.grading.kernel_client import GradingKernelClient

        student = getattr(self, "_student", None)
        if student:
            config = copy.deepcopy(self.config)
            config.SandboxProvisioner.user = student
            shared, self.config = self.config, config
            try:
                km = super().create_kernel_manager()
            finally:
                self.config = shared
        else:
            km = super().create_kernel_manager()
        km.client_factory = GradingKernelClient.bounded(bounds.OutputBounds(
            self.max_output_bytes, self.max_cell_output_bytes, self.max_notebook_output_bytes))
        return km

    # --- the notebook ---------------------------------------------------------------

    def preprocess(self, nb, resources=None, km=None):
        self._started = self._deadline = None  # set when the first cell runs (_start_clocks)
        self._cpu_start = None  # the sandbox's CPU seconds when its first cell ran
        self._cells_used = 0.0  # seconds charged to the cells (and calls) that have run
        self._cells_kept = 0.0  # seconds the kernel waited for a CPU during them
        self._charged_most = 0.0  # the most the notebook has been charged: never given back
        self._running = None  # the Sample taken when the running cell started
        self._out_of_time = ""  # why the cells still to come are not run (the ceiling)
        self._last_kept = None  # the kernel's run-queue delay when last read
        self._own_kept = 0.0
        self._calling = False
        self._plans, self._channel = None, None
        self._recall = None  # what this notebook's checks said (grader.checks.recall), made with its first check
        self._checks = NotebookChecks()
        self._stopped = None  # why the kernel was stopped (a cell that ignored its interrupt)
        self._stop_error = TIMEOUT_ERROR  # or MEMORY_ERROR
        self._bounds = bounds.OutputBounds(self.max_output_bytes, self.max_cell_output_bytes,
                                           self.max_notebook_output_bytes)
        info = (resources or {}).get("nbgrader", {})
        self._student = info.get("student")
        course = None
        if info.get("assignment") and info.get("notebook"):
            course = self._load_source(info["assignment"], info["notebook"])
            self._plans = plan.read(course)
        # what the kernel cannot hide: tampering found before the cells were restored, and
        # the student's source read here (grader.grading.tamper, grader.grading.scan)
        self._source = scan.scan(nb, course)
        self._checks.flags = tamper.taken(nb) + self._source.flags
        self._folder = str(Path((resources or {}).get("metadata", {}).get("path") or os.getcwd()).resolve())
        self._last_graded = max((i for i, c in enumerate(nb.cells)
                                 if utils.is_grade(c) or utils.is_solution(c) or utils.is_task(c)), default=None)
        nb, resources = super().preprocess(nb, resources, km)
        resources[FLAGS_KEY] = self._checks.flags
        if self.write_checks and info.get("notebook"):
            resources.setdefault("outputs", {})[f"{info['notebook']}{OUTCOMES_SUFFIX}"] = \
                json.dumps(self._checks.to_json(), indent=1).encode()
        return nb, resources

    def _load_source(self, assignment, notebook):
        """The assignment's source notebook (solutions/), where the plans and points live."""
        from nbgrader.coursedir import CourseDirectory

        coursedir = CourseDirectory(config=self.config)
        path = Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / f"{notebook}.ipynb"
        return nbformat.read(path, as_version=4)

    # --- budgets: the sandbox's own time where it counts it, else wall seconds --------

    def _provisioner(self):
        return getattr(getattr(self, "km", None), "provisioner", None)

    def _sandbox_cpu(self):
        """CPU seconds of the kernel's sandbox so far (None where it is not counted)."""
        counter = getattr(self._provisioner(), "sandbox_cpu_seconds", None)
        return counter() if counter is not None else None

    def _sample(self):
        """The sandbox's clocks now (a Sample), or None where its CPU is not counted."""
        cpu = self._sandbox_cpu()
        if cpu is None:
            return None
        if getattr(self, "_cpu_start", None) is None:
            self._cpu_start = cpu
        waiting = getattr(self._provisioner(), "kernel_wait_for_cpu", lambda: None)()
        if waiting is None:  # the kernel is gone (stopped, killed): it waits no more
            waiting = (getattr(self, "_last_kept", None), False)
        kept, ready = waiting
        self._last_kept = kept
        return Sample(time.monotonic(), cpu, kept, ready, time.process_time(), _own_wait_for_cpu())

    def _charged(self, now=None):
        """Seconds charged to the notebook so far: the cells' time (each: its time less the
        time its kernel was kept from a CPU, or its CPU where more), or the CPU its sandbox
        used since the first cell, whichever is more; None where the sandbox's time is not
        counted."""
        now = now or self._sample()
        if now is None:
            return None
        running = used_between(self._running, now)[1] if getattr(self, "_running", None) else 0.0
        return self._keep_charge(max(now.cpu - self._cpu_start, getattr(self, "_cells_used", 0.0) + running))

    def _keep_charge(self, charged):
        """The notebook's charge, given `charged` as measured now: never less than it was
        once charged. A measure can fall back (a thread of the kernel that was ready to run
        has its wait added to its delay only once it runs, and the kernel and the grading
        process can wait at the same time); time the watch stopped a cell for is spent."""
        self._charged_most = max(getattr(self, "_charged_most", 0.0), charged)
        return self._charged_most

    def _start_clocks(self):
        """The notebook's clocks start when its first cell runs: the kernel's start is the
        course's time, not the student's."""
        if getattr(self, "_deadline", None) is None:
            self._started = time.monotonic()
            self._deadline = self._started + self.notebook_budget
            self._own_kept = _own_wait_for_cpu()

    def _remaining(self, now=None):
        charged = self._charged(now)
        if charged is not None:
            return self.notebook_budget - charged
        deadline = getattr(self, "_deadline", None)
        return float("inf") if deadline is None else deadline - time.monotonic()

    def _wall_left(self):
        """Seconds to the notebook's wall-clock ceiling (infinite where budgets are wall time)."""
        deadline = getattr(self, "_deadline", None)
        if deadline is None or self._sandbox_cpu() is None:
            return float("inf")
        return deadline + self.notebook_budget * (self.wall_factor - 1) - time.monotonic()

    def _cell_limit(self, cell, now=None):
        """The cell's limit: seconds of its own time where counted, else wall seconds (None:
        none); `now`: the clocks' Sample at the cell's start, where already taken."""
        timeout = super()._get_timeout(cell)
        if getattr(self, "_calling", False):
            timeout = min(timeout or self.call_timeout, self.call_timeout)
        remaining = self._remaining(now)
        if remaining == float("inf"):
            return timeout
        return max(1, min(timeout or remaining, int(remaining) + 1))

    def _get_timeout(self, cell):
        """nbclient's timeout (asked twice per cell): the ceiling async_execute_cell set for
        the cell it runs, from the clocks it read once at the cell's start (reading them
        costs about a tenth of the grading process's CPU where each ask read them again:
        a check calls the student's code through a cell some fifty times per notebook)."""
        ceiling = getattr(self, "_ceiling", None)
        if ceiling is not None:
            return ceiling
        limit = self._cell_limit(cell)
        if limit is None or self._sandbox_cpu() is None:
            return limit
        return self._wall_ceiling(limit)

    def _wall_ceiling(self, limit):
        """nbclient's own timeout where the sandbox's time is counted: the wall-clock ceiling
        of a cell whose limit of its own time is `limit` (that limit is watched by _watch)."""
        return max(1, int(min(limit * self.wall_factor, self._wall_left())) + 1)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        self._start_clocks()
        start = self._sample()
        limit = self._cell_limit(cell, start) if start is not None else None
        self._ceiling = self._wall_ceiling(limit) if limit else None
        interrupted = []  # the watch's reason, once it has interrupted the kernel
        self._running, self._timed_out = start, False
        watch = asyncio.ensure_future(self._watch(start, limit, interrupted)) if limit else None
        try:
            cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except DeadKernelError:
            if self._killed_for_memory():
                cell.outputs.append(error_output(MEMORY_ERROR, f"{MEMORY_ERROR}: {self._stopped}"))
                return cell
            if not (interrupted and getattr(self, "_stopped", None)):
                raise
            # the cell ignored the watch's interrupt, so the watch stopped its kernel
        finally:
            self._ceiling = None
            if watch is not None:
                watch.cancel()
            used = self._end_cell(start)
        if interrupted:
            why = {"cpu": f"used more than {limit} s of CPU time",
                   "time": f"ran for more than {limit} s (computing or waiting; the time the "
                           "machine kept it from a CPU is not counted)"}[interrupted[0]]
            cell.outputs.append(error_output(
                CELL_CPU_ERROR, f"{CELL_CPU_ERROR}: the cell {why} and was interrupted"))
            if getattr(self, "_stopped", None):
                cell.outputs.append(error_output(TIMEOUT_ERROR, f"{TIMEOUT_ERROR}: {self._stopped}"))
            if self._remaining() <= 0:
                self._checks.budget_exceeded = True
        elif self._timed_out and used is not None:
            self._cell_starved(cell, limit, used)
        return cell

    execute_cell = run_sync(async_execute_cell)

    def _end_cell(self, start):
        """Charge the cell that started at `start` to the notebook: (CPU, charged, kept), or
        None where the sandbox's time is not counted."""
        self._running = None
        end = self._sample() if start is not None else None
        if end is None:
            return None
        used = used_between(start, end)
        self._cells_used += used[1]
        self._cells_kept += used[2]
        return used

    def _cell_starved(self, cell, limit, used):
        """A cell that reached its wall-clock ceiling (nbclient's timeout) before its limit of
        its own time. Where the cell's ceiling came first, the machine kept it from a CPU by
        construction (what the cell was not charged, it waited for a CPU); where the
        notebook's came first, _at_ceiling measures it. A starved notebook is graded again
        later; on its second try, or where it was not starved, the cell has timed out."""
        cpu, charged, kept = used
        if self._wall_left() <= 0:
            starved, measured = self._at_ceiling()
        else:
            starved, measured = True, (
                f"the cell reached its wall-clock ceiling ({limit * self.wall_factor} s) having "
                f"been charged {charged:.0f} s of its {limit} s; its kernel waited {kept:.0f} s "
                "for a CPU")
        if starved and not self.grade_at_ceiling:
            self._stall(measured)
            return
        why = ("the machine was too busy for this submission twice, so it is graded as it "
               "stands" if starved else "it was not kept from a CPU, so it is graded as it stands")
        cell.outputs.append(error_output(TIMEOUT_ERROR, f"{TIMEOUT_ERROR}: timed out: {measured}; {why}"))
        self._checks.budget_exceeded = True
        self._out_of_time = f"{measured}; {why}"  # the cells after it are not run

    def _stall(self, why):
        """Leave the notebook to a later run: the machine was too busy (measured)."""
        self._checks.stalled = True
        self._checks.stall_reason = (f"the machine was too busy: {why}; graded again on the next "
                                     "run (a second time, it is graded on its wall-clock ceiling)")

    def _at_ceiling(self):
        """Reached the notebook's wall-clock ceiling: (starved, what was measured). Starved
        where the kernel (during its cells) and the grading process waited for a CPU for at
        least STARVED_SHARE of the time the notebook was not charged."""
        charged = self._charged() or 0.0
        elapsed = time.monotonic() - self._started
        kept = self._cells_kept + max(0.0, _own_wait_for_cpu() - self._own_kept)
        starved = kept >= STARVED_SHARE * max(0.0, elapsed - charged)
        return starved, (f"the notebook reached its wall-clock ceiling "
                         f"({self.notebook_budget * self.wall_factor} s) having been charged "
                         f"{charged:.0f} s of its {self.notebook_budget} s budget; its kernel "
                         f"and the grading process waited {kept:.0f} s for a CPU")

    async def _watch(self, start, limit, interrupted):
        """Interrupt the kernel once this cell has been charged more than `limit` seconds
        (its time less the time it was kept from a CPU, or its CPU where more), and append
        the reason to `interrupted` ("cpu": it computed, "time": it also waited). A kernel
        ready to run is not stopped for time (the wait it is in is not counted yet). A cell
        still running after a short grace ignored the interrupt: its kernel is stopped
        with its whole sandbox (_stop_kernel)."""
        while True:
            await asyncio.sleep(0.05)
            if time.monotonic() - start.wall <= limit:
                # before `limit` seconds have passed, only CPU (several processes at once) can
                # pass the limit: the sandbox's CPU alone is read (one file, where a whole
                # Sample reads one per thread of the kernel)
                cpu = self._sandbox_cpu()
                if cpu is None:
                    return None
                if cpu - start.cpu <= limit:
                    continue
            now = self._sample()
            if now is None:
                return None
            cpu, charged, _ = used_between(start, now)
            if cpu > limit or (charged > limit and not now.ready):
                self._keep_charge(self._cells_used + charged)  # what it is stopped at is spent
                await ensure_async(self.km.interrupt_kernel())
                interrupted.append("cpu" if cpu > limit else "time")
                await self._stop_if_still_busy(now.cpu, limit)
                return

    def _killed_for_memory(self):
        """After the kernel died: True, with the reason in _stopped, where its sandbox's
        memory limit (a cgroup's, for all its processes) killed it."""
        provisioner = getattr(getattr(self, "km", None), "provisioner", None)
        kills = getattr(provisioner, "sandbox_oom_kills", None)
        if kills is None or not kills():
            return False
        self._stop_error = MEMORY_ERROR
        self._stopped = (f"the sandbox was stopped for using more than its memory limit "
                         f"({provisioner.total_memory / 2**30:g} GiB for all its processes)")
        return True

    async def _stop_if_still_busy(self, cpu_at_interrupt, limit):
        """Called by the watch after its interrupt, and cancelled when the cell ends: a cell
        that uses interrupt_cpu_grace more CPU seconds, or is still running after
        interrupt_grace seconds, ignored the interrupt (SIGINT ignored, a fork bomb)."""
        waited = time.monotonic() + self.interrupt_grace
        while time.monotonic() < waited:
            await asyncio.sleep(0.05)
            now = self._sandbox_cpu()
            if now is None:
                return
            if now - cpu_at_interrupt > self.interrupt_cpu_grace:
                break
        await self._stop_kernel(limit)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self._checks.stalled:
            cell.outputs = [error_output(WALL_CEILING_ERROR, f"{WALL_CEILING_ERROR}: {self._checks.stall_reason}")]
            return cell, resources
        if cell.cell_type == "code" and self._remaining() <= 0:
            counted = (" (computing or waiting; the time the machine kept it from a CPU is not "
                       "counted)" if self._sandbox_cpu() is not None else "")
            message = (f"timed out: the notebook used up its time budget of "
                       f"{self.notebook_budget} s{counted}; this cell was not run")
            cell.outputs = [error_output(BUDGET_ERROR, f"{BUDGET_ERROR}: {message}")]
            self._checks.budget_exceeded = True
            if self._plans is not None and plan.is_test_cell(cell):  # its checks said not run, as data too
                self._not_checked(cell, message)
            return cell, resources
        if cell.cell_type == "code" and not self._out_of_time and self._wall_left() <= 0:
            starved, measured = self._at_ceiling()
            if starved and not self.grade_at_ceiling:
                self._stall(measured)
                return self.preprocess_cell(cell, resources, index)
            why = ("the machine was too busy for this submission twice, so it is graded as "
                   "it stands" if starved else "it was not kept from a CPU, so it is graded "
                                                "as it stands")
            self._out_of_time = f"{measured}; {why}"
        if cell.cell_type == "code" and self._out_of_time:
            message = f"timed out: {self._out_of_time}; this cell was not run"
            cell.outputs = [error_output(BUDGET_ERROR, f"{BUDGET_ERROR}: {message}")]
            self._checks.budget_exceeded = True
            if self._plans is not None and plan.is_test_cell(cell):  # its checks said not run, as data too
                self._not_checked(cell, message)
            return cell, resources
        if self._plans is not None and plan.is_test_cell(cell):
            self._grade_test_cell(cell, index)
            return cell, resources
        if cell.cell_type == "code" and getattr(self, "_stopped", None):
            cell.outputs = [error_output(self._stop_error, f"{self._stop_error}: not run: {self._stopped}")]
            cell.execution_count = None
            return cell, resources
        if (cell.cell_type == "code" and not self.run_after_last_graded and self._plans is not None
                and self._last_graded is not None and index > self._last_graded):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=NOT_RUN_NOTE)]
            cell.execution_count = None
            return cell, resources
        return super().preprocess_cell(cell, resources, index)

    def output(self, outs, msg, display_id, cell_index):
        """nbclient's handling of one output, bounded in bytes as it arrives (grader.grading.bounds).
        A check's call into the kernel is bounded per output only: its outputs are dropped."""
        out = super().output(outs, msg, display_id, cell_index)
        if out is None or not outs or outs[-1] is not out:
            return out
        if getattr(self, "_calling", False):
            kept = bounds.cut(out, self._bounds.output, "a check's call") \
                if bounds.output_size(out) > self._bounds.output else out
        else:
            kept = self._bounds.admit(out, cell_index)
        if kept is None and not display_id:
            outs.pop()
        elif kept is not out:
            outs[-1] = kept if kept is not None else bounds.cut(out, 0, "no room left")
        return kept

    # --- a cell past its time limit -------------------------------------------------

    async def _async_handle_timeout(self, timeout, cell=None):
        # nbclient interrupts the kernel and gives the cell an error, then waits iopub_timeout
        # for the kernel to go idle: on a loaded machine it gets interrupt_grace more
        self._timed_out = True
        self.iopub_timeout = self._iopub_timeout + self.interrupt_grace
        return await super()._async_handle_timeout(timeout, cell)

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg,
                                    task_poll_kernel_alive):
        """nbclient's wait for a cell's reply; then, if the cell ran past its time limit and
        its kernel did not go idle after the interrupt (SIGINT ignored, a fork bomb, a
        starved kernel), the kernel is killed with everything it started: the notebook is
        still graded, the cells after it are not run and their checks fail as timed out."""
        self._timed_out, self._iopub_timeout = False, self.iopub_timeout
        try:
            reply = await super()._async_poll_for_reply(msg_id, cell, timeout, task_poll_output_msg,
                                                       task_poll_kernel_alive)
        finally:
            self.iopub_timeout = self._iopub_timeout
        idle = task_poll_output_msg.done() and not task_poll_output_msg.cancelled()
        if not idle:  # nbclient stopped waiting for the kernel to say it is idle again
            task_poll_output_msg.cancel()
            if self._timed_out:
                await self._stop_kernel(timeout)
                cell.outputs.append(error_output(TIMEOUT_ERROR, f"{TIMEOUT_ERROR}: {self._stopped}"))
        return reply

    async def _stop_kernel(self, timeout):
        """SIGKILL to the kernel: the sandbox's init (grader.isolation) takes every process of
        the sandbox with it; a plain kernel's whole process group goes."""
        self._stopped = (f"timed out: a cell ran past its time limit ({timeout} s) and ignored "
                         "the interrupt, so the kernel was stopped")
        try:
            await self.km.signal_kernel(signal.SIGKILL)
        except Exception:  # already gone
            pass
        for _ in range(100):
            if not await self.km.is_alive():
                break
            await asyncio.sleep(0.05)

    # --- test cells, graded here ----------------------------------------------------

    def _run_code(self, code, index):
        """Run code in the kernel as a throwaway cell; None, or a RemoteError."""
        from grader.checks.core import RemoteError

        if self._stopped:
            return RemoteError(self._stop_error, self._stopped)
        probe = nbformat.v4.new_code_cell(code)
        test_cell = self.nb.cells[index]
        self._calling = True
        try:
            self.execute_cell(probe, index, store_history=False)
        finally:
            self._calling = False
            self.nb.cells[index] = test_cell  # nbclient stores the cell it ran at its index
        errors = [out for out in probe.outputs if out.output_type == "error"]
        if self._stopped:  # this call ignored its interrupt, or its memory limit killed the kernel
            return RemoteError(self._stop_error, self._stopped)
        if any("Timeout" in out.ename or out.ename == "KeyboardInterrupt" for out in errors):
            # nbclient interrupted the call at its time limit (nothing else interrupts it)
            return RemoteError("TimeoutError", f"no answer within {self.call_timeout} s")
        if errors:
            return RemoteError(errors[0].ename, str(errors[0].evalue)[:4000])
        return None

    def _not_checked(self, cell, reason):
        """A test cell the notebook's time ran out before: its first check recorded as not
        run, with the reason (as a check after a stopped kernel is), so the status and the
        report say why its points are 0."""
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        self._checks.outcomes[grade_id] = _first_not_checked(self._plans.get(grade_id), reason)

    def _grade_test_cell(self, cell, index):
        from grader.checks.core import evaluate
        from grader.checks.exercises import EXERCISES
        from grader.grading.channel import KernelChannel

        grade_id = cell.metadata["nbgrader"]["grade_id"]
        checks = self._plans.get(grade_id)
        if checks is None:
            cell.outputs = [error_output(CHECK_ERROR, f"test cell {grade_id} is not part of this "
                                                      "assignment's source")]
            self._checks.outcomes[grade_id] = []
            return
        if self.unseen_twins:
            checks = with_unseen_twins(checks)
        device = self.device
        if self._channel is None:  # one per kernel: its code is sent to the kernel once
            provisioner = getattr(self.km, "provisioner", None)
            pid = getattr(provisioner, "init_pid", None)
            folder = provisioner.kernel_cwd if pid else self._folder  # as the kernel sees it
            self._channel = KernelChannel(lambda code: self._run_code(code, self._test_index),
                                          folder, device,
                                          host_root=f"/proc/{pid}/root" if pid else "")
        self._test_index, channel = index, self._channel
        forbidden = shortcuts.forbidden(self.config)
        if self._recall is None:
            from grader.checks.recall import Recall
            self._recall = Recall()
        outputs, outcomes = [], []
        for check in checks:
            # a hidden check's seed is decided here, once: the plan's, else a fresh one
            seed = (draw_seed() if check.seed is None else check.seed) if check.hidden else None
            if self._stopped:
                outcome = _timed_out(EXERCISES[check.exercise], check, seed, self._stopped)
            else:
                used = self._source.uses(shortcuts.listed(EXERCISES[check.exercise], forbidden), check.student,
                                         before=index)
                outcome = evaluate(EXERCISES[check.exercise], channel.student(check.student),
                                   check.focus, hidden=check.hidden, seed=seed,
                                   device=device, graded=True, config=self.config, source_uses=used,
                                   recall=self._recall)
            outcomes.append(outcome)
            if outcome.passed:
                outputs.append(nbformat.v4.new_output("stream", name="stdout", text=outcome.line() + "\n"))
            else:
                if outcome.picture:  # expected | yours | difference, for the smallest failing case
                    outputs.append(nbformat.v4.new_output(
                        "display_data", data={"image/png": base64.b64encode(outcome.picture).decode(),
                                              "text/plain": "<expected | yours | difference>"}))
                outputs.append(error_output(CHECK_ERROR, outcome.message))
                break
        cell.outputs = outputs
        cell.execution_count = None
        self._checks.outcomes[grade_id] = outcomes


def _first_not_checked(checks, reason):
    """[the failed outcome of a test cell's first check, not run for `reason`] ([] without checks)."""
    from grader.checks.exercises import EXERCISES

    if not checks:
        return []
    check = checks[0]
    seed = (draw_seed() if check.seed is None else check.seed) if check.hidden else None
    return [_timed_out(EXERCISES[check.exercise], check, seed, reason)]


def with_unseen_twins(checks):
    """A test cell's checks, each visible check followed by the same check on fresh inputs
    (hidden, a seed drawn when it runs) where the cell has no hidden check of that focus:
    its points then need an answer that works on inputs nobody has seen, not one that
    returns the outputs the student bundle ships for the visible inputs."""
    hidden = {(c.exercise, c.student, c.focus) for c in checks if c.hidden}
    out = []
    for check in checks:
        out.append(check)
        if not check.hidden and (check.exercise, check.student, check.focus) not in hidden:
            out.append(plan.Check(check.exercise, check.student, check.focus, hidden=True, seed=None))
    return out


def _timed_out(exercise, check, seed, reason):
    """The failed outcome of a check that was not run: the kernel had been stopped."""
    label = check_label(check.student, exercise.focuses[check.focus].description, check.hidden, seed)
    return Outcome(exercise.name, check.student, check.focus, check.hidden, seed, passed=False,
                   label=label, message=f"{label}\n  not checked: {reason}")
