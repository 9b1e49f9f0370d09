"""Grade every submission under submitted/<student>/<assignment>/ on a Dask cluster.

    python -m grader.grading.autograde [--jobs N (default: one per core)] [--scheduler tcp://host:8786] [--force]
                                       [--memory 6GiB] [--device cuda] [--student S]
                                       [--assignment A]

`--student` (make autograde STUDENT=...) regrades that student's submissions even when
they are unchanged; with `--assignment` (ASSIGNMENT=...) only that one.

Each submission is one task, `grader.grading.submission.grade_submission(job)`: a pure
function of the submission's files, the assignment's source and the grading settings,
run in a course folder of its own. By default the tasks run on an embedded
`LocalCluster` (processes, one thread each, `--jobs` workers); `--scheduler` uses an
existing cluster (dask-jobqueue on Slurm/PBS, the Dask Helm chart on Kubernetes, ...)
whose workers have the same environment and commit of the course.

This process is the only writer of the course gradebook: it merges each result
(grader.grading.results) as it arrives, in one transaction, moves the autograded files into
place and records the submission's fingerprint and the outcomes of its checks in
autograded/.status.json, the one store of outcomes. Re-running skips what has not
changed (files, the assignment's source, the grader's code and data, the configuration,
the due date, the settings); `--force` regrades everything. A worker that dies has its
task rerun elsewhere by the scheduler, once; a submission that kills a second worker (the
scheduler's `distributed.scheduler.allowed-failures` + 1 of them) is marked "needs
attention" and not tried again until it or the grader changes; any other exception while
reading, fingerprinting, grading or recording one submission makes that submission "needs
attention" with the reason, and the run goes on; a scheduler that goes away stops the run with everything finished so far
recorded. At most a few tasks per worker thread are handed to the scheduler at a time,
so neither it nor the workers hold the whole class. An existing cluster's scheduler and
workers are checked before any work (the same course code, reference data and packages
as this checkout, the grading kernel spec, a kernel that starts), and every task checks
its worker again: a worker that cannot grade as this checkout would stops the run.
"""
import argparse
import contextlib
import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

from grader.grading import extensions, late, layout
from grader.grading.results import GRADED, NEEDS_ATTENTION, CellGrade, Record
from grader.grading.status import Status, fingerprint, grading_inputs, quick_signature
from grader.grading.submission import (Job, Refused, Settings, SubmissionResult, held_temp_folder,
                                      read_submission, scratch_folder)

# Run as `python -m grader.grading.autograde`, this module is the main one; multiprocessing
# runs it again as __mp_main__ in each embedded worker it starts from the forkserver, which
# has imported it already (WORKER_PRELOAD), and runpy then warns that it was imported before
# it ran, once per worker. Running it again only defines what is defined (its main() is
# guarded): the warning is noise in every instructor's run. The forkserver imports this
# module, so its workers inherit the filter.
warnings.filterwarnings("ignore", category=RuntimeWarning,
                        message=r"'grader\.grading\.autograde' found in sys\.modules after import of package")
WORKER_MEMORY = "6GiB"  # per Dask worker process (the kernel it starts has its own limits)
ALLOWED_FAILURES = 1  # workers a submission may kill (it is retried once) before it needs attention
IN_FLIGHT_PER_THREAD = 2  # tasks handed to the scheduler per worker thread; the rest wait here
COMMIT_EVERY = 1.0  # seconds: the merged results are committed to the gradebook at least this often
COMMIT_MOST = 500  # results: and at least every so many
KERNEL_START_TRIES = 3
KERNEL_RETRY_WAIT = 5  # seconds, growing with each try
# What an embedded worker imports to grade, loaded once by the process that forks the
# workers (multiprocessing's forkserver): a worker then starts in well under a second of CPU
# instead of importing them itself (several seconds each, paid again by every worker).
WORKER_PRELOAD = ("torch", "nbgrader.apps", "grader.grading.autograde", "grader.grading.submission",
                  "grader.grading.execute", "grader.checks.exercises", "grader.isolation.provisioner",
                  "grader.isolation.template", "grader.grading.freeze")
DASK_CONFIG = {"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
               "distributed.scheduler.worker-saturation": 1.0,
               "distributed.worker.daemon": False,
               # embedded workers forked from one server that has imported WORKER_PRELOAD
               "distributed.worker.multiprocessing-method": "forkserver",
               # What only a dashboard shows, and the embedded cluster serves none: a worker's
               # statistical profiler walks its task thread's stack 100 times a second, and
               # every server wakes 50 times a second to time its event loop and twice to
               # sample the system. A two-worker cluster whose workers wait on their kernels, as
               # grading workers mostly do, spent 0.16 CPU s per second on them (measured: each
               # worker with a task blocked for 10 s, 1.59 CPU s with Dask's defaults, 0.27 to
               # 0.34 with these; the graded class of the tests, 8 to 9 of 110 to 125 CPU s).
               # Memory limits keep their own monitor (distributed.worker.memory.monitor-interval).
               "distributed.worker.profile.enabled": False,
               "distributed.admin.tick.interval": "1s",
               "distributed.admin.system-monitor.interval": "5s"}
# Packages whose version decides how a notebook is graded: every worker must have the
# client's (with the course's grader code and reference data, see environment()).
GRADING_PACKAGES = ("torch", "nbgrader", "nbconvert", "nbclient", "ipykernel", "jupyter_client",
                    "nbformat", "dask", "distributed")


class RunStopped(RuntimeError):
    """The run cannot go on (the scheduler went away, a worker runs another version of the
    course); everything merged before is recorded. `summary` counts what was done."""

    summary = None


class UnfitWorker(RuntimeError):
    """Raised on a worker that cannot grade as the client would (see worker_problem)."""


@functools.lru_cache(maxsize=1)
def environment():
    """A hash of what a worker must share with the client: the grader's code and reference
    data (this checkout of the course), Python's version and the grading packages'."""
    from importlib import metadata

    from grader.grading.layout import ROOT
    from grader.grading.status import _hash_tree

    h = hashlib.sha256(sys.version.encode())
    for name in GRADING_PACKAGES:
        try:
            h.update(f"{name}=={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name} missing".encode())
    _hash_tree(h, ROOT / "grader", "*.py")
    _hash_tree(h, ROOT / "data" / "references")
    return h.hexdigest()


@functools.lru_cache(maxsize=4)
def worker_problem(expected_environment, kernel_name):
    """Why this process cannot grade as the client would, or None: another version of the
    course or packages, no kernel spec of that name, no sandbox for isolated kernels.
    Checked once per worker process."""
    where = f"the worker on {socket.gethostname()} ({sys.executable})"
    if environment() != expected_environment:
        return (f"{where} has another version of the course's grader, reference data or "
                "packages than this checkout")
    if kernel_name:
        from jupyter_client.kernelspec import KernelSpecManager

        if kernel_name not in KernelSpecManager().find_kernel_specs():
            return f"{where} has no kernel spec {kernel_name!r} (`make install` installs it)"
        from grader.isolation import KERNEL_NAME, isolation_available

        if kernel_name == KERNEL_NAME:
            available, reason = isolation_available()
            if not available:
                return f"{where}: {reason}"
    # A kernel can fail to start for a moment on a loaded machine (many kernels starting at
    # once): only one that fails again and again makes the worker unfit.
    for attempt in range(KERNEL_START_TRIES):
        problem = _kernel_problem(kernel_name or "python3")
        if not problem:
            return None
        if attempt + 1 < KERNEL_START_TRIES:
            time.sleep(KERNEL_RETRY_WAIT * (attempt + 1))
    return (f"{where} cannot start the {kernel_name or 'python3'} kernel "
            f"({KERNEL_START_TRIES} tries): {problem}")


def _kernel_problem(kernel_name, timeout=120):
    """Start one kernel as grading would and stop it: why that fails, or None. A worker
    that cannot would otherwise fail every submission it is given."""
    from jupyter_client.manager import KernelManager

    workdir = scratch_folder("worker-check-")  # swept where the worker is killed meanwhile
    km = KernelManager(kernel_name=kernel_name)
    try:
        km.start_kernel(cwd=workdir)
        client = km.client()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=timeout)
        finally:
            client.stop_channels()
        return None
    except Exception as err:
        return f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300] if str(err).strip() else ''}"
    finally:
        try:
            km.shutdown_kernel(now=True)
        except Exception:
            pass
        shutil.rmtree(workdir, ignore_errors=True)


def _prepare_scheduler(dask_scheduler):
    """Run on an existing scheduler: hand a worker only the task it runs (a worker that
    dies then takes no queued, innocent submission down with it), and say which version
    of the course the scheduler can load."""
    dask_scheduler.WORKER_SATURATION = 1.0
    return environment()


_ONE_AT_A_TIME = threading.Lock()


def grade_task(job, expected_environment, shared=None):
    """The Dask task: grade_submission(job) on a worker fit to grade it. `shared` is what
    every submission of the assignment shares (gradebook template, source, configuration:
    Grading._shared), sent to the cluster once per assignment; the job carries the rest.
    nbgrader changes the process's working folder, so a worker started with more than one
    thread still grades one submission at a time."""
    from grader.grading.submission import grade_submission

    problem = worker_problem(expected_environment, job.settings.kernel_name)
    if problem:
        raise UnfitWorker(problem)
    if shared is not None:
        job = _with_shared(job, shared)
    with _ONE_AT_A_TIME:
        return grade_submission(job)


def _with_shared(job, shared):
    """The job with its assignment's shared data (Grading._shared) filled in."""
    return dataclasses.replace(job, gradebook=shared["gradebook"], source=shared["source"], config=shared["config"])


def _shared_data(data):
    """A Dask task holding an assignment's shared data: the scheduler keeps its input, so a
    worker that dies with the data loses nothing (the task runs again elsewhere)."""
    return data


class Interrupted(RuntimeError):
    """The run was stopped with Ctrl-C; everything recorded before is kept. `summary`
    counts what was done and what was not reached."""

    def __init__(self, summary):
        super().__init__("interrupted")
        self.summary = summary


class _Interrupt:
    """Ctrl-C (SIGINT) during a run: while the run waits for results it stops at once
    (KeyboardInterrupt); while it records a result it stops right after it, so no result
    is recorded in part. Only in the main thread; elsewhere Python's own handling stays."""

    def __init__(self):
        self.requested = False
        self._recording = False
        self._previous = None

    def _handle(self, signum, frame):
        if self._recording:
            self.requested = True
        else:
            raise KeyboardInterrupt

    def __enter__(self):
        import signal

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False

    @contextlib.contextmanager
    def deferred(self):
        self._recording = True
        try:
            yield
        finally:
            self._recording = False


def _own_group():
    """Run on each embedded worker: a process group of its own, so a Ctrl-C typed in the
    terminal reaches the process that runs `make autograde` only, which then stops the
    workers itself (instead of every worker printing its own traceback)."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass


def dask_setup(worker):
    """Run by every embedded worker as it starts (this module is its Dask preload), a
    restarted one too: torch's thread count from OMP_NUM_THREADS, which a worker forked
    after torch was imported cannot read from its environment."""
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit():
        import torch

        torch.set_num_threads(int(threads))


def _shared_kernel_template():
    """The environment that hands this process's warm kernel template to its embedded
    workers (one template's imports for the run, not one per worker; a process that grades
    again reuses it), or nothing where no template can be made here (each worker then
    tries its own, as on an existing cluster)."""
    from grader.isolation import template

    tmpl, _ = template.shared()
    return {template.ENV: str(tmpl.socket)} if tmpl is not None else {}


@functools.cache
def _forkserver_context():
    """The multiprocessing context the embedded workers start from: a forkserver that has
    imported distributed and WORKER_PRELOAD. The preload is set once per process, before
    the forkserver starts (after distributed has set its own, which it then leaves alone);
    later clusters reuse the same server."""
    from distributed.utils import get_mp_context

    ctx = get_mp_context()  # under multiprocessing-method "forkserver"
    ctx.set_forkserver_preload(["distributed", *WORKER_PRELOAD])
    return ctx


def _own_process_groups(client):
    try:
        client.run(_own_group)
    except Exception:
        pass  # a worker that went away: the tasks say so


def _close_quietly(client, cluster):
    """Close the client and the embedded cluster, saying nothing: the run reports."""
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        try:
            if client is not None:
                client.close()
        except Exception:
            pass
        if cluster is not None:
            try:
                cluster.close()
            except Exception:
                pass


def _duedate(gb, assignment):
    try:
        return gb.find_assignment(assignment).duedate
    except Exception:
        return None


class Grading:
    task = staticmethod(grade_task)  # what each submission's Dask task runs

    def __init__(self, root, jobs=1, device=None, force=False, budget=None, scheduler=None,
                 call_timeout=None, memory=WORKER_MEMORY):
        self.root = Path(root)
        self.jobs, self.force, self.scheduler = max(1, jobs), force, scheduler
        self.memory = memory  # per worker of the embedded cluster
        self.started = 0  # workers of the embedded cluster this run started
        self.config = layout.load_config(self.root)
        execute = self.config.GradingExecute
        self.settings = Settings(device=device or "cpu",
                                 notebook_budget=budget or execute.get("notebook_budget", 180),
                                 call_timeout=call_timeout or execute.get("call_timeout", 20),
                                 kernel_name=execute.get("kernel_name", ""))
        self.status = Status(self.root)
        self._open_gradebook = None  # kept open by run() while it merges
        self._pending = []  # status entries of results merged but not committed yet
        self._last_commit = time.monotonic()
        self._cells = {}  # assignment -> grader.grading.merge.AssignmentCells
        self._quick = {}  # (student, assignment) -> the quick_signature of the folder graded

    # --- what to grade --------------------------------------------------------------

    def plan(self, students=None, assignments=None):
        """(jobs to run, results known without running: refused submissions, skipped count).

        A submission whose folder looks to the OS as it did when it was graded (its
        quick_signature: every entry's size, inode and times, with the same grading inputs
        and settings) is skipped without reading its files; any other is read and
        fingerprinted, and skipped when its fingerprint is the one recorded."""
        from nbgrader.api import Gradebook

        settings = vars(self.settings)
        with Gradebook(layout.db_url(self.root), self.config.CourseDirectory.course_id) as gb:
            inputs = {a: grading_inputs(self.root, a, _duedate(gb, a))
                      for a in layout.assignments(self.root)}
        todo, refused, skipped, seen = [], [], 0, []
        for student, assignment in layout.discover(self.root, students, assignments):
            folder = self.root / "submitted" / student / assignment
            entry = self.status.get(student, assignment)
            try:
                quick = quick_signature(folder, inputs[assignment], settings)
                if not self.force and quick and entry and entry.get("fingerprint") and entry.get("quick") == quick:
                    skipped += 1
                    continue
                files = read_submission(folder)
                fp = fingerprint(files, inputs[assignment], settings)
            except Exception as err:  # Refused, or anything else: that submission's problem
                reason = str(err) if isinstance(err, Refused) else \
                    f"it could not be read ({type(err).__name__}: {str(err)[:200]})"
                fp = fingerprint({}, inputs[assignment], {**settings, "refused": reason})
                refused.append((SubmissionResult(student, assignment, NEEDS_ATTENTION, reason), fp))
                continue
            if not self.force and entry and entry.get("fingerprint") == fp:
                skipped += 1
                seen.append((student, assignment, {**entry, "quick": quick}))  # read once; next time not
                continue
            self._quick[(student, assignment)] = quick
            todo.append((student, assignment, files, fp))
        self.status.set_many(seen)
        return todo, refused, skipped

    def _shared(self, assignment, workdir):
        """What every submission of an assignment shares (the gradebook template, the
        source notebooks, the configuration): built once, sent to the cluster once."""
        template = layout.gradebook_template(self.root, self.config, assignment,
                                             Path(workdir) / f"{assignment}.db")
        base = self.root / "solutions" / assignment
        source = {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}
        return {"gradebook": template, "source": source, "config": (self.root / "nbgrader_config.py").read_text()}

    def _jobs(self, todo):
        """(Job without the assignment's shared data, fingerprint) for each submission to grade."""
        granted = extensions.load(self.root)
        expected = {}
        for student, assignment, files, fp in todo:
            if assignment not in expected:
                expected[assignment] = layout.expected_notebooks(self.root, assignment)
            yield Job(student, assignment, expected[assignment], files, {}, b"", "",
                      self._settings_for(student, assignment, fp),
                      granted.get((student, assignment))), fp

    def complete_jobs(self, todo, workdir):
        """(complete Job, fingerprint) for each submission: to grade in this process."""
        shared = {}
        for job, fp in self._jobs(todo):
            if job.assignment not in shared:
                shared[job.assignment] = self._shared(job.assignment, workdir)
            yield _with_shared(job, shared[job.assignment]), fp

    def _settings_for(self, student, assignment, fp):
        """The run's settings; for a submission the machine starved last time (the same
        files and grader), graded on its wall-clock ceiling this time, never asked again."""
        entry = self.status.get(student, assignment) or {}
        if entry.get("starved") and entry.get("starved") == fp:
            return dataclasses.replace(self.settings, grade_at_ceiling=True)
        return self.settings

    # --- the run --------------------------------------------------------------------

    def run(self, students=None, assignments=None, progress=True):
        """Grade what changed; returns the summary: counts of "graded", "needs_attention",
        "skipped", and "attention": [(student, assignment, reason)] of this run. Ctrl-C
        stops it after the result being recorded: everything recorded so far is kept, and
        Interrupted carries the summary."""
        warnings.simplefilter("ignore")  # nbgrader's and dask's own warnings are noise here
        layout.ensure_gradebook(self.root, self.config)
        if self.settings.device.startswith("cuda"):
            layout.require_cuda()
        todo, refused, skipped = self.plan(students, assignments)
        layout.add_students(self.root, self.config,
                            sorted({s for s, *_ in todo} | {r.student for r, _ in refused}))
        summary = {GRADED: 0, NEEDS_ATTENTION: 0, "skipped": skipped, "attention": [], "not_reached": 0}
        from nbgrader.api import Gradebook

        with Gradebook(layout.db_url(self.root), self.config.CourseDirectory.course_id) as gb:
            self._open_gradebook = gb
            try:
                for result, fp in refused:
                    self._count(summary, result, self.merge_safely(result, fp))
                self._commit()
                if todo:
                    self._grade(todo, summary, progress)
            finally:
                self._open_gradebook = None
                self.status.fold_if_due()
        return summary

    def _grade(self, todo, summary, progress):
        bar = layout.Progress("autograde", len(todo), enabled=progress)
        where = self.scheduler or f"{min(self.jobs, len(todo))} local worker(s)"
        bar.note(f"{len(todo)} submission(s) to grade on {where}" + ("" if self.scheduler else " (starting them)"))
        interrupted = _Interrupt()
        try:
            with _workdir() as workdir, interrupted, \
                    contextlib.closing(self._map(self._jobs(todo), len(todo), workdir, bar)) as results:
                for result, fp in results:
                    with interrupted.deferred():  # Ctrl-C now stops after this result is recorded
                        status = self.merge_safely(result, fp)
                        self._count(summary, result, status)
                        bar.done(f"{result.student} / {result.assignment}",
                                 f"{status.replace('_', ' ')} ({result.elapsed:.1f} s)")
                    if interrupted.requested:
                        raise KeyboardInterrupt
        except KeyboardInterrupt:
            self._commit()
            summary["not_reached"] = len(todo) - bar.count
            raise Interrupted(summary) from None
        except RunStopped as err:
            self._commit()
            err.summary = summary
            raise
        finally:
            self._commit()
            bar.close()

    @staticmethod
    def _count(summary, result, status):
        summary[status] += 1
        if status == NEEDS_ATTENTION:
            summary["attention"].append((result.student, result.assignment, result.reason or "see the status"))

    def _map(self, jobs, count, workdir, bar):
        """(result, fingerprint) for every one of the count jobs, as they finish, on the Dask
        cluster."""
        import dask
        import distributed  # noqa: F401 (sets up its loggers, which _quiet_dask then quiets)

        with dask.config.set(DASK_CONFIG), _quiet_dask():
            cluster = client = None
            try:
                cluster, client = self._connect(min(self.jobs, count))
                if self.scheduler:
                    self._check_cluster(client)
                else:
                    _own_process_groups(client)
                bar.note("grading")
                yield from self._run_tasks(client, iter(jobs), workdir)
            finally:
                _close_quietly(client, cluster)


    def _connect(self, workers, kernels=True):
        """The cluster and its client: an embedded cluster of `workers` processes (no more
        than there are submissions to grade: a worker costs a few seconds to start), or the
        scheduler's. Called under DASK_CONFIG (the workers are forked from the forkserver);
        kernels=False for work that starts no kernel (feedback pages): no kernel template."""
        from distributed import Client, LocalCluster

        if not self.scheduler:
            self.started = workers
            threads = max(1, (os.cpu_count() or 1) // self.jobs)
            # a forked worker starts with the forkserver's environment: this process's own,
            # as it is now, is handed to every worker
            env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
            if kernels:
                env.update(_shared_kernel_template())
            _forkserver_context()
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   memory_limit=self.memory, dashboard_address=None,
                                   silence_logs=logging.CRITICAL, env=env,
                                   preload=["grader.grading.autograde"])
            return cluster, Client(cluster)
        try:
            return None, Client(self.scheduler, timeout="30s")
        except (OSError, TimeoutError) as err:
            raise RunStopped(f"cannot reach the Dask scheduler at {self.scheduler} "
                             f"({type(err).__name__}: {str(err)[:200]}); nothing was graded") from None

    def _check_cluster(self, client):
        """An existing cluster: its scheduler and workers must grade as this checkout would
        (the scheduler unpickles the tasks, the workers run them). Say so when no worker
        has joined yet, or when workers have more than one thread."""
        advice = ("start the scheduler and every worker from the same commit of the course, "
                  "in the same environment as this checkout; nothing was graded")
        try:
            on_scheduler = client.run_on_scheduler(_prepare_scheduler)
        except Exception as err:
            raise RunStopped(f"the Dask scheduler at {self.scheduler} cannot load the course's "
                             f"grader ({type(err).__name__}: {str(err)[:200]}): {advice}") from None
        if on_scheduler != environment():
            raise RunStopped(f"the Dask scheduler at {self.scheduler} has another version of the "
                             f"course's grader, reference data or packages: {advice}")
        try:
            found = client.run(worker_problem, environment(), self.settings.kernel_name,
                               on_error="return")
        except Exception:
            found = {}  # a worker going away now is no reason to stop; every task checks too
        problems = sorted({(f"the worker at {addr} cannot load the course's grader "
                            f"({type(problem).__name__}: {str(problem)[:200]})")
                           if isinstance(problem, BaseException) else problem
                           for addr, problem in found.items() if problem})
        if problems:
            raise RunStopped(f"{problems[0]} ({len(problems)} worker(s) in all); {advice}")
        if not found:
            print(f"autograde: no worker has joined {self.scheduler} yet; the submissions wait "
                  "for the first one", file=sys.stderr)
        busy = sorted(addr for addr, n in client.nthreads().items() if n > 1)
        if busy:
            print(f"autograde: {len(busy)} worker(s) have more than one thread; each grades one "
                  "submission at a time (start workers with --nthreads 1)", file=sys.stderr)

    def _run_tasks(self, client, jobs, workdir):
        from distributed import as_completed

        expected = environment()
        futures, shared = {}, {}
        running = as_completed(with_results=True, raise_errors=False)
        window = {"size": 4, "asked": 0.0}
        # Dask charges a worker's death to every task on that worker, the ones waiting behind
        # the running one too: a submission whose workers died is graded again alone at the
        # end (nothing else in flight), so a classmate queued beside a crashing notebook is
        # graded, and only a submission that kills a worker by itself needs attention.
        suspects, alone = [], set()

        def submit_more():
            if time.monotonic() - window["asked"] > 5:  # workers come and go on a cluster
                window["size"] = max(4, IN_FLIGHT_PER_THREAD * sum(client.nthreads().values()))
                window["asked"] = time.monotonic()
            while len(futures) < window["size"]:
                item = next(jobs, None)
                if item is None:
                    if suspects and not futures:
                        job, fp = suspects.pop(0)
                        alone.add((job.student, job.assignment))
                        submit(job, fp, suffix="-alone")
                    return
                submit(*item)

        def submit(job, fp, suffix=""):
            if job.assignment not in shared:  # sent once; a task that needs it fetches it
                data = self._shared(job.assignment, workdir)
                shared[job.assignment] = client.submit(_shared_data, data, pure=False,
                                                       key=f"assignment-{job.assignment}-{fp[:12]}")
            key = f"grade-{job.student}-{job.assignment}-{fp[:12]}{suffix}"
            future = client.submit(self.task, job, expected, shared[job.assignment], key=key, pure=False)
            futures[future] = (job, fp)
            running.add(future)

        try:
            submit_more()
            idle = 0
            while futures:
                before = len(futures)
                yield from self._collect(running, futures, client, suspects, alone, submit_more)
                # as_completed can stop with futures still out (it reads its bookkeeping without
                # its lock while its loop thread moves a result): wait for those again, never drop them
                idle = idle + 1 if len(futures) == before else 0
                if futures and idle > 600:
                    raise RunStopped(f"the Dask client lost track of {len(futures)} submission(s) in flight; "
                                     "everything finished so far is recorded: run again to grade the rest")
                for future in list(futures):
                    running.add(future)
                if futures and idle:
                    time.sleep(0.1)
        except (OSError, TimeoutError) as err:  # submit_more asking a scheduler that is gone
            raise RunStopped(self._lost_message(err)) from None
        finally:
            for future in list(futures) + list(shared.values()):
                future.release()

    def _collect(self, running, futures, client, suspects, alone, submit_more):
        """(result, fingerprint) of the futures as_completed hands back, submitting more after each."""
        from distributed.scheduler import KilledWorker

        for future, outcome in running:
            if future not in futures:  # handed back twice (it was waited for again): taken once
                continue
            job, fp = futures.pop(future)
            if future.status == "finished":
                result = outcome
            else:
                err = outcome[1] if isinstance(outcome, tuple) and len(outcome) == 3 else outcome
                if isinstance(err, KilledWorker) and (job.student, job.assignment) not in alone:
                    suspects.append((job, fp))  # graded again alone once the rest is done
                    future.release()
                    submit_more()
                    continue
                if isinstance(err, KilledWorker):
                    # Its fingerprint is recorded: later runs do not try it again (and lose
                    # workers again) until the submission or the grader changes.
                    result = SubmissionResult(job.student, job.assignment, NEEDS_ATTENTION,
                                              _killed_reason(client, err))
                elif isinstance(err, UnfitWorker):
                    raise RunStopped(f"{err}: start every worker from the same commit and "
                                     "environment as this checkout; everything finished so far "
                                     "is recorded") from None
                elif isinstance(err, (ImportError, AttributeError)):  # unpickling grade_task or a Job
                    raise RunStopped(f"a worker cannot load the course's grader "
                                     f"({type(err).__name__}: {str(err)[:200]}): start every "
                                     "worker from the same commit and environment as this "
                                     "checkout; everything finished so far is recorded") from None
                elif _scheduler_gone(client, err):
                    raise RunStopped(self._lost_message(err)) from None
                else:
                    result, fp = SubmissionResult(
                        job.student, job.assignment, NEEDS_ATTENTION,
                        f"the cluster could not grade it ({type(err).__name__}: "
                        f"{str(err)[:200]}); the next run tries again"), None
            future.release()  # the result leaves the cluster once merged
            yield result, fp
            submit_more()

    def _lost_message(self, err):
        where = self.scheduler or "the embedded cluster"
        return (f"the Dask scheduler ({where}) went away ({type(err).__name__}); everything "
                "finished so far is recorded: run again to grade the rest")

    # --- the only writer ------------------------------------------------------------

    @contextlib.contextmanager
    def _gradebook(self):
        """The course gradebook: the one a run keeps open (its statements compiled once,
        its results committed in batches), or one opened and committed for this call."""
        from nbgrader.api import Gradebook

        if self._open_gradebook is None:
            with Gradebook(layout.db_url(self.root), self.config.CourseDirectory.course_id) as gb:
                yield gb
                gb.db.commit()
            self.status.set_many(self._pending)
            self._pending = []
            return
        yield self._open_gradebook

    def _commit(self):
        """Commit the run's merged results, then record their status entries: the status
        never names a grade the gradebook does not hold."""
        if self._open_gradebook is not None:
            self._open_gradebook.db.commit()
        self.status.set_many(self._pending)
        self._pending = []
        self._last_commit = time.monotonic()

    def merge_safely(self, result, fp):
        """merge(), and if recording the result fails (a file name the disk refuses, say),
        that submission needs attention with the reason; the run goes on. The status it
        was recorded with."""
        try:
            self.merge(result, fp)
            return result.status
        except Exception as err:
            reason = (f"its result could not be recorded ({type(err).__name__}: "
                      f"{str(err)[:200]})")
            try:
                self.merge(SubmissionResult(result.student, result.assignment, NEEDS_ATTENTION,
                                            reason, result.elapsed), fp)
            except Exception:  # not even in the gradebook: the status still lists it
                record = Record(NEEDS_ATTENTION, fp, time.time(), round(result.elapsed, 2), reason)
                self.status.set(result.student, result.assignment, record.to_json())
            result.reason = reason
            return NEEDS_ATTENTION

    def merge(self, result, fp):
        """Record one result: the only place that writes the course gradebook and status.
        The gradebook's rows are written with a few statements (grader.grading.merge, on
        nbgrader's tables), in a savepoint of the run's transaction, which is committed
        about once a second. The late penalty is the worker's: nbgrader's run applied the
        course's policy (grader.grading.late) to the score it gave, from the student's
        extended due date; only a regraded submission that keeps a manual grade or extra
        credit, whose score is not the worker's, has it computed again here."""
        from grader.grading import merge as rows

        student, assignment = result.student, result.assignment
        final = self.root / "autograded" / student / assignment
        record = Record(result.status, None if result.retry else fp,  # no fingerprint: graded again
                        time.time(), round(result.elapsed, 2),
                        quick=None if result.retry or not fp else self._quick.get((student, assignment)),
                        starved=fp if result.retry else None)
        with self._gradebook() as gb:
            cells = self._cells.get(assignment)
            if cells is None:
                cells = self._cells[assignment] = rows.AssignmentCells.read(gb.db, assignment)
            with gb.db.begin_nested():
                if result.status == GRADED:
                    _replace_dir(final, result.files)
                    by_hand = rows.write_submission(gb.db, cells, student, result.timestamp, result.notebooks)
                    if by_hand:
                        late.apply(gb, self.config, assignment, student)
                    record.notebooks = {name: nb.checks for name, nb in result.notebooks.items()}
                else:
                    rows.remove_submission(gb.db, cells, student)  # no stale grades
                    shutil.rmtree(final, ignore_errors=True)
                    record.reason = result.reason
            self._pending.append((student, assignment, record.to_json()))
        if self._open_gradebook is not None and (time.monotonic() - self._last_commit > COMMIT_EVERY
                                                 or len(self._pending) >= COMMIT_MOST):
            self._commit()



def _scheduler_gone(client, err):
    """Whether a task's failure means the client lost its scheduler (its futures are then
    cancelled, or the connection fails) rather than the task failing."""
    from concurrent.futures import CancelledError

    return (isinstance(err, (CancelledError, OSError, TimeoutError))
            or client.status not in ("running", "connecting"))


def _killed_reason(client, err):
    """Why a submission is not graded after its task killed one worker after another."""
    tries = getattr(err, "allowed_failures", ALLOWED_FAILURES) + 1
    last = getattr(getattr(err, "last_worker", None), "address", None)
    memory = ""
    try:
        events = client.get_events("worker-restart-memory")
        if any(event.get("worker") == last for _, event in events):
            memory = ", the last one by going over its memory limit"
    except Exception:
        pass
    return (f"grading it killed {tries} workers, one after another{memory}, also when it was "
            "graded alone: a notebook whose "
            "outputs do not fit in a worker's memory, or a crash; not graded, and not tried "
            "again until the submission or the grader changes (FORCE=1 tries it now)")


class _quiet_dask:
    """Dask's own log lines (workers restarting, the client reconnecting) are noise here:
    every outcome is reported by the run itself."""

    def __enter__(self):
        names = ["distributed"] + [n for n in logging.root.manager.loggerDict
                                   if n.startswith("distributed.")]
        self.levels = {name: logging.getLogger(name).level for name in names}
        for name in names:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        return self

    def __exit__(self, *exc):
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)
        return False


WORKDIR_PREFIX = "autograde-"


@contextlib.contextmanager
def _workdir():
    """The run's work folder in the temp folder (the assignments' gradebook templates),
    removed when the run ends; one whose run was killed is removed by the next run."""
    base, marker = held_temp_folder(WORKDIR_PREFIX)
    try:
        yield base
    finally:
        marker.close()
        shutil.rmtree(base, ignore_errors=True)


def _replace_dir(dst, files):
    """Write files (relative path -> bytes) as the folder dst, replacing what was there."""
    dst = Path(dst)
    tmp = dst.with_name(f".{dst.name}.incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, data in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)


def default_jobs():
    """One embedded worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS") or 0) or default_jobs(),
                        help="embedded workers (default: one per core)")
    parser.add_argument("--scheduler", default=os.environ.get("SCHEDULER") or None,
                        help="address of an existing Dask scheduler (default: an embedded LocalCluster)")
    parser.add_argument("--device", default=os.environ.get("DEVICE") or None)
    parser.add_argument("--force", action="store_true", help="regrade unchanged submissions too")
    parser.add_argument("--budget", type=int, default=None, help="seconds per notebook")
    parser.add_argument("--memory", default=os.environ.get("MEMORY") or WORKER_MEMORY,
                        help=f"memory limit of each embedded worker (default {WORKER_MEMORY})")
    parser.add_argument("--student", action="append",
                        help="only these students; their submissions are regraded even when unchanged")
    parser.add_argument("--assignment", action="append", help="only these assignments")
    parser.add_argument("--root", default=str(layout.ROOT))
    args = parser.parse_args(argv)
    chosen = set(layout.discover(args.root, args.student, args.assignment))
    if (args.student or args.assignment) and not chosen:
        print(f"autograde: no submission of {_selection(args)} under {Path(args.root) / 'submitted'}",
              file=sys.stderr)
        return 2
    grading = Grading(args.root, jobs=args.jobs, device=args.device, force=args.force or bool(args.student),
                      budget=args.budget, scheduler=args.scheduler, memory=args.memory)
    start = time.monotonic()
    stopped = interrupted = None
    try:
        summary = grading.run(args.student, args.assignment)
    except RunStopped as err:
        stopped, summary = err, err.summary or _empty_summary()
    except Interrupted as err:
        interrupted, summary = err, err.summary
    except KeyboardInterrupt:  # before any grading started (reading the submissions)
        interrupted, summary = True, _empty_summary()
    where = args.scheduler or (f"{grading.started} local worker(s)" if grading.started else "no worker (nothing to grade)")
    print(_summary(summary, len(chosen), _selection(args), time.monotonic() - start, where))
    for line in _attention_lines(summary, grading.status, chosen):
        print(line)
    if interrupted:
        kept = summary[GRADED] + summary[NEEDS_ATTENTION]
        left = summary.get("not_reached", 0)
        print(f"autograde: INTERRUPTED (Ctrl-C): {kept} submission(s) finished in this run are recorded and kept "
              f"({summary[GRADED]} graded, {summary[NEEDS_ATTENTION]} need attention); {left} were not graded.\n"
              "  A plain `make autograde` (no FORCE=1) continues: it grades what is new or changed and skips what "
              "is recorded." + ("\n  The submissions this regrade did not reach keep their earlier grades." if grading.force
                               else ""), file=sys.stderr)
        return 130
    if stopped:
        print(f"autograde: STOPPED: {stopped}", file=sys.stderr)
        return 1
    return 0


def _empty_summary():
    return {GRADED: 0, NEEDS_ATTENTION: 0, "skipped": 0, "attention": [], "not_reached": 0}


def _attention_lines(summary, status, chosen):
    """The submissions that need attention: this run's (as many as the summary counts), then
    those of the selection that needed attention in an earlier run and were not graded
    again (unchanged since), said to be from an earlier run."""
    lines = [f"  NEEDS ATTENTION {s} / {a}: {reason}" for s, a, reason in summary.get("attention", [])]
    now = {(s, a) for s, a, _ in summary.get("attention", [])}
    earlier = [(s, a, e) for s, a, e in status.attention() if (s, a) in chosen and (s, a) not in now]
    if earlier:
        lines.append(f"  {len(earlier)} more need attention from an earlier run (not graded again: unchanged since; "
                     "fix the submission, or FORCE=1 tries again):")
        lines += [f"  NEEDS ATTENTION (earlier run) {s} / {a}: {e['reason']}" for s, a, e in earlier]
    return lines


def _selection(args):
    """The submissions a run was asked for, in words."""
    students = ", ".join(args.student or []) or "every student"
    assignments = ", ".join(args.assignment or []) or "every assignment"
    return f"{students} / {assignments}"


def _summary(summary, found, selection, seconds, where):
    """The closing lines of a run: what happened to the submissions it was asked for."""
    done = summary["graded"] + summary["needs_attention"] + summary["skipped"]
    lines = [f"autograde: {found} submission(s) of {selection}: {summary['graded']} graded, "
             f"{summary['needs_attention']} need attention, {summary['skipped']} unchanged and skipped"
             + (" (their grades stand; FORCE=1 grades them again)" if summary["skipped"] else "")
             + f"; {seconds:.1f} s on {where}"]
    if done < found:
        lines.append(f"  {found - done} not reached: the run stopped; run again to grade them")
    return "\n".join(lines)


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy: Dask pickles grade_task by
    # reference to grader.grading.autograde, and its exceptions must be the same classes.
    from grader.grading import autograde

    sys.exit(autograde.main())
