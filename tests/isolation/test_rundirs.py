"""The folders sandboxes leave when the process that would remove them is killed (a grading
worker killed for its memory, a run stopped with SIGKILL) are swept by the next process
that makes one: only this user's attention-kernel-* folders, untouched for a while, whose
init and whose client no longer run (pids compared with their start times, so a reused pid
does not keep a folder, and neither a running sandbox's folder nor one its client may
restart a kernel in is removed). Real processes give the pids."""
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from grader.isolation import namespaces as ns


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
        yield proc.pid, ns.start_time(proc.pid)
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def gone():
    """A process that ran and ended: (pid, start time)."""
    proc = subprocess.Popen(["sleep", "300"])
    pid, start = proc.pid, ns.start_time(proc.pid)
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
    other = base / "attention-other-x"  # not a sandbox's
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


def _template_folder(base, name, server=None, owner=None, age=2 * ns.STALE_AFTER):
    """A warm template's folder, as grader/isolation/template.py leaves it; server and owner:
    (pid, start time) written to its owner file, or neither (an older version's folder)."""
    folder = base / f"{ns.TEMPLATE_PREFIX}{name}"
    folder.mkdir(parents=True)
    (folder / "template.log").write_text("")
    if server is not None:
        (folder / ns.TEMPLATE_OWNER).write_text(json.dumps(
            {"server_pid": server[0], "server_start": server[1], "owner_pid": owner[0], "owner_start": owner[1]}))
    then = time.time() - age
    os.utime(folder, (then, then))
    return folder


def test_a_templates_folder_is_swept_once_neither_it_nor_its_owner_runs(tmp_path, running, gone):
    base = tmp_path / "tmp"
    base.mkdir()
    dead = _template_folder(base, "dead", server=gone, owner=gone)
    reused = _template_folder(base, "reused", server=(running[0], running[1] + 1), owner=gone)
    serving = _template_folder(base, "serving", server=running, owner=gone)  # still serving, or stuck: not ours to end
    owned = _template_folder(base, "owned", server=gone, owner=running)  # its owner may start it again
    older = _template_folder(base, "older")  # says nothing of who used it
    young = _template_folder(base, "young", server=gone, owner=gone, age=5)
    (base / f"{ns.TEMPLATE_PREFIX}garbled").mkdir()
    (base / f"{ns.TEMPLATE_PREFIX}garbled" / ns.TEMPLATE_OWNER).write_text("[1, 2")
    os.utime(base / f"{ns.TEMPLATE_PREFIX}garbled", (0, 0))

    removed = ns.sweep_stale_rundirs(base)
    assert sorted(removed) == sorted(str(p) for p in (dead, reused))
    assert all(p.exists() for p in (serving, owned, older, young, base / f"{ns.TEMPLATE_PREFIX}garbled"))


KILLED_GROUP = """
import os
from grader.isolation import template
tmpl, reason = template.shared()
print(tmpl.folder if tmpl is not None else "none: " + reason, flush=True)
os.killpg(os.getpgid(0), 9)  # the run's process group stopped with SIGKILL: its template too
"""


@pytest.fixture
def short_base():
    """A folder short enough for the kernel's sockets (namespaces.rundir_base keeps it, where
    pytest's own under an xdist worker is too deep and becomes /tmp)."""
    import shutil

    base = Path(tempfile.mkdtemp(prefix="sweep-", dir="/tmp"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_folder_of_a_real_template_killed_with_its_owner_is_swept(short_base, monkeypatch):
    """A template removes its folder when it leaves (its owner gone or done); a grading run
    stopped with SIGKILL, its template with it, leaves the folder. The next sweep (the folder
    aged past STALE_AFTER) removes it; a live template's folder is left."""
    import sys

    from grader.isolation import template

    base = short_base
    monkeypatch.setenv("TMPDIR", str(base))
    proc = subprocess.run([sys.executable, "-c", KILLED_GROUP], capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != template.ENV}, start_new_session=True)
    folder = proc.stdout.strip()
    assert proc.returncode == -9 and folder.startswith(str(base)), proc.stdout + proc.stderr[-2000:]
    owner = json.loads((Path(folder) / ns.TEMPLATE_OWNER).read_text())
    deadline = time.monotonic() + 60
    while ns.process_started_at(owner["server_pid"], owner["server_start"]) and time.monotonic() < deadline:
        time.sleep(0.1)  # SIGKILL is delivered; the pid may still be a zombie's, which does not run
    assert not ns.process_started_at(owner["server_pid"], owner["server_start"])

    monkeypatch.setattr(tempfile, "tempdir", str(base))  # this process's templates go there too
    live = template.Template()  # a live template: its folder, made old, is kept
    try:
        assert live.folder.parent == base
        os.utime(live.folder, (0, 0))
        os.utime(folder, (0, 0))
        assert ns.sweep_stale_rundirs(base) == [folder]
        assert not os.path.lexists(folder) and live.folder.exists()
    finally:
        live.close()
