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


# Indexes nbgrader's schema lacks, on the columns the course's queries join by: without them
# each lookup of a notebook's grades, an assignment's notebooks or a student's submissions
# scans its whole table (100,000 grades at 1,350 students x 8 assignments).
INDEXES = {
    "course_grade_notebook": ("grade", "notebook_id"),
    "course_comment_notebook": ("comment", "notebook_id"),
    "course_submitted_notebook_assignment": ("submitted_notebook", "assignment_id"),
    "course_submitted_assignment_student": ("submitted_assignment", "student_id"),
}
_INDEXED = set()  # (path, inode) of the gradebooks indexed by this process


def index_gradebook(url):
    """Create the INDEXES in an SQLite gradebook (once per file and process; nothing for
    another database or a gradebook that does not exist yet)."""
    import sqlite3

    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:
        return
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return
    try:
        key = (parsed.database, os.stat(parsed.database).st_ino)
    except OSError:
        return
    if key in _INDEXED:
        return
    con = sqlite3.connect(parsed.database, timeout=30)
    try:
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for name, (table, column) in INDEXES.items():
            if table in tables:
                con.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")')
        con.commit()
    except sqlite3.Error:
        return  # a read-only course copy: the queries still work, only slower
    finally:
        con.close()
    _INDEXED.add(key)


def ensure_gradebook(root, config):
    """The gradebook must know every assignment (nbgrader generate_assignment records them);
    it gets the course's INDEXES."""
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
    index_gradebook(db_url(root))


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
    """A fresh gradebook that knows one assignment (its notebooks, cells and sources,
    copied row for row from the course gradebook) and no student: the start of each of
    its submissions' private gradebooks. Its cost follows the assignment, not the class.
    Returns its bytes."""
    from nbgrader.api import (Assignment, BaseCell, Gradebook, GradeCell, Notebook, SolutionCell, SourceCell,
                              TaskCell)

    dest = Path(dest)
    dest.unlink(missing_ok=True)
    with Gradebook(f"sqlite:///{dest}", config.CourseDirectory.course_id):
        pass  # nbgrader creates its schema, its version and the course
    copy_course_rows(root, dest, {
        Assignment: "name = :name",
        Notebook: "assignment_id IN (SELECT id FROM main.assignment)",
        BaseCell: "notebook_id IN (SELECT id FROM main.notebook)",
        GradeCell: "id IN (SELECT id FROM main.base_cell)",
        SolutionCell: "id IN (SELECT id FROM main.base_cell)",
        TaskCell: "id IN (SELECT id FROM main.base_cell)",
        SourceCell: "notebook_id IN (SELECT id FROM main.notebook)",
    }, {"name": assignment})
    return dest.read_bytes()


def copy_course_rows(root, dest, where, parameters=None, chosen=()):
    """Copy rows of the course gradebook (root's gradebook.db, opened read-only) into the
    gradebook at dest, table by table in where's order: {nbgrader model: SQL condition on
    the course's rows}, which may name dest's rows copied so far (main.<table>), the
    parameters, and a temporary table `chosen` holding the ids in chosen."""
    import sqlite3
    from urllib.parse import quote

    course = (Path(root) / "gradebook.db").resolve()
    con = sqlite3.connect(f"file:{quote(str(dest))}", uri=True)
    try:
        con.execute("ATTACH DATABASE ? AS course", (f"file:{quote(str(course))}?mode=ro",))
        con.execute("CREATE TEMP TABLE chosen (id TEXT PRIMARY KEY)")
        con.executemany("INSERT INTO chosen VALUES (?)", [(i,) for i in chosen])
        for model, condition in where.items():
            table = model.__table__
            columns = ", ".join(f'"{c.name}"' for c in table.columns)
            con.execute(f'INSERT INTO main."{table.name}" ({columns}) SELECT {columns} FROM course."{table.name}" '
                        f"WHERE {condition}", parameters or {})
        con.commit()
        con.execute("DETACH DATABASE course")
    finally:
        con.close()


def add_students(root, config, students):
    """Add the students the gradebook does not know yet (one query, one insert)."""
    from nbgrader.api import Gradebook, Student
    from sqlalchemy import insert

    with Gradebook(db_url(root), config.CourseDirectory.course_id) as gb:
        known = {row[0] for row in gb.db.query(Student.id)}
        new = [{"id": s} for s in students if s not in known]
        if new:
            gb.db.execute(insert(Student.__table__), new)
            gb.db.commit()


def require_cuda():
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    if subprocess.run([sys.executable, "-c", code]).returncode != 0:
        raise SystemExit("DEVICE=cuda, but torch sees no CUDA device on this machine")


class Progress:
    """The progress of a long command: a bar on a terminal (tqdm), and where its output
    goes to a file or a CI log, a line per finished item ("autograde: [12/160] ada /
    05_scaled_attention graded (2.1 s)") and a line per phase, so nothing waits silently.

        progress = Progress("autograde", 160)
        progress.note("starting 2 local workers")
        progress.done("ada / 05_scaled_attention", "graded (2.1 s)")
        progress.close()
    """

    def __init__(self, command, total, unit="submission", enabled=True, stream=None):
        self.command, self.total, self.unit = command, total, unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.count = 0
        self.bar = None
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        if enabled and self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, file=self.stream, desc=command,
                            bar_format="{desc}: {l_bar}{bar}| {n_fmt}/{total_fmt} " + unit
                            + "s [{elapsed}<{remaining}]{postfix}")

    def note(self, text):
        """A phase of the command (starting workers, reading the gradebook, ...)."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)
        else:
            print(f"{self.command}: {text}", file=self.stream, flush=True)

    def done(self, label, outcome=""):
        """One item finished."""
        self.count += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
        else:
            width = len(str(self.total))
            print(f"{self.command}: [{self.count:>{width}}/{self.total}] {label}" + (f" {outcome}" if outcome else ""),
                  file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def progress(total, enabled=True):
    """autograde's progress over total submissions (Progress)."""
    return Progress("autograde", total, enabled=enabled)
