"""Warm kernels: one template process per grading process, and the sandboxes forked from it.

    tmpl, reason = shared()          # the process's template, started on first use; None, why
    launcher = tmpl.spawn(spec_path) # a Popen-like handle on the sandbox's launcher

The template (grader/isolation/template_server.py) has imported torch, numpy,
matplotlib, IPython, ipykernel and the notebook helpers once; each kernel is a fork of
it, built into a sandbox of its own by the same launcher as a cold kernel (launch.py), so
a kernel starts without paying for those imports. A process may share its template with
processes it starts (the grading process with its embedded Dask workers): where ENV names
a socket of this user's in a private folder, shared() attaches to it (Attached) instead
of starting one. Where no template can be made (an import fails, the template is not
single-threaded, the OS refuses a pidfd), shared() returns None and the reason, and
kernels start cold.
"""
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.isolation import namespaces as ns

SERVER = Path(__file__).resolve().parent / "template_server.py"
START_TIMEOUT = 300  # seconds for the template's imports on a loaded machine
SOCKET_NAME = "template.sock"
ENV = "COURSE_KERNEL_TEMPLATE"  # the socket of a template this process may share (Attached)


class TemplateError(RuntimeError):
    """The template could not be started, or could not fork a kernel."""


class ForkedLauncher:
    """The sandbox's launcher forked by the template, handled as a Popen: poll, wait,
    send_signal, kill, terminate. Signals go through a pidfd (never to a reused pid); the
    exit status comes from the template, which is the launcher's parent."""

    stdin = stdout = stderr = None

    def __init__(self, conn, pid, pidfd):
        self.conn, self.pid, self.pidfd = conn, pid, pidfd
        self.returncode = None
        self._buffer = b""

    def _read(self, timeout):
        ready, _, _ = select.select([self.conn], [], [], timeout)
        if not ready:
            return
        chunk = self.conn.recv(4096)
        self._buffer += chunk
        if b"\n" in self._buffer:
            verb, _, code = self._buffer.split(b"\n", 1)[0].decode().partition(" ")
            self.returncode = int(code) if verb == "exit" else -signal.SIGKILL
        elif not chunk:  # the template is gone: it took the launcher with it
            self.returncode = -signal.SIGKILL
        if self.returncode is not None:
            self._close()

    def _close(self):
        self.conn.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def poll(self):
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("sandbox launcher", timeout)
            self._read(left)
        return self.returncode

    def send_signal(self, signum):
        if self.returncode is None and self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signum)
            except ProcessLookupError:
                pass

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def terminate(self):
        self.send_signal(signal.SIGTERM)


class _Client:
    """What forks a kernel from a template, given its socket."""

    socket = None

    def spawn(self, spec_path):
        """Fork a sandbox for spec_path (as launch.py would build it) from the template."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(30)
            conn.connect(str(self.socket))
            conn.sendall(f"spawn {spec_path}\n".encode())
            message, fds, _, _ = socket.recv_fds(conn, 4096, 1)
        except OSError as e:
            conn.close()
            raise TemplateError(f"the template did not answer: {e}") from None
        text = message.decode(errors="replace")
        if not text.startswith("pid ") or len(fds) != 1:
            conn.close()
            for fd in fds:
                os.close(fd)
            raise TemplateError(f"the template could not fork a kernel: {text.strip() or 'no answer'}")
        conn.settimeout(None)
        launcher = ForkedLauncher(conn, int(text.split()[1]), fds[0])
        launcher._buffer = message.split(b"\n", 1)[1]
        return launcher


class Attached(_Client):
    """A template another process of this user started and shares (the grading process
    with its Dask workers: one template's imports for the whole run), reached by the socket
    that ENV names. Its launchers watch the process that asked for them (the spec's
    client_pid), so a worker that dies still takes its sandboxes with it."""

    owner = None

    def __init__(self, path):
        self.socket = Path(path)

    def alive(self):
        return self.socket.exists()

    def close(self):
        pass  # its owner stops it


def _attachable(path):
    """Whether `path` is a template's socket this process may use: one of this user's, in a
    folder only this user reaches."""
    try:
        st, folder = os.stat(path), os.stat(os.path.dirname(path))
    except OSError:
        return False
    return (stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid() == folder.st_uid
            and not folder.st_mode & 0o077)


class Template(_Client):
    """A started template process and the private folder of its socket."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix=ns.TEMPLATE_PREFIX, dir=ns.rundir_base()))
        self.socket = self.folder / SOCKET_NAME
        env = ns.minimal_env(1)
        cache = ns.font_cache()
        if cache is not None:
            env["MPLCONFIGDIR"] = str(cache)  # the same font list each sandbox gets a copy of
        self.log = open(self.folder / "template.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), str(self.socket)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=self.folder, close_fds=True)
        self.owner = os.getpid()
        # who may still use the folder: once neither runs, the next sandbox's sweep removes it
        # (namespaces.sweep_stale_rundirs) where close() never ran (its process was killed)
        (self.folder / ns.TEMPLATE_OWNER).write_text(json.dumps({
            "server_pid": self.process.pid, "server_start": ns.start_time(self.process.pid),
            "owner_pid": self.owner, "owner_start": ns.start_time(self.owner)}))
        line = self._first_line()
        if line != "ready":
            self.close()
            raise TemplateError(line)

    def _first_line(self):
        deadline = time.monotonic() + START_TIMEOUT
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(0, left))
            if not ready:
                return f"the template did not start within {START_TIMEOUT} s"
            chunk = os.read(self.process.stdout.fileno(), 4096)
            if not chunk:
                log = (self.folder / "template.log").read_text(errors="replace").strip()
                return f"the template exited while starting: {log[-1000:] or 'no output'}"
            data += chunk
        return data.decode(errors="replace").strip()

    def alive(self):
        return self.process.poll() is None and self.owner == os.getpid()

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()  # the template leaves when its stdin closes
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_LOCK = threading.Lock()
_SHARED = {"template": None, "reason": None}


def shared():
    """(template, "") for this process: the one ENV offers (Attached), or one started on first
    use and again if it died; or (None, reason) where no template can be made here (then it
    is not tried again)."""
    with _LOCK:
        tmpl = _SHARED["template"]
        if tmpl is not None and tmpl.alive():
            return tmpl, ""
        if _SHARED["reason"] is not None:
            return None, _SHARED["reason"]
        offered = os.environ.get(ENV)
        if offered and _attachable(offered):
            _SHARED["template"] = Attached(offered)
            return _SHARED["template"], ""
        if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
            _SHARED["reason"] = "this Python or OS has no pidfd"
            return None, _SHARED["reason"]
        try:
            _SHARED["template"] = Template()
        except (OSError, TemplateError) as e:
            _SHARED["reason"] = f"no warm template: {e}"
            return None, _SHARED["reason"]
        return _SHARED["template"], ""


def close_shared():
    """Stop this process's template (a later shared() starts a new one)."""
    with _LOCK:
        tmpl, _SHARED["template"] = _SHARED["template"], None
        _SHARED["reason"] = None
    if tmpl is not None and tmpl.owner == os.getpid():
        tmpl.close()
