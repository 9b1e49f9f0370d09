"""The folders sandboxes leave when the process that would remove them is killed (a grading
worker killed for its memory, a run stopped with SIGKILL) are swept by the next process
that makes one: only this user's attention-kernel-* folders, untouched for a while, whose
init and whose client no longer run (pids compared with their start times, so a reused pid
does not keep a folder, and neither a running sandbox's folder nor one its client may
restart a kernel in is removed). Real processes give the pids."""
import json
import os
import subprocess
import time

import pytest

from grader.isolation import namespaces as ns
from grader.isolation.provisioner import _start_time


def _rundir(base, name, state=None, age=2 * ns.STALE_AFTER, client=None):
    folder = base / f"{ns.RUNDIR_PREFIX}{name}"
    (folder / "root").mkdir(parents=True)
    (folder / "kernel.log").write_text("a kernel's log\n")
    if state is not None:
        (folder / "state.json").write_text(json.dumps(state))
    if client is not None:  # the process that started the sandbox, as the provisioner writes it
        (folder / "spec.json").write_text(json.dumps({"client_pid": client[0], "client_start": client[1]}))
    then = time.time() - age
    os.utime(folder, (then, then))
    return folder


@pytest.fixture
def running():
    """A process that runs for the test: (pid, start time)."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc.pid, _start_time(proc.pid)
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def gone():
    """A process that ran and ended: (pid, start time)."""
    proc = subprocess.Popen(["sleep", "300"])
    pid, start = proc.pid, _start_time(proc.pid)
    proc.kill()
    proc.wait()
    return pid, start


def test_only_the_folders_of_sandboxes_that_no_longer_run_are_swept(tmp_path, running, gone):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the sandbox's")
    base = tmp_path / "tmp"
    base.mkdir()
    state = lambda pid_start: {"state": "running", "init_pid": pid_start[0], "init_start": pid_start[1]}
    dead = _rundir(base, "dead", state(gone))
    (dead / "ipc").symlink_to(outside)  # a gone sandbox's socket folder: the link goes, not its target
    os.utime(dead, (0, 0))
    reused = _rundir(base, "reused", state((running[0], running[1] + 1)))  # the pid now names another process
    never = _rundir(base, "never")  # killed before its sandbox started
    alive = _rundir(base, "alive", state(running))
    young = _rundir(base, "young", state(gone), age=5)  # a sandbox starting now
    restarting = _rundir(base, "restarting", state(gone), client=running)  # its kernel died; its client may restart it
    orphan = _rundir(base, "orphan", state(gone), client=gone)
    other = base / "attention-template-x"
    other.mkdir()
    os.utime(other, (0, 0))

    removed = ns.sweep_stale_rundirs(base)
    assert sorted(removed) == sorted(str(p) for p in (dead, reused, never, orphan))
    assert not dead.exists() and not reused.exists() and not never.exists() and not orphan.exists()
    assert alive.exists() and young.exists() and restarting.exists() and other.exists()
    assert (outside / "keep.txt").read_text() == "not the sandbox's"
    assert ns.sweep_stale_rundirs(base) == []  # nothing left to sweep


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_another_users_folders_are_left_alone(tmp_path, gone):
    base = tmp_path / "tmp"
    base.mkdir()
    theirs = _rundir(base, "theirs", {"state": "running", "init_pid": gone[0], "init_start": gone[1]})
    os.chown(theirs, 65534, 65534)
    os.utime(theirs, (0, 0))
    assert ns.sweep_stale_rundirs(base) == [] and theirs.exists()


def test_the_first_folder_a_process_makes_sweeps_once(tmp_path, monkeypatch, gone):
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setattr(ns, "rundir_base", lambda tmp=None: str(base))
    monkeypatch.setattr(ns, "_SWEPT", set())
    dead = _rundir(base, "dead", {"state": "running", "init_pid": gone[0], "init_start": gone[1]})
    made = ns.make_rundir()
    assert not dead.exists() and made.is_dir() and (made / "root").is_dir()
    later = _rundir(base, "later", {"state": "running", "init_pid": gone[0], "init_start": gone[1]})
    ns.remove_rundir(ns.make_rundir())
    assert later.exists()  # swept once per process: a grading run makes hundreds
