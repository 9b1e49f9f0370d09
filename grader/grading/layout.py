"""The course layout: where the course lives, its configuration, its assignments and the
submissions in it, and nbgrader's API and gradebook for it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def put_installed_programs_on_path():
    """nbgrader runs helper programs (alembic, jupyter) by name: put the ones installed
    beside this Python on PATH, even when the virtual environment is not activated."""
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def load_config(root=ROOT):
    """The course's nbgrader configuration: root's own nbgrader_config.py (which says where
    its exchange is: exchange/ in it, or the course server's), else this repository's with
    root's exchange/."""
    from traitlets.config.loader import PyFileConfigLoader

    put_installed_programs_on_path()
    own = (Path(root) / "nbgrader_config.py").is_file()
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root if own else ROOT)).load_config()
    config.CourseDirectory.root = str(root)
    if not own:
        config.Exchange.root = str(Path(root) / "exchange")
    return config


def nbgrader_api(config):
    """nbgrader's own API for the course directory that config describes."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    put_installed_programs_on_path()
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
        generate(root, missing)


def generate(root=ROOT, names=None, log_level="WARNING"):
    """nbgrader generate_assignment for each assignment, into <root>/notebooks/."""
    config = load_config(root)
    config.GenerateAssignment.force = True
    config.Application.log_level = log_level
    api = nbgrader_api(config)
    failures = {}
    for name in names or assignments(root):
        result = api.generate_assignment(name, force=True, create=True)
        if not result["success"]:
            failures[name] = result["error"] or result["log"]
    if failures:
        raise RuntimeError("generate_assignment failed:\n" + "\n".join(
            f"{k}: {v}" for k, v in failures.items()))
    # nbgrader leaves its gradebook behind; the release itself is what we keep.
    return [Path(root) / "notebooks" / n for n in names or assignments(root)]


def gradebook_template(root, config, assignment, dest):
    """A copy of the course gradebook holding the assignments and no students: the start
    of each submission's private gradebook."""
    from nbgrader.api import Gradebook

    shutil.copy(Path(root) / "gradebook.db", dest)
    with Gradebook(f"sqlite:///{dest}", config.CourseDirectory.course_id) as gb:
        for student in gb.students:
            gb.remove_student(student.id)
    return Path(dest).read_bytes()


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
