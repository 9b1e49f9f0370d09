"""The warm template: a process that has imported what graded notebooks import, and forks
each kernel's sandbox from itself.

    python -s template_server.py SOCKET   (started by grader/isolation/template.py)

Run as a file, never as `grader.isolation...`, so that the course's real `grader` package
is never imported here (the kernels it forks see only the stub). It imports torch, numpy,
matplotlib (pyplot, with the inline backend chosen), IPython, ipykernel and the course's notebook
helpers, and never runs a torch operation, starts a thread or an event loop, or touches
CUDA: a fork of it is then as sound as a fresh interpreter. It says "ready" (or "unfit
<reason>") on stdout, then serves SOCKET, a Unix socket in a folder only its owner
reaches. Each connection sends "spawn <spec.json>\\n"; the template forks, and the child
is the sandbox's launcher exactly as `python launch.py spec.json` would be (launch.py:
namespaces, a new root, the unprivileged user, limits), except that the sandbox's
program is not exec'd: the kernel app starts in the forked process, after its random
state is renewed. The template answers "pid <pid>\\n" with a pidfd of the launcher, and
"exit <status>\\n" when the launcher ends. It leaves when its stdin closes (its parent
closed it, or is gone); its launchers then end their sandboxes, as when a client goes. A
template its owner shares (template.ENV) serves several processes: each launcher also ends its
sandbox when the process that asked for it (the spec's client_pid) is gone.
"""
import gc
import os
import select
import signal
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and sys.path[0] == HERE:
    del sys.path[0]  # this folder is the course's grader package: nothing to import from it


def _load_launcher():
    """launch.py (the sandbox launcher: standard library only), under a private name."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_sandbox_launch", os.path.join(HERE, "launch.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launch = _load_launcher()
INLINE = "module://matplotlib_inline.backend_inline"
PR_SET_NAME = 15
KERNEL_PROCESS_NAME = b"ipykernel"


def warm_imports():
    """Import what graded notebooks import; never run anything that starts a thread."""
    os.environ.setdefault("MPLBACKEND", INLINE)  # as ipykernel sets it before matplotlib loads
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import matplotlib  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    # not matplotlib_inline.backend_inline: importing it connects it to the IPython shell
    # that exists then (none here), so the kernel imports it once its shell exists
    import IPython  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    import ipywidgets  # noqa: F401
    import notebook_helpers  # noqa: F401
    # what the kernel app imports while it starts (its debugger, shell, history, event loop):
    # about a third of a second of every kernel's start when left to the kernel
    import faulthandler  # noqa: F401
    import sqlite3  # noqa: F401
    import IPython.core.completerlib  # noqa: F401
    import IPython.core.debugger  # noqa: F401
    import IPython.core.oinspect  # noqa: F401
    import IPython.extensions.storemagic  # noqa: F401
    import ipykernel.debugger  # noqa: F401
    import ipykernel.zmqshell  # noqa: F401
    import jupyter_client.connect  # noqa: F401
    import tornado.platform.asyncio  # noqa: F401
    # what the checks' meta-device probe imports in the kernel (grader/checks/student_call.py,
    # execute_on_meta): the first operation under a dispatch mode imports torch's compiler
    # package, about 1.8 s of CPU in every graded notebook when left to the kernel
    import torch._dynamo  # noqa: F401


def threads():
    return len(os.listdir("/proc/self/task"))


def start_kernel(spec):
    """The sandbox's program, in the forked process (launch.start_program's child, already
    in the sandbox as its user, with its environment, folder and output): a fresh kernel."""
    import random

    import numpy
    import torch

    os.environ.clear()
    os.environ.update(spec["env"])
    import ctypes

    # its name in ps and psutil (its command line stays the template's)
    ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(KERNEL_PROCESS_NAME), 0, 0, 0)
    # the signal dispositions a fresh interpreter starts with (the launcher reset them
    # to the OS defaults for an exec)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_IGN)
    random.seed()  # from os.urandom, as a fresh interpreter seeds itself
    numpy.random.seed()
    torch.seed()  # a new non-deterministic seed, as each fresh interpreter gets
    import importlib.util

    from ipykernel import kernelapp

    # as `python -m ipykernel_launcher ...` (which then drops its folder from sys.path)
    args = spec["argv"][spec["argv"].index("ipykernel_launcher") + 1:]
    sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *args]

    kernelapp.launch_new_instance()


def launcher(spec_path):
    """The forked child: the sandbox's launcher (launch.main), with the kernel started in
    process instead of exec'd. Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        launch.IN_PROCESS_PROGRAM = start_kernel
        launch.main(spec_path)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException as e:  # noqa: BLE001 - reported on the log, never a silent exit
        os.write(2, f"template: the sandbox's launcher failed: {type(e).__name__}: {e}\n".encode())
    os._exit(code)


def serve(path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    waiting = {}  # launcher pid -> its connection
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, wake_r, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return  # the worker closed our stdin: it is gone or done
        if listener in ready:
            conn, _ = listener.accept()
            try:
                pid = spawn(conn, listener, [wake_r, wake_w], [c.fileno() for c in waiting.values()])
            except OSError as e:
                _send(conn, f"error {e}\n")
                conn.close()
            else:
                waiting[pid] = conn
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        reap(waiting)


def spawn(conn, listener, own_fds, other_conns):
    conn.settimeout(30)
    request = b""
    while not request.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise OSError("the request ended early")
        request += chunk
    verb, _, spec_path = request.decode().strip().partition(" ")
    if verb != "spawn":
        raise OSError(f"unknown request {verb!r}")
    pid = os.fork()
    if pid == 0:
        listener.close()
        for fd in own_fds + other_conns:
            os.close(fd)
        conn.close()
        # stdin and stdout (the template's pipes to its parent) become /dev/null, never
        # free numbers that the launcher's own pipes would then take
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        launcher(spec_path)
    pidfd = os.pidfd_open(pid)
    try:
        socket.send_fds(conn, [f"pid {pid}\n".encode()], [pidfd])
    finally:
        os.close(pidfd)
    return pid


def reap(waiting):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            _send(conn, f"exit {os.waitstatus_to_exitcode(status)}\n")
            conn.close()


def _send(conn, text):
    try:
        conn.settimeout(5)
        conn.sendall(text.encode())
    except OSError:
        pass


def main(path):
    try:
        warm_imports()
    except BaseException as e:  # noqa: BLE001 - any failure means: no template here
        print(f"unfit importing: {type(e).__name__}: {' '.join(str(e).split())}", flush=True)
        return 1
    if threads() != 1:
        print(f"unfit: {threads()} threads after the imports (a fork would lose them)", flush=True)
        return 1
    import torch

    if torch.cuda.is_initialized():  # asks, never initialises
        print("unfit: CUDA was initialised by the imports (a fork cannot carry it)", flush=True)
        return 1
    # What the imports made lives as long as the template and every kernel it forks: out of
    # the collector's sight (gc.freeze, as Python advises before forking without exec), a
    # kernel's full collections never walk it nor copy the pages it lies on (measured: a
    # forked kernel's first full collection, which IPython runs when the kernel shuts down
    # gracefully, 0.2 CPU s before, 0.01 after)
    gc.collect()
    gc.freeze()
    try:
        serve(path)
    finally:
        _remove_folder(os.path.dirname(path))
    return 0


def _remove_folder(folder):
    """The template's private folder (its socket and log), once it leaves."""
    if os.path.basename(folder).startswith("attention-template-"):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
