"""Run one program in a sandbox made for it, and tear the sandbox down after it.

    python -I -S launch.py SPEC.json

The kernel provisioner (grader.isolation.provisioner) writes SPEC.json and starts this
file with the environment's Python; it runs with the standard library only, outside any
sandbox, and imports nothing from the course. Four processes:

- the launcher (this process, outside): writes the new user namespace's uid and gid
  maps, reports how the set-up went in the state file, keeps the program's output (to a
  log with a size limit, never to its own stdout or stderr), forwards signals, and
  exits with the program's status;
- the unsharer: creates the user namespace, then the mount, pid, network, IPC, UTS and
  cgroup namespaces owned by it, and waits for the sandbox's init;
- init (pid 1 of the new pid namespace): builds the new root from SPEC's mounts, moves
  into it, drops to the unprivileged user (no capabilities, no new privileges, no
  further user namespaces), applies the resource limits, starts the program and
  reaps what it leaves; when the program exits, or the launcher dies, init exits,
  and the kernel kills every process left in the namespace;
- the program (the kernel), in a session of its own.
"""
import ctypes
import errno
import json
import os
import platform
import select
import signal
import socket
import struct
import sys
import time

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
# statvfs flags that a bind mount keeps when it is made read-only: the kernel locks the
# flags of mounts inherited from a more privileged namespace, so they must be repeated.
KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
              (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
              (os.ST_RELATIME, MS_RELATIME))

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class SetupError(Exception):
    pass


def exit_code(status):
    """A child's wait status as the exit code a shell would give (128 + N: killed by signal N)."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def wait_exit_code(pid, options=0):
    """Wait for the child pid (os.waitpid retries after a signal, PEP 475): its exit code,
    or None where options has WNOHANG and it is still running."""
    done, status = os.waitpid(pid, options)
    return exit_code(status) if done else None


def _check(result, what):
    if result != 0:
        code = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(code)}")


def _b(text):
    return None if text is None else os.fsencode(text)


def mount(source, target, fstype, flags, data=None):
    _check(libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)),
           f"mount {fstype or source or ''} on {target}")


def prctl(option, value):
    _check(libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


def _write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# --- init: the new root -----------------------------------------------------------------

def _inside(root, path):
    return os.path.join(root, path.lstrip("/"))


def _make_point(root, path, is_dir):
    """Create the mount point root+path (a folder, or an empty file for a file mount)."""
    target = _inside(root, path)
    if os.path.lexists(target):
        return target
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, mode=0o755, exist_ok=True)
        if is_dir:
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError as e:
        raise SetupError(f"cannot create the mount point {path}: {e.strerror} "
                         "(is it inside a read-only folder of the sandbox?)") from None
    return target


def _bind(root, op):
    source = op["src"]
    if not os.path.exists(source):
        raise SetupError(f"{source} does not exist")
    target = _make_point(root, op["dst"], os.path.isdir(source))
    mount(source, target, None, MS_BIND)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID
    flags |= 0 if op.get("rw") else MS_RDONLY
    flags |= 0 if op.get("dev") else MS_NODEV
    f_flag = os.statvfs(target).f_flag
    for st_flag, ms_flag in KEPT_FLAGS:
        if f_flag & st_flag:
            flags |= ms_flag
    mount(None, target, None, flags)


def _tmpfs(root, op, owner):
    target = _make_point(root, op["dst"], True)
    options = f"size={op['size']},mode={op.get('mode', '755')}"
    if op.get("owned"):
        options += f",uid={owner[0]},gid={owner[1]}"
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)


def _copy_file(source, target, owner, mode=None):
    """Copy one regular file, never following a link and never blocking on a FIFO."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not os.path.stat.S_ISREG(info.st_mode):
            return False
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
            os.fchmod(out, mode if mode is not None else (info.st_mode & 0o755) | 0o600)
            os.fchown(out, *owner)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return True


def _copy_tree(source, target, owner):
    """The folder's regular files and folders (links kept as links; anything else left
    out), owned by the sandbox's user."""
    os.chown(target, *owner)
    for dirpath, dirnames, filenames in os.walk(source):
        rel = os.path.relpath(dirpath, source)
        out_dir = target if rel == "." else os.path.join(target, rel)
        for name in dirnames + filenames:
            src, dst = os.path.join(dirpath, name), os.path.join(out_dir, name)
            info = os.lstat(src)
            if os.path.stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(src), dst)
                os.lchown(dst, *owner)
            elif os.path.stat.S_ISDIR(info.st_mode):
                os.mkdir(dst, 0o755)
                os.chown(dst, *owner)
            elif os.path.stat.S_ISREG(info.st_mode):
                _copy_file(src, dst, owner)


def build_root(spec):
    """Mount the new root's contents under spec['root'] (still seen from the old root)."""
    root, owner = spec["root"], tuple(spec["owner"])  # set by the unsharer (see maps)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=755")
    for op in spec["mounts"]:
        kind, path = op["op"], op.get("dst")
        if kind == "bind":
            _bind(root, op)
        elif kind == "tmpfs":
            _tmpfs(root, op, owner)
        elif kind == "dir":
            target = _make_point(root, path, True)
            if op.get("owned"):
                os.chown(target, *owner)
        elif kind == "symlink":
            os.makedirs(os.path.dirname(_inside(root, path)), mode=0o755, exist_ok=True)
            os.symlink(op["target"], _inside(root, path))
        elif kind == "file":
            _make_point(root, os.path.dirname(path), True)
            target = _inside(root, path)
            with open(target, "w", encoding="utf-8") as f:
                f.write(op["content"])
            os.chmod(target, int(op.get("mode", "644"), 8))
            if op.get("owned"):
                os.chown(target, *owner)
        elif kind == "copy":
            target = _make_point(root, path, True)
            try:
                _copy_tree(op["src"], target, owner)
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    raise SetupError(f"the working folder {op['src']} does not fit in the "
                                     f"sandbox's {op.get('limit', 'size')} limit") from None
                raise SetupError(f"copying the working folder {op['src']}: {e}") from None
        elif kind == "copyfile":
            _make_point(root, os.path.dirname(path), True)
            _copy_file(op["src"], _inside(root, path), owner, mode=0o600)
        elif kind == "proc":
            mount("proc", _make_point(root, path, True), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        elif kind == "sysfs":
            # torch reads the CPU topology there. A fresh sysfs shows this network
            # namespace; where one cannot be mounted, the host's is shown read-only.
            target = _make_point(root, path, True)
            try:
                mount("sysfs", target, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except SetupError:
                _bind(root, {"src": "/sys", "dst": path})
        else:
            raise SetupError(f"unknown mount operation {kind!r}")


def pivot(root):
    """Make root the new / and drop the old one from this mount namespace."""
    number = PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SetupError(f"pivot_root is not known on {platform.machine()}")
    mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(root)
    _check(libc.syscall(number, b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


def loopback_up():
    """Bring up lo: the sandbox's own loopback, which reaches nothing outside."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl

        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, request))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 0x1 | 0x40, b""))


def first_pid(pid):
    """Make the program's pid about pid, as a process of a long-running machine has, rather
    than 2 (init still holds the privilege to set where the namespace's pids go on)."""
    if not pid:
        return
    try:
        _write("/proc/sys/kernel/ns_last_pid", str(int(pid) - 1))
    except OSError:
        pass  # an older kernel: the program is pid 2, as before


def drop_privileges(spec):
    """Become the sandbox's unprivileged user, with no way back: no capabilities, no
    new privileges, no user namespaces of its own."""
    uid, gid = spec["uid"], spec["gid"]
    if spec["mode"] == "single":
        # A single mapping was all an unprivileged instructor could write; the user gets
        # a nested namespace in which only it exists (it is the instructor's own uid).
        _check(libc.unshare(CLONE_NEWUSER), "unshare the user's namespace")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} 0 1\n")
        _write("/proc/self/gid_map", f"{gid} 0 1\n")
        _write("/proc/sys/user/max_user_namespaces", "0")
    else:
        _write("/proc/sys/user/max_user_namespaces", "0")
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_DUMPABLE, 0)


def apply_limits(limits):
    import resource

    for name, (soft, hard) in limits.items():
        number = getattr(resource, name)
        current = resource.getrlimit(number)[1]
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(number, (soft, hard))


# Set by a warm template (grader/isolation/template_server.py) in the process it forks:
# called with the spec instead of exec'ing spec["argv"], with everything else the same.
IN_PROCESS_PROGRAM = None


def _run_in_process(spec):
    """IN_PROCESS_PROGRAM(spec), then leave as an interpreter does (exit handlers run)."""
    code = 0
    try:
        IN_PROCESS_PROGRAM(spec)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - shown on the kernel's output, as a crash would be
        import traceback

        traceback.print_exc()
        code = 1
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def start_program(spec, output_fd):
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)  # init's; a program started in process must not keep it
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD,
                    signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.closerange(3, 65536)
        os.chdir(spec["cwd"])
        if IN_PROCESS_PROGRAM is not None:
            _run_in_process(spec)
        os.execve(spec["argv"][0], spec["argv"], spec["env"])
    except BaseException as e:  # noqa: BLE001 - report anything, then leave
        os.write(2, f"sandbox: could not start {spec['argv'][0]}: {e}\n".encode())
    os._exit(127)


def init(spec, status_fd, output_fd, lifeline_fd):
    """pid 1 of the sandbox: set it up, run the program, and go when it goes."""
    try:
        build_root(spec)
        pivot(spec["root"])
        hostname = os.fsencode(spec.get("hostname") or "localhost")
        _check(libc.sethostname(hostname, len(hostname)), "set the sandbox's host name")
        try:
            loopback_up()
        except OSError:
            pass
        first_pid(spec.get("first_pid"))
        drop_privileges(spec)
        apply_limits(spec["limits"])
    except Exception as e:  # noqa: BLE001 - every failure is reported, none is ignored
        message = " ".join(str(e).split())
        os.write(status_fd, f"error {message}\n".encode())
        os._exit(1)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    program = None

    def forward(signum, frame):
        if program:
            try:
                os.killpg(program, signum)
            except ProcessLookupError:
                pass

    def leave(signum, frame):
        os._exit(128 + signum)  # pid 1 leaving takes every process of the namespace

    signal.signal(signal.SIGCHLD, lambda *a: None)
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGQUIT, forward)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, leave)
    program = start_program(spec, output_fd)
    os.close(output_fd)
    os.write(status_fd, b"ok\n")
    os.close(status_fd)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    while True:
        ready, _, _ = select.select([lifeline_fd, wake_r], [], [])
        if lifeline_fd in ready:
            os._exit(137)  # the launcher is gone: so is the sandbox
        try:
            os.read(wake_r, 4096)
        except BlockingIOError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(1)
            if pid == 0:
                break
            if pid == program:
                os._exit(exit_code(status))


# --- the unsharer and the launcher ------------------------------------------------------

def unsharer(spec, fds):
    """Child of the launcher: the namespaces, then init; once init has built the sandbox
    and the program has created its sockets, seal their folder read-only. Its exit
    status is init's."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != fds["launcher"]:
        os._exit(1)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    report = lambda line: os.write(fds["to_launcher"], (" ".join(line.split()) + "\n").encode())
    try:
        result = libc.unshare(CLONE_NEWUSER)
        if result != 0:
            code = ctypes.get_errno()
            hint = {errno.ENOSPC: " (user.max_user_namespaces is 0 here)",
                    errno.EPERM: " (not permitted here: kernel.unprivileged_userns_clone, "
                                 "a container's seccomp profile or an AppArmor policy?)",
                    errno.EINVAL: " (this kernel has no user namespaces)"}.get(code, "")
            raise SetupError(f"cannot create a user namespace: {os.strerror(code)}{hint}")
        report("u")
        spec["mode"] = _read_line(fds["from_launcher"])
        if spec["mode"] not in ("full", "single"):
            os._exit(1)
        # Files of the sandbox belong to its user: uid 1000 when the launcher could map
        # it; otherwise root of this namespace, which is the instructor's own uid.
        spec["owner"] = [spec["uid"], spec["gid"]] if spec["mode"] == "full" else [0, 0]
        _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
                            | CLONE_NEWUTS | CLONE_NEWCGROUP), "unshare the namespaces")
    except SetupError as e:
        report(f"error {e}")
        os._exit(1)
    status_r, status_w = os.pipe()
    # The host's /proc, held open: init shares this mount namespace, and its pivot_root
    # moves this process's root too, after which "/proc" is the sandbox's own.
    host_proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        for fd in (fds["to_launcher"], fds["from_launcher"], status_r, host_proc):
            os.close(fd)
        init(spec, status_w, fds["output_w"], fds["lifeline_r"])
    for fd in (status_w, fds["from_launcher"], fds["output_w"], fds["lifeline_r"]):
        os.close(fd)
    report(f"pid {pid} {_start_time(pid, host_proc)}")
    os.close(host_proc)
    status = _read_line(status_r)
    os.close(status_r)
    if status == "ok":
        report("built")
        report(seal(spec, pid))
    else:
        report(status if status.startswith("error ") else "error the sandbox's set-up stopped")
    os.close(fds["to_launcher"])
    os._exit(wait_exit_code(pid))


def seal(spec, init_pid):
    """Once the program's sockets exist, make their folder read-only, so that the
    program can never swap a socket for a link that its client would follow. (This
    process is still privileged in the sandbox's namespaces and, since init moved the
    root, sees the sandbox's files; it is in no namespace the program can reach.)"""
    sockets = spec.get("sockets") or []
    import stat

    while not all(os.path.exists(p) and stat.S_ISSOCK(os.lstat(p).st_mode) for p in sockets):
        code = wait_exit_code(init_pid, os.WNOHANG)
        if code is not None:
            os._exit(code)  # the launcher reports the log
        time.sleep(0.01)
    if sockets:
        try:
            mount(None, os.path.dirname(sockets[0]), None,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except SetupError as e:
            return f"error sealing the kernel's socket folder: {e}"
    return "sealed"


def write_maps(child, spec):
    """The new user namespace's uid and gid maps, written from outside. Root maps itself
    (for building the sandbox) and the sandbox's user to the unprivileged host ids:
    mode "full". Anyone else can only map their own ids to root: mode "single", and the
    sandbox's user then lives in a nested namespace (see drop_privileges)."""
    host_uid, host_gid = spec["host_ids"]
    if os.geteuid() == 0:
        try:
            _write(f"/proc/{child}/uid_map", f"0 0 1\n{spec['uid']} {host_uid} 1\n")
            _write(f"/proc/{child}/gid_map", f"0 0 1\n{spec['gid']} {host_gid} 1\n")
            return "full"
        except PermissionError:
            pass  # root of a user namespace itself (a rootless container): map one id
    _write(f"/proc/{child}/setgroups", "deny")
    _write(f"/proc/{child}/uid_map", f"0 {os.geteuid()} 1\n")
    _write(f"/proc/{child}/gid_map", f"0 {os.getegid()} 1\n")
    return "single"


def _read_line(fd):
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


def _start_time(pid, proc_fd):
    """pid's start time (clock ticks after boot), read from the /proc held open as proc_fd;
    init is this process's unreaped child, so its entry exists."""
    fd = os.open(f"{pid}/stat", os.O_RDONLY, dir_fd=proc_fd)
    try:
        return int(os.read(fd, 4096).rsplit(b")", 1)[1].split()[19])
    finally:
        os.close(fd)


def _join_cgroup(pid, procs_files):
    """Put pid in each cgroup.procs file; "" or what went wrong."""
    for path in procs_files:
        try:
            _write(path, str(pid))
        except OSError as e:
            return f"joining the sandbox's control group {os.path.dirname(path)}: {e.strerror}"
    return ""


def _write_state(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def _pidfd(pid):
    """A pidfd of process `pid` (readable once it has exited); None where no pid is named
    or the OS has no pidfd; GONE where that process has exited already."""
    if not pid or not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return GONE
    except OSError:
        return None


GONE = -1


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    to_launcher_r, to_launcher_w = os.pipe()
    from_launcher_r, from_launcher_w = os.pipe()
    output_r, output_w = os.pipe()
    lifeline_r, lifeline_w = os.pipe()
    launcher = os.getpid()
    child = os.fork()
    if child == 0:
        for fd in (to_launcher_r, from_launcher_w, output_r, lifeline_w):
            os.close(fd)
        unsharer_pid = os.getpid()  # init, forked from it, reports through its own pipe
        try:
            unsharer(spec, {"launcher": launcher, "to_launcher": to_launcher_w,
                            "from_launcher": from_launcher_r, "output_w": output_w,
                            "lifeline_r": lifeline_r})
        except BaseException as e:  # named to the launcher, never a silent exit (a refused fork...)
            if os.getpid() != unsharer_pid:
                os._exit(1)
            try:
                os.write(to_launcher_w, f"error the sandbox's set-up failed: {type(e).__name__}: "
                                        f"{' '.join(str(e).split())}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(1)
    for fd in (to_launcher_w, from_launcher_r, output_w, lifeline_r):
        os.close(fd)
    init, client = {}, os.getppid()
    # A launcher forked by a template that other processes share names its client in the
    # spec: the process that asked for it. That client going counts as the parent going.
    client_fd = _pidfd(spec.get("client_pid"))

    def client_gone():
        if os.getppid() != client or client_fd == GONE:
            return True
        return client_fd is not None and bool(select.select([client_fd], [], [], 0)[0])
    # The sandbox's control group (one per controller in cgroup v1): the unsharer joins it
    # before it forks, so every process of the sandbox is counted there together.
    joined = _join_cgroup(child, spec.get("cgroup_procs") or [])

    def forward(signum, frame):
        if init.get("pid"):
            try:
                os.kill(init["pid"], signum)
            except ProcessLookupError:
                pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    kept, limit, buffer, reported = 0, spec.get("log_limit", 1 << 20), b"", False

    def fail(error):
        """Report the failure once, and end the sandbox (init leaves with the lifeline)."""
        nonlocal reported
        if not reported:
            reported = True
            _write_state(spec["state"], {"state": "failed", "error": error})
            os.close(lifeline_w)

    if joined:
        fail(joined)
        os.kill(child, signal.SIGKILL)
    with open(spec["log"], "ab") as log:
        open_fds = [to_launcher_r, output_r]
        while open_fds:
            ready, _, _ = select.select(open_fds, [], [], 1.0)
            if init.get("pid") and client_gone():
                # The client is gone (it would have shut the kernel down): so is the sandbox.
                fail("the kernel's client exited")
                try:
                    os.kill(init["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                init["pid"] = None
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except InterruptedError:
                    continue
                if not chunk:
                    open_fds.remove(fd)
                    os.close(fd)
                    if fd == to_launcher_r:
                        fail("the program stopped before it was ready")
                elif fd == output_r:
                    if kept < limit:
                        log.write(chunk[: limit - kept])
                        kept += len(chunk)
                        if kept >= limit:
                            log.write(b"\n[output truncated]\n")
                        log.flush()
                else:
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        line = line.decode(errors="replace")
                        if line == "u":
                            try:
                                os.write(from_launcher_w, write_maps(child, spec).encode() + b"\n")
                            except OSError as e:
                                fail(f"writing the user namespace's id maps: {e}")
                            os.close(from_launcher_w)
                        elif line.startswith("pid "):
                            init["pid"], init["start"] = map(int, line.split()[1:])
                        elif line == "built":
                            init["built_at"] = time.monotonic()
                        elif line == "sealed" and not reported:
                            reported = True
                            _write_state(spec["state"], {"state": "running", "init_pid": init["pid"],
                                                         "init_start": init["start"],
                                                         "built_at": init["built_at"]})
                        elif line.startswith("error "):
                            fail(line[len("error "):])
    code = wait_exit_code(child)
    if client_gone():  # nobody is left to clean up after the sandbox
        import shutil

        shutil.rmtree(os.path.dirname(os.path.abspath(spec_path)), ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1])
