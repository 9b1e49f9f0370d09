"""A jupyter_client kernel provisioner that starts each kernel in a sandbox of its own.

Registered as `attention-sandbox` (entry point group `jupyter_client.kernel_provisioners`,
see pyproject.toml) and named by the `attention-grading` kernel spec
(grader/isolation/kernelspec.py), so anything that starts kernels by name through
jupyter_client (nbclient, nbconvert, nbgrader, JupyterLab) gets it.

Each kernel gets new user, mount, pid, network, IPC, UTS and cgroup namespaces, built
by grader/isolation/launch.py from the spec of grader/isolation/namespaces.py, and torn
down with it: when the kernel exits or is killed, the namespace's init exits and the
OS kills every process left in it. The kernel talks to its client over jupyter's `ipc`
transport: Unix sockets in a small tmpfs of the sandbox, which the client reaches
through /proc/<init>/root (the sandbox has no network, and can write nothing on the
host's disks).

Settings are traitlets, set in a Config (see grader.isolation.sandbox_settings), in
nbgrader_config.py / jupyter config files as `c.SandboxProvisioner.<name> = ...`, or in
the kernel spec's `metadata.kernel_provisioner.config`.
"""
import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from jupyter_client.provisioning import LocalProvisioner
from traitlets import Bool, Dict, Integer, List, Unicode

from grader.isolation import cgroups
from grader.isolation import namespaces as ns
from grader.isolation.stub import write_stub

DEFAULTS = ns.Limits()
_COLD_REASONS = set()  # why kernels of this process start cold, each said once
KILL_WAIT = 1.0  # seconds kill() waits for the killed sandbox's launcher to exit


class SandboxProvisioner(LocalProvisioner):
    """Starts the kernel spec's command in a fresh sandbox (see the module's docstring)."""

    memory = Integer(DEFAULTS.memory, config=True,
                     help="Address space of each process in the sandbox, in bytes.")
    cpu_seconds = Integer(DEFAULTS.cpu_seconds, config=True,
                          help="CPU time of each process, in seconds.")
    processes = Integer(DEFAULTS.processes, config=True,
                        help="Processes and threads the sandbox's user may have.")
    open_files = Integer(DEFAULTS.open_files, config=True, help="Open files per process.")
    file_size = Integer(DEFAULTS.file_size, config=True,
                        help="Largest file a process may write, in bytes.")
    tmp_size = Integer(DEFAULTS.tmp_size, config=True, help="Size of /tmp, in bytes.")
    shm_size = Integer(DEFAULTS.shm_size, config=True, help="Size of /dev/shm, in bytes.")
    work_size = Integer(DEFAULTS.work_size, config=True,
                        help="Size of the working folder (the copy of the notebook's folder).")
    threads = Integer(1, config=True, help="OMP/MKL/OpenBLAS threads of the kernel.")
    readable = List(Unicode(), config=True,
                    help="More host paths the kernel may read (shown read-only where they are).")
    workdir = Unicode(None, allow_none=True, config=True,
                      help="The folder copied in as the kernel's working folder; by default "
                           "the cwd the kernel is started with.")
    copy_workdir = Bool(True, config=True,
                        help="Copy the working folder's files in; if False it starts empty.")
    course_dirs = List(Unicode(), config=True,
                       help="Course folders (besides this package's) whose instructor-only "
                            "parts may never be a kernel's working folder.")
    extra_env = Dict(config=True, help="Variables added to the kernel's minimal environment.")
    user = Unicode(ns.DEFAULT_USER, config=True,
                   help="The login name the kernel runs under, as the student's own lab shows "
                        "it (USER, LOGNAME, the passwd entry, HOME=/home/<user>); the grading "
                        "preprocessor gives the student's id.")
    hostname = Unicode("", config=True,
                       help="The host name the kernel sees; by default this machine's, as a "
                            "kernel of the course server's JupyterLab sees it.")
    host_uid = Integer(65534, config=True,
                       help="Host uid of the kernel's user when the instructor is root.")
    host_gid = Integer(65534, config=True,
                       help="Host gid of the kernel's user when the instructor is root.")
    setup_timeout = Integer(60, config=True,
                            help="Seconds from launch until the kernel's sockets exist (the "
                                 "sandbox's set-up and the kernel's own start).")
    total_memory = Integer(DEFAULTS.total_memory, config=True,
                           help="Memory of all the sandbox's processes together, in bytes "
                                "(enforced where the sandbox gets a cgroup of its own).")
    use_cgroups = Bool(True, config=True,
                       help="Give each sandbox a cgroup of its own (one memory and one process "
                            "limit for all its processes, a CPU share, its CPU time) where this "
                            "machine allows it; see `python -m grader.isolation check`.")
    warm = Bool(True, config=True,
                help="Fork each kernel from this process's warm template (torch and the "
                     "notebooks' imports already loaded; see grader/isolation/template.py); "
                     "cold kernels where no template can be made, or if False.")
    start_tries = Integer(3, config=True,
                          help="Tries to build the sandbox before its kernel is said not to "
                               "start (a loaded machine can refuse one for a moment).")

    rundir = None
    init_pid = None
    _kernel_pid = None
    init_start = None
    warm_started = None  # whether this kernel was forked from the warm template
    cgroup = None  # the sandbox's cgroups.SandboxCgroup, where it has one
    setup_seconds = None  # from launch to a built sandbox (namespaces, mounts, copies)
    ready_seconds = None  # from launch to the kernel's sockets, sealed
    kernel_cwd = None  # the kernel's working folder, as the kernel sees it
    _owns_connection_file = False  # km.connection_file is rundir/client.json, set here
    output = ""

    def limits(self):
        return ns.Limits(memory=self.memory, cpu_seconds=self.cpu_seconds,
                         processes=self.processes, open_files=self.open_files,
                         file_size=self.file_size, tmp_size=self.tmp_size,
                         shm_size=self.shm_size, work_size=self.work_size,
                         total_memory=self.total_memory)

    async def pre_launch(self, **kwargs):
        try:
            return await self._pre_launch(**kwargs)
        except BaseException:
            self._forget_rundir()
            raise

    def _forget_rundir(self):
        if self.rundir is not None:
            ns.remove_rundir(self.rundir)
            self.rundir = None

    async def _pre_launch(self, **kwargs):
        available, reason = ns.isolation_available()
        if not available:
            raise ns.IsolationUnavailable(reason)
        km = self.parent
        if km is None:
            raise RuntimeError("the sandbox provisioner is started by a KernelManager")
        if self.rundir is None or not self.rundir.is_dir():  # gone: swept while no sandbox ran in it
            self.rundir = ns.make_rundir()
            write_stub(self.rundir / "stub")
        # The client reaches the kernel's sockets through rundir/ipc, a link to the
        # sandbox's socket folder (/proc/<init>/root/run/jupyter) renewed at each start,
        # so that clients keep working across restarts.
        km.transport = "ipc"
        km.ip = str(self.rundir / "ipc" / ns.IPC_NAME)
        # A bare KernelManager (nbclient's, a grading worker's) writes the client's connection
        # file, the kernel's key in it, to the temp folder, where it stays when the client is
        # killed: it is written in the sandbox's folder instead, removed with it.
        if not km.connection_file or self._owns_connection_file:
            km.connection_file = str(self.rundir / "client.json")
            self._owns_connection_file = True
        workdir = self.workdir or kwargs.get("cwd")
        kwargs = await super().pre_launch(**kwargs)
        cmd = kwargs.pop("cmd")
        info = dict(km.get_connection_info())
        info["key"] = info["key"].decode() if isinstance(info["key"], bytes) else info["key"]
        info["ip"] = f"{ns.RUN_DIR}/{ns.IPC_NAME}"  # the kernel's own view
        connection = self.rundir / "connection.json"
        connection.write_text(json.dumps(info))
        connection.chmod(0o600)
        cmd = [ns.CONNECTION_FILE if arg == km.connection_file else arg for arg in cmd]
        if not any(Path(cmd[0]).absolute().is_relative_to(p) for p in ns.python_prefixes()):
            raise ValueError(f"the kernel's program {cmd[0]} is not in this Python "
                             f"environment ({ns.python_prefixes()[0]}), the only one the "
                             "sandbox shows")
        if workdir and self.copy_workdir:
            workdir = ns.check_workdir(workdir)
            for course in self.course_dirs:
                ns.check_workdir(workdir, course)
        env = ns.minimal_env(self.threads, {**(self.kernel_spec.env or {}), **self.extra_env},
                             user=self.user)
        spec = ns.sandbox_spec(self.rundir, cmd, workdir=Path(workdir).resolve() if workdir else None,
                               copy_workdir=self.copy_workdir, stub_dir=self.rundir / "stub",
                               readable=self.readable, limits=self.limits(), env=env,
                               host_ids=(self.host_uid, self.host_gid), font_cache=ns.font_cache(),
                               sockets=[f"{info['ip']}-{port}" for port in km.ports],
                               user=self.user, hostname=self.hostname or None)
        self.kernel_cwd = spec["cwd"]
        self._new_cgroup()
        spec["cgroup_procs"] = self.cgroup.procs_files if self.cgroup else []
        spec["client_pid"] = os.getpid()  # a shared template's launcher watches this process
        spec["client_start"] = ns.start_time(os.getpid())  # while it runs, its folder is not swept
        return {"cmd": ns.launcher_command(ns.write_spec(self.rundir, spec))}

    def _new_cgroup(self):
        """A fresh cgroup for the sandbox about to start, where the machine allows one."""
        self._remove_cgroup()
        support = cgroups.support()
        if not self.use_cgroups or not support.version:
            return
        try:
            self.cgroup = cgroups.SandboxCgroup.create(support, self.total_memory, self.processes)
        except OSError as e:
            self.log.warning("the sandbox gets no cgroup of its own (per-process limits only): %s", e)

    def _remove_cgroup(self):
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    def sandbox_cpu_seconds(self):
        """CPU time used so far by every process of the sandbox, children included, or None
        where the sandbox has no cgroup to count it."""
        if self.cgroup is None:
            return None
        try:
            return self.cgroup.cpu_seconds()
        except OSError:
            return None

    def kernel_pid(self):
        """The host pid of the sandbox's program (the kernel): init's first child, found once
        (processes orphaned later are init's children too, started after it); None where
        it cannot be read."""
        if self._kernel_pid is None and self._init_alive():
            try:
                children = Path(f"/proc/{self.init_pid}/task/{self.init_pid}/children").read_text().split()
                self._kernel_pid = min(children, key=ns.start_time) if children else None
            except (OSError, ValueError):
                return None
        return self._kernel_pid

    def kernel_wait_for_cpu(self):
        """({thread id: seconds}, ready): how long each thread of the kernel (its main
        thread runs the notebook's cells; others send its output) has been ready to run but
        kept from a CPU (its run-queue delay, /proc/<pid>/task/<tid>/schedstat), and whether
        the main thread is ready to run (or running) now; None where it cannot be read. The
        kernel adds a wait to the delay when it ends, so a thread that is ready now may have
        waited longer than its delay says."""
        pid = self.kernel_pid()
        if pid is None:
            return None
        delays = {}
        try:
            ready = ns.stat_fields(pid)[0] == b"R"
            tids = os.listdir(f"/proc/{pid}/task")
        except (OSError, IndexError):
            return None
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    delays[int(tid)] = int(f.read().split()[1]) / 1e9
            except (OSError, ValueError, IndexError):
                continue  # a thread that just ended
        return delays, ready

    def sandbox_oom_kills(self):
        """How many of the sandbox's processes were killed for its memory limit (total_memory),
        or None where the sandbox has no cgroup to count them."""
        if self.cgroup is None:
            return None
        try:
            return self.cgroup.oom_kills()
        except OSError:
            return None

    async def launch_kernel(self, cmd, **kwargs):
        self.cwd = kwargs.get("cwd")
        errors = []
        for _ in range(max(1, self.start_tries)):
            started = time.monotonic()
            state = await self._launch_once(cmd)
            if state["state"] == "running":
                break
            await self._stop()
            output = self.kernel_output().strip()
            output = f"; the kernel wrote:\n{output[-4000:]}" if output else ""
            errors.append(f"{state['error']}{output}")
            self.log.warning("the grading sandbox did not start (%s); trying again", state["error"])
        else:
            self._forget_rundir()
            tries = f" ({len(errors)} tries)" if len(errors) > 1 else ""
            raise ns.SandboxError(f"the grading sandbox could not start{tries}: {errors[-1]}")
        self.init_pid, self.init_start = state["init_pid"], state["init_start"]
        self._kernel_pid = None
        self.setup_seconds = state["built_at"] - started
        self.ready_seconds = time.monotonic() - started
        link = self.rundir / "ipc"
        (self.rundir / "ipc.new").unlink(missing_ok=True)
        (self.rundir / "ipc.new").symlink_to(f"/proc/{self.init_pid}/root{ns.RUN_DIR}")
        (self.rundir / "ipc.new").replace(link)
        return self.connection_info

    async def _launch_once(self, cmd):
        """Start the launcher (forked from the warm template, or a new process) and wait
        for the sandbox's state: running, or failed with the reason."""
        for name in ("state.json", "kernel.log"):
            (self.rundir / name).unlink(missing_ok=True)
        self.process = self._fork_warm(cmd[-1]) if self.warm else None
        self.warm_started = self.process is not None
        if self.process is None:
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            env={"PATH": "/usr/bin:/bin"}, cwd=self.rundir,
                                            start_new_session=True, close_fds=True)
        self.pid = self.pgid = self.process.pid
        deadline = time.monotonic() + self.setup_timeout
        while True:
            state = ns.read_state(self.rundir)
            if state is not None:
                return state
            if self.process.poll() is not None or time.monotonic() > deadline:
                return {"state": "failed", "error": "the sandbox's launcher stopped"
                        if self.process.poll() is not None else
                        f"the sandbox was not ready after {self.setup_timeout} s"}
            await asyncio.sleep(0.005)

    def _fork_warm(self, spec_path):
        """The launcher forked from the warm template, or None (said once per process)."""
        from grader.isolation import template

        tmpl, reason = template.shared()
        if tmpl is not None:
            try:
                return tmpl.spawn(spec_path)
            except template.TemplateError as e:
                reason = str(e)
        if reason not in _COLD_REASONS:
            _COLD_REASONS.add(reason)
            self.log.warning("grading kernels start cold (each imports torch itself): %s", reason)
        return None

    def host_path(self, path):
        """Where a path of the sandbox (say a file in kernel_cwd) is seen from the host
        while the sandbox runs: under /proc/<init>/root. Links met on the way resolve
        against the host's root, so open the last component with O_NOFOLLOW."""
        if not self._init_alive():
            raise ns.SandboxError("the kernel's sandbox is not running")
        return f"/proc/{self.init_pid}/root{Path('/', path)}"

    def _init_alive(self):
        """Whether the sandbox's init (its pid 1) still runs: pids are compared with
        their start time, so a reused pid is never signalled."""
        return bool(self.init_pid) and ns.process_started_at(self.init_pid, self.init_start)

    async def send_signal(self, signum):
        """SIGKILL goes to the sandbox's init (which takes every process of the sandbox
        with it); other signals go to the launcher, which passes them on (SIGINT to the
        kernel's process group, SIGTERM ends the sandbox)."""
        if signum == signal.SIGKILL and self._init_alive():
            os.kill(self.init_pid, signal.SIGKILL)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)

    async def kill(self, restart=False):
        if self.process is not None:
            try:
                await self.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            await self._gone(KILL_WAIT)

    async def _gone(self, limit):
        """Wait up to limit seconds for the launcher to exit (a killed sandbox takes a few
        milliseconds), so that jupyter_client's wait after a kill, which polls every 0.1 s,
        finds it gone at its first look."""
        deadline = time.monotonic() + limit
        while self.process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def terminate(self, restart=False):
        if self.process is not None:
            try:
                await self.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    async def _stop(self):
        """Make sure the sandbox is gone: its init, then the launcher."""
        deadline = time.monotonic() + 10
        while self._init_alive() and time.monotonic() < deadline:
            try:
                os.kill(self.init_pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.01)
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()

    def kernel_output(self):
        """What the kernel process wrote to its stdout and stderr (first MiB), for
        diagnosing a kernel that died; kept after the sandbox is gone."""
        if self.rundir is not None and (self.rundir / "kernel.log").exists():
            self.output = (self.rundir / "kernel.log").read_text(errors="replace")
        return self.output

    async def cleanup(self, restart=False):
        await super().cleanup(restart=restart)
        await self._stop()
        self._remove_cgroup()
        self.kernel_output()
        if not restart:
            self._forget_rundir()

    async def get_provisioner_info(self):
        info = await super().get_provisioner_info()
        info.update({"init_pid": self.init_pid, "init_start": self.init_start,
                     "rundir": str(self.rundir) if self.rundir else None})
        return info

    async def load_provisioner_info(self, provisioner_info):
        await super().load_provisioner_info(provisioner_info)
        self.init_pid = provisioner_info.get("init_pid")
        self.init_start = provisioner_info.get("init_start")
        rundir = provisioner_info.get("rundir")
        self.rundir = Path(rundir) if rundir else None
