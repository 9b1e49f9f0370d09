"""Verify a submission outside the student's kernel.

    python -m grader.verify --student S --assignment A [--device cuda] [--root R]

In nbgrader, student code and test cells share one kernel, so a solution cell can
rebind the checks and pass everything. Here the student's solution cells (found by
their nbgrader metadata, from the submitted notebook) run in a separate process:
- in new user, mount, pid and network namespaces where the OS allows it: no network,
  its own /proc, an empty /tmp, and the course's references, gradebook, solutions,
  submissions, tests and history hidden;
- under limits on memory, CPU time, file size and open files, and a wall-clock limit
  per call;
- importing nothing from the course: grader.sandbox_runner and grader.student_call are
  copied next to the student's code.
This process, which never runs student code, draws hidden inputs, sends them, receives
plain tensors (exact type torch.Tensor, loaded with weights_only=True) and runs every
check of every test cell on them with fresh shapes and seeds. A test cell passes
verification when all of its checks pass.
"""
import argparse
import io
import json
import os
import random
import re
import shutil
import site
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from grader import pipeline

HERE = Path(__file__).resolve().parent
PREAMBLE = "import math\nimport torch\nimport torch.nn as nn\nfrom torch.nn import functional as F\n"
CHECK_CALL = re.compile(r"check_(\w+)\(\s*(\w+)\s*,\s*\"(\w+)\"")
LIMITS = {"RLIMIT_AS": 3 * 2**30, "RLIMIT_CPU": 120, "RLIMIT_FSIZE": 64 * 2**20,
          "RLIMIT_NOFILE": 512, "RLIMIT_CORE": 0}
CALL_TIMEOUT = int(os.environ.get("VERIFY_CALL_TIMEOUT", "30"))
MAX_FRAME = 256 * 2**20


def _namespaces_work():
    try:
        return subprocess.run(["unshare", "-Urmnp", "--fork", "--mount-proc", "true"],
                              capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_ISOLATION = None


def isolation():
    """'namespaces' where unshare works (it does on Linux with user namespaces), else 'none'."""
    global _ISOLATION
    if _ISOLATION is None:
        _ISOLATION = "namespaces" if _namespaces_work() else "none"
    return _ISOLATION


def hidden_paths(roots, keep=(".venv",)):
    """The entries of the course folders to cover, except those named in keep and any
    folder that holds the running Python environment."""
    prefix = Path(sys.prefix).resolve()
    paths = set()
    for root in roots:
        for entry in Path(root).iterdir():
            if entry.name not in keep and not entry.name.endswith(".egg-info") \
                    and not prefix.is_relative_to(entry.resolve()):
                paths.add(str(entry))
    return sorted(paths)


def namespace_command(argv, expose, hide):
    """argv in new user, mount, pid and network namespaces (loopback only): /tmp is a new
    empty tmpfs, the paths in expose stay visible where they are (wherever they live, /tmp
    included), and the paths in hide are covered. The command itself, without isolation,
    where the OS has no user namespaces."""
    if isolation() != "namespaces":
        return argv
    expose = [str(Path(p)) for p in dict.fromkeys(expose) if Path(p).exists()]
    q = lambda p: "'" + p.replace("'", "'\\''") + "'"
    make = lambda p, at: f"if [ -d {q(p)} ]; then mkdir -p {at}; else mkdir -p $(dirname {at}); touch {at}; fi"
    lines = ["set -e", "ip link set lo up 2>/dev/null || true", "mount -t tmpfs tmpfs /mnt"]
    for i, p in enumerate(expose):  # keep a handle on each path before /tmp is replaced
        lines += [make(p, f"/mnt/e{i}"), f"mount --bind {q(p)} /mnt/e{i}"]
    for p in hide:
        lines.append(f"if [ -d {q(p)} ]; then mount -t tmpfs -o ro tmpfs {q(p)}; "
                     f"elif [ -e {q(p)} ]; then mount --bind /dev/null {q(p)}; fi")
    lines.append("mount -t tmpfs tmpfs /tmp")
    for i, p in enumerate(expose):
        lines += [f"if [ ! -e {q(p)} ]; then {make(f'/mnt/e{i}', q(p))}; fi", f"mount --bind /mnt/e{i} {q(p)}"]
    lines.append('exec "$@"')
    return ["unshare", "-Urmnp", "--fork", "--mount-proc", "sh", "-c", "; ".join(lines), "ns", *argv]


def sandbox_command(job, argv, roots):
    """The sandbox: only the Python environment and its job folder are visible of the
    course; everything else in the course folders and in /tmp is hidden."""
    expose = [sys.prefix, sys.base_prefix, str(job)]
    return namespace_command(argv, expose, hidden_paths(roots)), str(job)


class SandboxDied(Exception):
    pass


class Sandbox:
    """The student's solution cells in a separate, isolated process, answering calls."""

    def __init__(self, cells, roots, device="cpu", skip=()):
        import torch

        self.torch, self.device = torch, device
        self.job = Path(tempfile.mkdtemp(prefix="verify-"))
        (self.job / "cells.json").write_text(json.dumps(cells))
        for name in ("sandbox_runner.py", "student_call.py"):
            shutil.copy(HERE / name, self.job / name)
        packages = os.pathsep.join(p for p in site.getsitepackages() if Path(p).is_dir())
        argv = [sys.executable, "-S", "-B", "sandbox_runner.py", packages, json.dumps(LIMITS),
                json.dumps(sorted(skip))]
        cmd, cwd = sandbox_command(self.job, argv, roots)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": "/tmp",
               "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONUNBUFFERED": "1"}
        self.stderr = open(self.job / "stderr.txt", "wb+")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr,
                                     start_new_session=True)
        self.cell, self.incidents = None, []
        deadline = time.monotonic() + 60
        try:
            while True:
                msg = self._recv(deadline)
                if msg.get("event") == "cell":
                    self.cell = msg["index"]
                elif msg.get("event") == "ready":
                    self.incidents = msg["incidents"]
                    return
        except (SandboxDied, TimeoutError):
            self.close()
            raise SandboxDied(self.cell) from None

    def _read(self, n, deadline):
        import select

        data = b""
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), n - len(data))
                if not chunk:
                    raise SandboxDied
                data += chunk
        return data

    def _recv(self, deadline):
        size = struct.unpack(">I", self._read(4, deadline))[0]
        if size > MAX_FRAME:
            raise SandboxDied
        return self.torch.load(io.BytesIO(self._read(size, deadline)), weights_only=True)

    def request(self, name, call, facts=False):
        torch = self.torch
        cpu = lambda v: v.detach().cpu() if isinstance(v, torch.Tensor) else v
        call = {k: ([cpu(a) for a in v] if k == "args" else
                    {n: cpu(t) for n, t in v.items()} if k == "params" else cpu(v))
                for k, v in call.items()}
        buf = io.BytesIO()
        torch.save({"name": name, "call": call, "device": self.device, "facts": facts}, buf)
        self.proc.stdin.write(struct.pack(">I", len(buf.getvalue())) + buf.getvalue())
        self.proc.stdin.flush()
        return self._recv(time.monotonic() + CALL_TIMEOUT)

    def printed(self):
        """What the student's code printed (its stdout and stderr), first 64 KiB."""
        if not self.stderr.closed:
            self.stderr.flush()
            self.stderr.seek(0)
            self._printed = self.stderr.read(65536).decode(errors="replace")
        return self._printed

    def close(self):
        if self.proc.poll() is None:
            pipeline.kill_tree(self.proc.pid)
        self.proc.wait()
        if not self.stderr.closed:
            self.printed()
            self.stderr.close()
        shutil.rmtree(self.job, ignore_errors=True)


def _opaque(description):
    """A stand-in for what the student returned, whose type reads as the description
    ("module.Name (a note)"), so the checks' messages name it."""
    name, _, note = description.partition(" ")
    module, _, qualname = name.rpartition(".")
    cls = type(qualname, (), {})
    cls.__module__, cls.__qualname__ = module, f"{qualname} {note}".strip()
    return cls()


def solution_cells(source_nb, submitted_nb):
    """The code to run: a fixed preamble, the source's 'given' cells, the student's solution
    cells (matched by grade_id to the source's solution cells), in the source's order."""
    cells = [{"id": "preamble", "source": PREAMBLE}]
    submitted = {}
    for cell in submitted_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            submitted.setdefault(meta.get("grade_id"), cell.source)
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if "given" in cell.metadata.get("tags", []):
            cells.append({"id": "given", "source": cell.source})
        elif meta.get("solution") and meta.get("grade_id") in submitted:
            cells.append({"id": meta["grade_id"], "source": submitted[meta["grade_id"]]})
    return cells


def test_cells(source_nb):
    """(grade_id, points, [(exercise key, student name, focus), ...]) for every test cell."""
    out = []
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and cell.cell_type == "code":
            calls = list(dict.fromkeys(CHECK_CALL.findall(cell.source)))
            out.append((meta["grade_id"], meta.get("points", 0), calls))
    return out


def verify_notebook(root, assignment, notebook, submitted_path, device=None):
    """Verified pass/fail of every test cell of one submitted notebook."""
    from grader.core import CheckError, RemoteError, RemoteStudent, run_check
    from grader.exercises import EXERCISES

    start = time.monotonic()
    device = device or os.environ.get("GRADER_DEVICE") or "cpu"
    source = nbformat.read(Path(root) / "solutions" / assignment / f"{notebook}.ipynb", as_version=4)
    submitted = nbformat.read(submitted_path, as_version=4)
    cells = solution_cells(source, submitted)
    incidents = []
    for cell in cells[1:]:
        if cell["id"] != "given" and re.search(r"^\s*(check_\w+)\s*=|def (check_\w+)", cell["source"], re.M):
            incidents.append(f"{cell['id']}: solution code redefines a check function")
    roots = pipeline.course_roots(root)
    skip, sandbox = set(), None
    while sandbox is None:  # a cell that kills or hangs the process is skipped, the rest still run
        try:
            sandbox = Sandbox(cells, roots, device, skip)
        except SandboxDied as died:
            dead = died.args[0]
            if dead is None or dead in skip:
                incidents.append("the sandbox could not start")
                break
            skip.add(dead)
            incidents.append(f"{cells[dead]['id']}: running the solution cell killed or hung the "
                             "process (os._exit, a crash, an endless loop or the memory limit)")
    if sandbox is not None:
        incidents += sandbox.incidents

    def remote(name):
        def call(spec):
            if sandbox is None or sandbox.proc.poll() is not None:
                raise RemoteError("SandboxError", "the sandbox is not running")
            try:
                reply = sandbox.request(name, spec)
            except TimeoutError:
                incidents.append(f"{name}: a call took longer than {CALL_TIMEOUT} s")
                sandbox.close()
                raise RemoteError("TimeoutError", f"no answer within {CALL_TIMEOUT} s") from None
            except (SandboxDied, BrokenPipeError):
                incidents.append(f"{name}: the process died during a call")
                raise RemoteError("SandboxError", "the process died during the call") from None
            incidents.extend(reply.get("incidents", []))
            student.changed = reply.get("changed", [])
            if "error" in reply:
                e = reply["error"]
                raise RemoteError(e["type"], e["message"], e["line"])
            if "opaque" in reply:
                if "Tensor subclass" in reply["opaque"] or "own __eq__" in reply["opaque"]:
                    incidents.append(f"{name}: returned {reply['opaque'].split(' ', 1)[-1].strip('()')}")
                return _opaque(reply["opaque"])
            out = reply["out"]
            if isinstance(out, sandbox.torch.Tensor) and reply.get("device", "cpu") != "cpu":
                out = out.to(reply["device"])
            return out

        def facts(spec):
            if sandbox is None or sandbox.proc.poll() is not None:
                return None
            try:
                reply = sandbox.request(name, spec, facts=True)
            except (TimeoutError, SandboxDied, BrokenPipeError):
                return None
            incidents.extend(reply.get("incidents", []))
            return reply.get("facts")

        student = RemoteStudent(name, call, facts)
        return student

    results = {}
    rng = random.SystemRandom()
    config = pipeline.load_config(root)
    for grade_id, points, calls in test_cells(source):
        message = None
        for key, name, focus in calls:
            try:
                run_check(EXERCISES[key], remote(name), focus, hidden=True,
                          seed=rng.randrange(2**31), device=device, quiet=True, graded=True,
                          config=config)
            except CheckError as err:
                message = str(err).splitlines()[1].strip() if "\n" in str(err) else str(err)
                break
        results[grade_id] = {"passed": message is None and bool(calls), "points": points,
                             "message": message}
    if sandbox is not None:
        if re.search(r"\u2713|\bpassed\b", sandbox.printed()):
            incidents.append("solution code prints text that imitates a passing check")
        sandbox.close()
    return {"cells": results, "incidents": list(dict.fromkeys(incidents)),
            "isolation": isolation(), "elapsed": time.monotonic() - start}


def verify_submission(root, student, assignment, device=None):
    folder = Path(root) / "submitted" / student / assignment
    return {nb: verify_notebook(root, assignment, nb, folder / f"{nb}.ipynb", device)
            for nb in pipeline.expected_notebooks(root, assignment)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", required=True)
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--device", default=os.environ.get("DEVICE") or None)
    parser.add_argument("--root", default=str(pipeline.ROOT))
    args = parser.parse_args(argv)
    for nb, result in verify_submission(args.root, args.student, args.assignment, args.device).items():
        print(f"{args.student} / {args.assignment} / {nb} (isolation: {result['isolation']}, "
              f"{result['elapsed']:.1f} s)")
        for grade_id, cell in result["cells"].items():
            state = "verified" if cell["passed"] else f"FAILED: {cell['message']}"
            print(f"  {grade_id:40s} {state}")
        for incident in result["incidents"]:
            print(f"  incident: {incident}")


if __name__ == "__main__":
    main()
