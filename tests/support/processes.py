"""A Dask cluster of real processes on this machine: `dask scheduler` and `dask worker`
started from this environment, as an instructor would start them on a cluster's nodes.

    with ProcessCluster(folder, workers=2) as cluster:
        Grading(root, scheduler=cluster.address).run()

The tests use it to kill a worker or the scheduler in the middle of a run, and the
benchmark to grade through an external scheduler. Every process it starts (and every
process those start: kernels) is stopped when the block ends. Also here: kill_tree, and
stop_left_running, with which `make test` names and stops what its tests left running.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DASK = str(Path(sys.executable).with_name("dask"))


def kill_tree(pid, sig=signal.SIGKILL):
    """Send sig to a process and everything it started (children first seen, then it)."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for proc in tree:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=10)


class ProcessCluster:
    def __init__(self, folder, workers=2, memory="4GiB", scheduler_env=None, start_timeout=180):
        self.folder = Path(folder)
        self.n_workers, self.memory = workers, memory
        self.scheduler_env = scheduler_env or {}
        self.start_timeout = start_timeout
        self.scheduler = None
        self.workers = []  # Popen of each `dask worker` (its nanny; the worker is its child)
        self.address = None
        self._temp = []  # each worker's TMPDIR

    # --- starting -------------------------------------------------------------------

    def _spawn(self, name, args, env=None):
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.folder / f"{name}.log", "ab")
        # its own session: a signal meant for the test runner does not reach it, and
        # kill_tree stops it with everything it started
        return subprocess.Popen([DASK, *args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=self.folder,
                                env={**os.environ, **(env or {})}, start_new_session=True)

    def start(self):
        info = self.folder / "scheduler.json"
        info.unlink(missing_ok=True)
        self.scheduler = self._spawn("scheduler", [
            "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
            "--scheduler-file", str(info)], env=self.scheduler_env)
        deadline = time.monotonic() + self.start_timeout
        while not info.exists():
            self._check(self.scheduler, "scheduler", deadline)
            time.sleep(0.2)
        import json

        while self.address is None:
            try:
                self.address = json.loads(info.read_text())["address"]
            except (ValueError, KeyError):  # written but not complete yet
                self._check(self.scheduler, "scheduler", deadline)
                time.sleep(0.2)
        for _ in range(self.n_workers):
            self.add_worker()
        if self.n_workers:
            self.wait_for_workers(self.n_workers, deadline)
        return self

    def add_worker(self):
        i = len(self.workers)
        # what a killed worker leaves stays here; a short path, since the kernels' Unix
        # sockets live under it (at most 107 bytes)
        tmp = tempfile.mkdtemp(prefix=f"dask-w{i}-")
        self._temp.append(tmp)
        self.workers.append(self._spawn(f"worker{i}", [
            "worker", self.address, "--name", f"worker{i}", "--nthreads", "1",
            "--memory-limit", self.memory, "--host", "127.0.0.1", "--no-dashboard",
            "--local-directory", str(self.folder / f"worker{i}")], env={"TMPDIR": tmp}))
        return self.workers[-1]

    def _check(self, proc, name, deadline):
        if proc.poll() is not None:
            raise RuntimeError(f"dask {name} exited with {proc.returncode}: "
                               f"{(self.folder / f'{name}.log').read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"dask {name} did not start within {self.start_timeout} s")

    def client(self):
        from distributed import Client

        return Client(self.address, timeout="60s")

    def wait_for_workers(self, n, deadline=None):
        with self.client() as client:
            remaining = (deadline or time.monotonic() + self.start_timeout) - time.monotonic()
            client.wait_for_workers(n, timeout=max(1, remaining))

    # --- faults ---------------------------------------------------------------------

    def worker_of(self, address, client):
        """The Popen of the `dask worker` whose worker has this address (the nanny it
        runs is the worker process's parent)."""
        parents = client.run(os.getppid, workers=[address])
        return next(p for p in self.workers if p.pid == parents.get(address))

    def kill_worker(self, proc):
        """The machine is lost: the nanny, its worker and the kernels they started die."""
        kill_tree(proc.pid)
        proc.wait(timeout=30)

    def kill_scheduler(self):
        kill_tree(self.scheduler.pid)
        self.scheduler.wait(timeout=30)

    # --- stopping -------------------------------------------------------------------

    def stop(self):
        for proc in [*self.workers, self.scheduler]:
            if proc is not None:
                kill_tree(proc.pid, signal.SIGTERM)
                kill_tree(proc.pid)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
        for tmp in self._temp:
            shutil.rmtree(tmp, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False


def stop_left_running(marker, wait=10.0):
    """The processes still running whose command line names `marker` (the suite's temp
    folder: a kernel's connection file, a command's course folder), once they have had `wait`
    seconds to end: each is killed with what it started, and [(pid, command line)] returned,
    so that a test that leaves a process behind is named, not found later by chance."""
    import psutil

    own = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    deadline = time.monotonic() + wait
    while True:
        left = []
        for proc in psutil.process_iter(["cmdline"]):
            args = proc.info["cmdline"] or ()
            if proc.pid not in own and any(marker in arg for arg in args):
                left.append((proc.pid, " ".join(args)))
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for pid, _ in left:
        kill_tree(pid)
    return left
