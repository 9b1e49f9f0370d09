"""Shared pieces of the instructor pipeline: the course layout, the status file, checks
on submissions before grading, and reading what a graded notebook says."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
# nbgrader runs helper programs (alembic, jupyter) by name: find the ones installed
# beside this Python even when the virtual environment is not activated.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")


def load_config(root=ROOT):
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    config.CourseDirectory.root = str(root)
    config.Exchange.root = str(Path(root) / "exchange")
    return config


def nbgrader_api(config):
    """nbgrader's own API for the course directory that config describes."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    return NbGraderAPI(CourseDirectory(config=config), config=config)


def course_roots(root):
    """The folders that hold course material: the course being graded and this repository."""
    return sorted({str(Path(root).resolve()), str(ROOT)})


def db_url(root):
    return f"sqlite:///{Path(root) / 'gradebook.db'}"


def assignments(root=ROOT):
    """Assignment names, in course order (01_..., 02_...)."""
    return sorted(p.name for p in (Path(root) / "solutions").iterdir()
                  if p.is_dir() and any(p.glob("*.ipynb")))


def expected_notebooks(root, assignment):
    return sorted(p.stem for p in (Path(root) / "solutions" / assignment).glob("*.ipynb"))


def discover(root, students=None, only=None):
    """(student, assignment) for every submission folder of a known assignment."""
    known = set(assignments(root))
    submitted = Path(root) / "submitted"
    found = []
    if not submitted.is_dir():
        return found
    for student_dir in sorted(p for p in submitted.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if students and student_dir.name not in students:
            continue
        for a_dir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            if a_dir.name in known and (not only or a_dir.name in only):
                found.append((student_dir.name, a_dir.name))
    return found


def preflight(root, student, assignment):
    """Why this submission cannot be graded as it is, or None."""
    folder = Path(root) / "submitted" / student / assignment
    present = sorted(p.name for p in folder.glob("*.ipynb"))
    for name in expected_notebooks(root, assignment):
        path = folder / f"{name}.ipynb"
        if not path.exists():
            others = [p for p in present if p[:-6] not in expected_notebooks(root, assignment)]
            if others:
                return f"{name}.ipynb is missing; found {', '.join(others)} instead (renamed?)"
            return f"{name}.ipynb is missing from the submission"
        if path.stat().st_size == 0:
            return f"{name}.ipynb is empty (0 bytes)"
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as err:
            return f"{name}.ipynb is not a readable notebook: {str(err).splitlines()[0][:200]}"
        if not nb.cells:
            return f"{name}.ipynb has no cells"
    return None


_FAILURES = [
    (r"Kernel died|DeadKernelError|kernel died", "the kernel died while running the notebook "
     "(os._exit, a crash, or running out of memory)"),
    (r"[Ii]nconsistent checksum|checksum", "a test cell was tampered with (its nbgrader metadata "
     "or its type was changed), so nbgrader refused to grade it"),
    (r"cell_type|changed cell type|metadata", "the notebook's nbgrader cell metadata was changed"),
    (r"NotJSONError|JSONDecodeError|not valid", "the notebook is not valid JSON"),
    (r"Timeout|timed out", "the notebook ran out of time"),
]


def explain_failure(log):
    """One line an instructor can act on, from nbgrader's log of a failed autograde."""
    for pattern, reason in _FAILURES:
        if re.search(pattern, log):
            return reason
    lines = [l.strip() for l in log.splitlines() if l.strip() and not l.strip().startswith("File ")]
    return "autograde failed: " + (lines[-1][:300] if lines else "no log")


def scan_outputs(folder):
    """Named mistakes per test cell, and whether the time budget ran out."""
    from grader.nbgrader_plugins import BUDGET_ERROR

    mistakes, exceeded = {}, False
    for path in Path(folder).glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            for out in cell.get("outputs", []):
                if out.output_type != "error":
                    continue
                exceeded |= out.ename == BUDGET_ERROR
                match = re.search(r"Likely mistake: (.+?) \u2014", out.evalue)
                if match and meta.get("grade"):
                    mistakes[f"{path.stem}/{meta['grade_id']}"] = match.group(1)
    return {"mistakes": mistakes, "budget_exceeded": exceeded}


class Status:
    """autograded/.status.json: what was graded from which files, and what needs attention."""

    def __init__(self, root):
        self.path = Path(root) / "autograded" / ".status.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, student, assignment):
        return self.data.get(student, {}).get(assignment)

    def set(self, student, assignment, entry):
        self.data.setdefault(student, {})[assignment] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)  # atomic: a kill never leaves half a file

    def entries(self):
        for student, by_assignment in sorted(self.data.items()):
            for assignment, entry in sorted(by_assignment.items()):
                yield student, assignment, entry

    def attention(self):
        return [(s, a, e) for s, a, e in self.entries() if e["status"] == "needs_attention"]


def replace_dir(src, dst):
    """Move src to dst, replacing what was there, via a sibling temporary name."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)


def kill_tree(pid):
    """Kill a process and everything it started (kernels run in their own sessions)."""
    import psutil

    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def ensure_gradebook(root, config):
    """The gradebook must know every assignment (nbgrader generate_assignment records them)."""
    from nbgrader.api import Gradebook, MissingEntry

    missing = []
    with Gradebook(db_url(root), config.CourseDirectory.course_id) as gb:
        for name in assignments(root):
            try:
                if not gb.find_assignment(name).notebooks:
                    missing.append(name)
            except MissingEntry:
                missing.append(name)
    if missing:
        from grader import notebooks
        notebooks.generate(root, missing)


def add_students(root, config, students):
    from nbgrader.api import Gradebook

    with Gradebook(db_url(root), config.CourseDirectory.course_id) as gb:
        for student in students:
            gb.update_or_create_student(student)


def require_cuda():
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    if subprocess.run([sys.executable, "-c", code]).returncode != 0:
        raise SystemExit("DEVICE=cuda, but torch sees no CUDA device on this machine")


def progress(total, enabled=True):
    from tqdm import tqdm

    return tqdm(total=total, unit="submission", disable=not enabled, file=sys.stderr,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} submissions [{elapsed}<{remaining}]")
