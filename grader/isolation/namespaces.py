"""What a sandbox contains, as data: the spec that grader/isolation/launch.py carries out.

A sandbox is built on an empty root, so only what is listed here exists inside it:
- the system (/usr and its links, a few files of /etc: the dynamic linker's cache,
  fonts, time zone; passwd, group and hosts written for the sandbox), read-only;
- the Python environment (sys.prefix and sys.base_prefix), read-only;
- of the course: the student-side helpers (notebook_helpers/, data/corpus.txt) and a
  stub `grader` package without checks, read-only;
- its own /proc, /dev (null, zero, full, random, urandom), /tmp and /dev/shm (tmpfs,
  with size limits), a private folder for the kernel's sockets and connection file,
  and a writable home folder, /home/<user>, holding the working folder (a copy of the
  notebook's folder, /home/<user>/<its name>), size-limited together.
To the code in it, the kernel looks like one a student runs in their own lab: the
student's login name (USER, LOGNAME, the passwd entry), their home folder (HOME), the
notebook in a folder of its own in that home, the machine's host name, and a pid that is
not 2.
Nothing else: not the course's solutions, references, gradebooks, submissions,
outputs or git history, not other kernels' folders, not the instructor's home.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCHER = HERE / "launch.py"
GRADER_DIR = HERE.parent
COURSE_ROOT = GRADER_DIR.parent
MiB, GiB = 2**20, 2**30

SANDBOX_UID = SANDBOX_GID = 1000  # the student's ids inside the sandbox
DEFAULT_USER = "student"  # the login name inside, where no student is named
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
               "fonts", "os-release", "mime.types")
DEVICES = ("null", "zero", "full", "random", "urandom")
# The student-side course files visible in the sandbox (relative to the course root).
COURSE_READABLE = ("notebook_helpers", "data/corpus.txt")
# Folders of the course a working folder may never be copied from.
INSTRUCTOR_ONLY = ("solutions", "data/references", ".git", "exchange", "source", "release")
# Folders holding one sub-folder per student, then one per assignment.
PER_STUDENT = ("submitted", "autograded", "feedback")
RUN_DIR = "/run/jupyter"  # the kernel's sockets and connection file, inside
IPC_NAME = "kernel"
CONNECTION_FILE = f"{RUN_DIR}/connection.json"
# matplotlib's font list, built once per environment and copied into each sandbox's home,
# where matplotlib looks for it (~/.cache/matplotlib; each kernel would otherwise rebuild
# it: about 0.2 s of CPU).
FONT_CACHE = Path(sys.prefix) / "share" / "attention-grading" / "matplotlib"
FIRST_PIDS = (1000, 30000)  # the program's pid is drawn from here (see launch.first_pid)


@dataclass
class Limits:
    """Resource limits of one sandbox. Sizes in bytes, times in seconds."""
    memory: int = 4 * GiB  # address space of each process (RLIMIT_AS)
    cpu_seconds: int = 600  # CPU time of each process (RLIMIT_CPU)
    processes: int = 256  # processes and threads of the sandbox's user (RLIMIT_NPROC)
    open_files: int = 1024  # RLIMIT_NOFILE
    file_size: int = 128 * MiB  # largest file a process may write (RLIMIT_FSIZE)
    tmp_size: int = 256 * MiB  # /tmp
    shm_size: int = 64 * MiB  # /dev/shm
    work_size: int = 256 * MiB  # the working folder
    total_memory: int = 4 * GiB  # all the sandbox's processes together (its cgroup, if any)

    def rlimits(self):
        return {"RLIMIT_AS": [self.memory, self.memory],
                "RLIMIT_CPU": [self.cpu_seconds, self.cpu_seconds + 5],
                "RLIMIT_NPROC": [self.processes, self.processes],
                "RLIMIT_NOFILE": [self.open_files, self.open_files],
                "RLIMIT_FSIZE": [self.file_size, self.file_size],
                "RLIMIT_CORE": [0, 0]}


class SandboxError(RuntimeError):
    """A sandbox could not be built, or its kernel stopped before it was ready."""


class IsolationUnavailable(SandboxError):
    """The OS cannot build sandboxes here; grading must not go on without them."""


def _within(path, folder):
    path, folder = Path(path), Path(folder)
    return path == folder or folder in path.parents


def python_prefixes():
    """The folders the environment's Python needs: its prefix and base prefix, as given
    and with links resolved."""
    found = []
    for prefix in (sys.prefix, sys.base_prefix):
        for path in (Path(prefix).absolute(), Path(prefix).resolve()):
            if str(path) not in found:
                found.append(str(path))
    return found


def check_workdir(workdir, course_root=COURSE_ROOT):
    """Refuse a working folder whose copy would carry more than one notebook's folder:
    the course itself, an environment, the home folder, instructor-only material, or a
    folder holding several students' work. Returns the resolved path."""
    path = Path(workdir).resolve()
    course = Path(course_root).resolve()
    # The temp folder holds other kernels' private folders (their connection keys).
    for protected in [course, Path.home(), Path(tempfile.gettempdir()).resolve(),
                      *map(Path, python_prefixes())]:
        if _within(protected, path):
            raise ValueError(f"the working folder {path} holds {protected}; a kernel's "
                             "working folder must be one notebook's folder")
    for name in INSTRUCTOR_ONLY:
        if _within(path, course / name):
            raise ValueError(f"the working folder {path} is inside the course's {name}/, "
                             "which no kernel may see")
    for name in PER_STUDENT:
        base = course / name
        if _within(path, base) and len(path.relative_to(base).parts) < 2:
            raise ValueError(f"the working folder {path} holds several students' or "
                             f"assignments' folders of {name}/; use <student>/<assignment>")
    return path


def login_name(name):
    """name as a login name the sandbox can show (USER, passwd, /home/<name>): letters,
    digits, dot, dash and underscore, not starting with a dot or a dash; else the default."""
    import re

    name = str(name or "")
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,31}", name):
        return name
    return DEFAULT_USER


def host_name(name=None):
    """The host name the sandbox shows: name, or this machine's (as a student's kernel on
    the course server sees it), as a valid host name."""
    import re
    import socket

    name = re.sub(r"[^A-Za-z0-9.-]", "-", name or socket.gethostname())[:63].strip("-.")
    return name or "localhost"


def home_of(user):
    return f"/home/{login_name(user)}"


def _system_mounts(user=DEFAULT_USER, hostname="localhost"):
    ops = []
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            ops.append({"op": "symlink", "dst": f"/{name}", "target": os.readlink(host)})
        elif host.is_dir():
            ops.append({"op": "bind", "src": str(host), "dst": str(host)})
    ops.append({"op": "dir", "dst": "/etc"})
    for name in ETC_ENTRIES:
        host = Path("/etc") / name
        if host.is_symlink() and name != "localtime":
            ops.append({"op": "symlink", "dst": str(host), "target": os.readlink(host)})
        elif host.exists():
            ops.append({"op": "bind", "src": str(host.resolve()), "dst": str(host)})
    files = {
        "passwd": f"root:x:0:0:root:/root:/bin/bash\n"
                  f"{user}:x:{SANDBOX_UID}:{SANDBOX_GID}:{user}:{home_of(user)}:/bin/bash\n"
                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\n{user}:x:{SANDBOX_GID}:\nnogroup:x:65534:\n",
        "hosts": f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n::1 localhost\n",
        "hostname": f"{hostname}\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    }
    ops += [{"op": "file", "dst": f"/etc/{name}", "content": text} for name, text in files.items()]
    return ops


def _device_mounts(limits):
    ops = [{"op": "tmpfs", "dst": "/dev", "size": "64k", "mode": "755"}]
    ops += [{"op": "bind", "src": f"/dev/{name}", "dst": f"/dev/{name}", "rw": True, "dev": True}
            for name in DEVICES if Path(f"/dev/{name}").exists()]
    ops += [{"op": "symlink", "dst": "/dev/fd", "target": "/proc/self/fd"}]
    ops += [{"op": "symlink", "dst": f"/dev/{name}", "target": f"/proc/self/fd/{fd}"}
            for fd, name in enumerate(("stdin", "stdout", "stderr"))]
    ops.append({"op": "tmpfs", "dst": "/dev/shm", "size": str(limits.shm_size), "mode": "1777"})
    return ops


def _covered(path, binds):
    """Whether path is already visible, at its own place, through an earlier bind."""
    return any(b["src"] == b["dst"] and _within(path, b["dst"]) for b in binds)


def sandbox_spec(rundir, argv, *, workdir=None, copy_workdir=True, stub_dir, course_root=COURSE_ROOT,
                 grader_dir=GRADER_DIR, readable=(), limits=None, env=None,
                 host_ids=(65534, 65534), font_cache=None, sockets=(), user=DEFAULT_USER,
                 hostname=None):
    """The launcher's spec for one sandbox (see launch.py).

    rundir: a private folder of this sandbox on the host (its new root's mount point,
    state and log); argv: the program, run in /home/<user>/<workdir's name>
    (in the home folder, a size-limited tmpfs; a copy of the host folder's files unless
    copy_workdir is False), or in the empty home folder;
    stub_dir: the stub grader package, shown where the real one is; readable: more
    host paths shown read-only where they are; host_ids: the host uid and gid the
    sandbox's user is when the instructor is root (otherwise it is the instructor's own,
    see launch.write_maps); sockets: the program's Unix sockets (inside paths): the
    sandbox is ready once they exist, and their folder is then made read-only; user and
    hostname: the login name and host name the program sees (the env's USER, LOGNAME and
    HOME are the caller's to set: minimal_env)."""
    import secrets

    limits = limits or Limits()
    rundir, course_root = Path(rundir), Path(course_root)
    user, hostname = login_name(user), host_name(hostname)
    home = home_of(user)
    ops = _system_mounts(user, hostname)
    ops += _device_mounts(limits)
    ops += [{"op": "proc", "dst": "/proc"}, {"op": "sysfs", "dst": "/sys"},
            {"op": "tmpfs", "dst": "/tmp", "size": str(limits.tmp_size), "mode": "1777"}]
    binds = [op for op in ops if op["op"] == "bind"]
    wanted = python_prefixes() + [str(Path(p).absolute()) for p in readable]
    wanted += [str(course_root / name) for name in COURSE_READABLE]
    for path in wanted:
        if Path(path).exists() and not _covered(path, binds):
            binds.append({"op": "bind", "src": str(Path(path).resolve()), "dst": path})
            ops.append(binds[-1])
    ops.append({"op": "bind", "src": str(stub_dir), "dst": str(grader_dir)})
    ops.append({"op": "tmpfs", "dst": home, "size": str(limits.work_size), "mode": "755",
                "owned": True})
    if font_cache is not None and Path(font_cache).is_dir():
        ops.append({"op": "dir", "dst": f"{home}/.cache", "owned": True})
        ops.append({"op": "copy", "src": str(font_cache), "dst": f"{home}/.cache/matplotlib"})
    inside = f"{home}/{Path(workdir).name}" if workdir is not None else home
    if workdir is not None:
        ops.append({"op": "dir", "dst": inside, "owned": True})
        if copy_workdir:
            ops.append({"op": "copy", "src": str(workdir), "dst": inside,
                        "limit": f"{limits.work_size // MiB} MiB"})
    ops += [{"op": "tmpfs", "dst": RUN_DIR, "size": "1m", "mode": "700", "owned": True},
            {"op": "copyfile", "src": str(rundir / "connection.json"), "dst": CONNECTION_FILE}]
    return {"host_ids": list(host_ids), "uid": SANDBOX_UID, "gid": SANDBOX_GID,
            "root": str(rundir / "root"), "state": str(rundir / "state.json"),
            "log": str(rundir / "kernel.log"), "log_limit": MiB, "mounts": ops,
            "limits": limits.rlimits(), "env": dict(env or {}), "cwd": inside,
            "sockets": list(sockets), "hostname": hostname,
            "first_pid": FIRST_PIDS[0] + secrets.randbelow(FIRST_PIDS[1] - FIRST_PIDS[0]),
            "argv": list(argv)}


def minimal_env(threads=1, extra=None, user=DEFAULT_USER):
    """The sandbox's whole environment: nothing of the instructor's; the student's login
    name and home folder, as in a terminal of their own."""
    prefix = Path(sys.prefix).absolute()
    user = login_name(user)
    env = {"PATH": f"{prefix}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": home_of(user),
           "LANG": "C.UTF-8", "USER": user, "LOGNAME": user, "SHELL": "/bin/bash"}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                 "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        env[name] = str(threads)
    env.update(extra or {})
    return env


def font_cache():
    """matplotlib's font list for the sandbox (built here once, with no home folder so
    that only fonts the sandbox also sees are listed); None if it cannot be built."""
    if (FONT_CACHE / ".complete").exists():
        return FONT_CACHE
    try:
        FONT_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=True,
                       capture_output=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "MPLCONFIGDIR": str(FONT_CACHE)})
        (FONT_CACHE / ".complete").touch()
        return FONT_CACHE
    except (OSError, subprocess.SubprocessError):
        return None


def launcher_command(spec_path):
    """The host command that builds the sandbox and runs the spec's program in it."""
    return [sys.executable, "-I", "-S", "-B", str(LAUNCHER), str(spec_path)]


SOCKET_PATH_MAX = 107  # bytes in a Unix socket's address (sun_path), without its NUL
RUNDIR_PREFIX = "attention-kernel-"
TEMPLATE_PREFIX = "attention-template-"  # a warm template's folder (grader/isolation/template.py)
TEMPLATE_OWNER = "owner.json"  # in it: the template's and its owner's pids and start times


def rundir_base(tmp=None):
    """Where sandboxes' folders go: the temporary folder, unless the kernel's sockets
    (<rundir>/ipc/kernel-<port>) would get an address too long for a Unix socket, as under
    a batch system's or a test runner's deep TMPDIR; then /tmp."""
    tmp = tmp or tempfile.gettempdir()
    longest = len(os.fsencode(tmp)) + len(f"/{RUNDIR_PREFIX}xxxxxxxx/ipc/{IPC_NAME}-65535")
    if longest <= SOCKET_PATH_MAX:
        return tmp
    if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    raise RuntimeError(f"the temporary folder {tmp} is too deep for the grading kernel's sockets "
                       f"(at most {SOCKET_PATH_MAX} bytes); set TMPDIR to a shorter path")


STALE_AFTER = 600  # seconds: a sandbox's folder names its running init within seconds of its start
_SWEPT = set()  # the folders this process has swept (once each)


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command's name (state first, start time at
    index 19)."""
    with open(f"/proc/{int(pid)}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()


def start_time(pid):
    """A process's start time (clock ticks after boot), from /proc/<pid>/stat."""
    return int(stat_fields(pid)[19])


def process_started_at(pid, start):
    """Whether process pid runs and started at `start` (clock ticks after boot): a pid the
    system gave to another process since is not it."""
    try:
        fields = stat_fields(pid)
    except (OSError, ValueError, TypeError):
        return False
    return fields[0] not in (b"Z", b"X") and int(fields[19]) == start


def sweep_stale_rundirs(base=None, now=None):
    """Remove the folders sandboxes left behind when the process that would have removed
    them was killed (a grading worker killed for its memory, a run stopped with SIGKILL):
    this user's attention-kernel-* folders in `base` (rundir_base()), untouched for
    STALE_AFTER seconds, where neither the sandbox's init nor the process that started it
    (the spec's client, which may restart a kernel in the same folder) still runs, pids
    compared with their start times; and likewise the attention-template-* folders of warm
    templates where neither the template nor the process that started it runs (a folder
    that does not say who they are, as an older version's, is left). The folders removed,
    as a list; nothing else is touched."""
    import shutil

    base = Path(base or rundir_base())
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith((RUNDIR_PREFIX, TEMPLATE_PREFIX)):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not entry.is_dir(follow_symlinks=False) or st.st_uid != os.getuid() or now - st.st_mtime < STALE_AFTER:
            continue
        gone = _template_gone if entry.name.startswith(TEMPLATE_PREFIX) else _sandbox_gone
        if not gone(entry.path):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)  # the link to a gone sandbox is not followed
        if not os.path.lexists(entry.path):
            removed.append(entry.path)
    return removed


def _sandbox_gone(folder):
    """Whether neither a sandbox's init nor the process that started it still runs."""
    state = read_state(folder) or {}
    if process_started_at(state.get("init_pid"), state.get("init_start")):
        return False  # a sandbox still running (a long grading, a student's lab kernel)
    try:
        spec = json.loads((Path(folder) / "spec.json").read_text())
    except (OSError, ValueError):
        spec = {}
    # its client runs: it may start a kernel here again (a restart)
    return not process_started_at(spec.get("client_pid"), spec.get("client_start"))


def _template_gone(folder):
    """Whether a warm template's folder names its template and owner (TEMPLATE_OWNER) and
    neither runs."""
    try:
        owner = json.loads((Path(folder) / TEMPLATE_OWNER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(owner, dict):
        return False
    return not any(process_started_at(owner.get(f"{who}_pid"), owner.get(f"{who}_start"))
                   for who in ("server", "owner"))


def make_rundir():
    """A private folder (0700) on the host for one sandbox; the first in a process sweeps
    the folders that killed processes left (sweep_stale_rundirs)."""
    base = rundir_base()
    if base not in _SWEPT:
        _SWEPT.add(base)
        sweep_stale_rundirs(base)
    path = Path(tempfile.mkdtemp(prefix=RUNDIR_PREFIX, dir=base))
    (path / "root").mkdir()
    return path


def write_spec(rundir, spec):
    path = Path(rundir) / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def read_state(rundir):
    try:
        return json.loads((Path(rundir) / "state.json").read_text())
    except (OSError, ValueError):
        return None


_AVAILABLE = None
SANDBOX_TRIES = 3  # a loaded machine can fail one try (a fork refused for a moment)


def isolation_available():
    """(True, "") where a sandbox can be built here, else (False, why). Found out once per
    process by building real sandboxes that run `true`: up to SANDBOX_TRIES, since one
    try can fail for a moment on a loaded machine; a machine without namespaces fails
    them all."""
    global _AVAILABLE
    if _AVAILABLE is None:
        for attempt in range(SANDBOX_TRIES):
            _AVAILABLE = try_sandbox()
            if _AVAILABLE[0]:
                break
            time.sleep(0.5 * (attempt + 1))
    return _AVAILABLE


def try_sandbox():
    """Build one sandbox that runs `true`: (True, "") or (False, why)."""
    import shutil

    if not sys.platform.startswith("linux"):
        return False, f"kernel isolation needs Linux namespaces; this is {sys.platform}"
    true = shutil.which("true", path="/usr/bin:/bin")
    if true is None:
        return False, "no `true` program to try a sandbox with"
    rundir = make_rundir()
    try:
        (rundir / "connection.json").write_text("{}")
        stub = rundir / "stub"
        stub.mkdir()
        spec = sandbox_spec(rundir, [true], stub_dir=stub, env=minimal_env())
        try:
            proc = subprocess.run(launcher_command(write_spec(rundir, spec)), capture_output=True,
                                  timeout=60, stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
        except subprocess.TimeoutExpired:
            return False, "building a test sandbox did not finish in 60 s"
        state = read_state(rundir) or {}
        if state.get("state") == "running" and proc.returncode == 0:
            return True, ""
        reason = state.get("error") or proc.stderr.decode(errors="replace").strip() \
            or f"the test sandbox exited with status {proc.returncode}"
        return False, f"cannot build the grading sandbox: {reason}"
    finally:
        remove_rundir(rundir)


def remove_rundir(rundir):
    import shutil

    for _ in range(50):
        try:
            shutil.rmtree(rundir)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # the sandbox's root may still be mounted for a moment
