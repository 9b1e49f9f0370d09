"""One control group per sandbox: one memory limit and one process limit for all its
processes together, a CPU share of its own, and its CPU time.

    support = detect()                       # CgroupSupport: version, controllers, reason
    group = SandboxCgroup.create(name, memory=..., processes=...)   # None where unsupported
    spec["cgroup_procs"] = group.procs_files # the launcher puts the sandbox's first process there
    group.cpu_seconds(); group.remove()

The group is made under the grading process's own group (so whatever limits the
instructor's machine puts on grading still hold), in cgroup v1 (the memory, pids, cpu and
cpuacct controllers, each mounted under /sys/fs/cgroup/<controller>) or v2 (one unified
hierarchy where the grading process's group may have children with the memory, pids and
cpu controllers, as with systemd's delegation). Where neither can be written, detect()
says why and sandboxes keep only their per-process limits (rlimits).
"""
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
V2_CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "attention-sandbox-"


@dataclass(frozen=True)
class CgroupSupport:
    version: str  # "v1", "v2" or "" where none can be used
    reason: str = ""  # why not, where version is ""
    bases: dict = field(default_factory=dict)  # controller (v1) or "unified" (v2) -> parent folder

    def describe(self):
        if not self.version:
            return f"per-sandbox cgroups: NOT available ({self.reason})"
        return (f"per-sandbox cgroups ({self.version}): one memory limit and one process limit "
                "for all of a sandbox's processes, a CPU share of its own, its CPU time counted")


def own_groups():
    """{controller or "": path of this process's group} from /proc/self/cgroup."""
    groups = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            groups[name] = path
    return groups


def _writable(folder):
    probe = folder / f"{PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as e:
        return f"cannot create a group in {folder}: {e.strerror}"
    probe.rmdir()
    return ""


def detect():
    try:
        groups = own_groups()
    except OSError as e:
        return CgroupSupport("", f"no /proc/self/cgroup: {e.strerror}")
    v1 = {name: ROOT / name / groups[name].lstrip("/") for name in V1_CONTROLLERS
          if name in groups and (ROOT / name / "cgroup.procs").exists()}
    if len(v1) == len(V1_CONTROLLERS):
        problems = [p for p in (_writable(folder) for folder in v1.values()) if p]
        if not problems:
            return CgroupSupport("v1", bases=v1)
        return CgroupSupport("", f"cgroup v1: {problems[0]}")
    if (ROOT / "cgroup.controllers").exists() and "" in groups:
        base = ROOT / groups[""].lstrip("/")
        available = (base / "cgroup.controllers").read_text().split()
        missing = [c for c in V2_CONTROLLERS if c not in available]
        if missing:
            return CgroupSupport("", f"cgroup v2: {base} cannot use {', '.join(missing)} "
                                     "(delegate them, e.g. systemd-run -p Delegate=yes)")
        problem = _writable(base)
        if problem:
            return CgroupSupport("", f"cgroup v2: {problem}")
        try:
            _enable_v2(base)
        except OSError as e:
            return CgroupSupport("", f"cgroup v2: {e.strerror}")
        return CgroupSupport("v2", bases={"unified": base})
    return CgroupSupport("", "neither cgroup v1 controllers (memory, pids, cpu, cpuacct) nor a "
                             "cgroup v2 hierarchy is mounted")


class SandboxCgroup:
    """The group of one sandbox (one folder per v1 controller, or one v2 folder)."""

    def __init__(self, support, folders):
        self.support, self.folders = support, folders

    @classmethod
    def create(cls, support, memory, processes):
        """A new group with these limits, or None where cgroups cannot be used."""
        if not support.version:
            return None
        name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
        for base in support.bases.values():
            _sweep(base)
        if support.version == "v1":
            folders = {c: support.bases[c] / name for c in V1_CONTROLLERS}
        else:
            folders = {"unified": support.bases["unified"] / name}
        group = cls(support, folders)
        try:
            for folder in folders.values():
                folder.mkdir()
            if support.version == "v1":
                _put(folders["memory"] / "memory.limit_in_bytes", memory)
                _put(folders["memory"] / "memory.swappiness", 0, required=False)
                _put(folders["pids"] / "pids.max", processes)
                _put(folders["cpu"] / "cpu.shares", 1024)
            else:
                _put(folders["unified"] / "memory.max", memory)
                _put(folders["unified"] / "memory.swap.max", 0, required=False)
                _put(folders["unified"] / "pids.max", processes)
                _put(folders["unified"] / "cpu.weight", 100)
        except OSError:
            group.remove()
            raise
        return group

    @property
    def procs_files(self):
        return [str(folder / "cgroup.procs") for folder in self.folders.values()]

    def cpu_seconds(self):
        """CPU time of every process the sandbox has had, in seconds."""
        if self.support.version == "v1":
            return int((self.folders["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        for line in (self.folders["unified"] / "cpu.stat").read_text().splitlines():
            key, value = line.split()
            if key == "usage_usec":
                return int(value) / 1e6
        return 0.0

    def memory_failures(self):
        """How often the group's memory limit was hit."""
        if self.support.version == "v1":
            return int((self.folders["memory"] / "memory.failcnt").read_text())
        for line in (self.folders["unified"] / "memory.events").read_text().splitlines():
            key, value = line.split()
            if key == "max":
                return int(value)
        return 0

    def oom_kills(self):
        """How many of the group's processes the kernel killed for its memory limit."""
        if self.support.version == "v1":
            path = self.folders["memory"] / "memory.oom_control"
        else:
            path = self.folders["unified"] / "memory.events"
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self, wait=5.0):
        """Remove the group's folders once the sandbox's processes have left them (killed
        processes take a moment to exit); True if they are gone."""
        return remove_groups(self.folders.values(), wait)


def remove_groups(folders, wait=5.0):
    """Remove these group folders, in order, each once its processes have left it (killed
    processes take a moment to exit), waiting at most `wait` seconds in all; True if gone."""
    deadline = time.monotonic() + wait
    for folder in folders:
        while True:
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
    return True


LEFTOVER_AGE = 600  # seconds: an empty sandbox group this old was left by a sandbox that ended slowly


def _sweep(base):
    """Remove empty sandbox groups that an earlier sandbox's processes left behind (they
    may take longer to exit than remove() waits); a group in use cannot be removed."""
    now = time.time()
    for folder in base.glob(f"{PREFIX}*"):
        try:
            if now - folder.stat().st_mtime > LEFTOVER_AGE:
                folder.rmdir()
        except OSError:
            pass


def _put(path, value, required=True):
    try:
        path.write_text(str(value))
    except OSError:
        if required:
            raise


def _enable_v2(base):
    wanted = " ".join(f"+{c}" for c in V2_CONTROLLERS)
    try:
        (base / "cgroup.subtree_control").write_text(wanted)
    except OSError as e:
        raise OSError(e.errno, f"enabling {wanted} in {base} ({e.strerror}): the grading "
                               "process's group must have no processes of its own in cgroup v2; "
                               "run grading in a delegated group") from None


_SUPPORT = None


def support():
    """detect(), once per process."""
    global _SUPPORT
    if _SUPPORT is None:
        _SUPPORT = detect()
    return _SUPPORT
