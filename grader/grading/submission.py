"""The unit of work: grade one submission, sharing nothing with any other.

    grade_submission(job) -> SubmissionResult

A job carries everything the grading needs as data: the submission's files (bytes),
the assignment's source notebooks, a gradebook template that knows the assignment, the
course's nbgrader configuration file and the grading settings. The function builds a
throwaway course folder of its own, runs nbgrader's autograde there (which executes
the notebook through grader.grading.execute in a fresh kernel), reads the scores nbgrader
recorded (with the late penalty that the course's policy, grader.grading.late, gives them, from the
student's extended due date where the job carries an extension) and the typed outcomes of
every check, and returns them (grader.grading.results.NotebookResult) with the autograded
files. It never writes the course's gradebook or status: the caller merges results.
It can therefore run anywhere the course's environment is installed: in this process,
in a worker process, or on another machine of a cluster.
"""
import atexit
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

try:
    import fcntl  # scratch folders' in-use markers (absent on Windows)
except ImportError:
    fcntl = None

from grader.grading.results import GRADED, NEEDS_ATTENTION, CellGrade, NotebookChecks, NotebookResult

MAX_SUBMISSION_BYTES = 64 * 2**20
MAX_FILES = 200
MAX_DEPTH = 32  # folders inside the submission folder


@dataclass
class Settings:
    device: str = "cpu"
    notebook_budget: int = 180
    call_timeout: int = 20
    kernel_name: str = ""  # "" keeps the notebook's kernel (grader.isolation decides upstream)
    grade_at_ceiling: bool = False  # the machine starved it once already: grade it at the wall-clock ceiling


@dataclass
class Job:
    student: str
    assignment: str
    notebooks: list  # the notebook names the assignment expects
    files: dict  # relative path -> bytes: the submission
    source: dict  # relative path -> bytes: solutions/<assignment>/
    gradebook: bytes  # a gradebook.db that knows the assignment and no student
    config: str  # the text of the course's nbgrader_config.py
    settings: Settings = field(default_factory=Settings)
    extension: Optional[object] = None  # grader.grading.extensions.Extension: the student's, if granted


@dataclass
class SubmissionResult:
    student: str
    assignment: str
    status: str  # GRADED or NEEDS_ATTENTION
    reason: str = ""
    elapsed: float = 0.0
    timestamp: Optional[str] = None
    notebooks: dict = field(default_factory=dict)  # notebook -> NotebookResult
    files: dict = field(default_factory=dict)  # relative path -> bytes: the autograded folder
    retry: bool = False  # not graded because the machine stalled: grade it again next run

    def to_json(self):
        """The result without its files, as JSON."""
        return {"student": self.student, "assignment": self.assignment, "status": self.status,
                "reason": self.reason, "elapsed": self.elapsed, "timestamp": self.timestamp,
                "notebooks": {name: nb.to_json() for name, nb in self.notebooks.items()},
                "retry": self.retry}

    @classmethod
    def from_json(cls, data):
        return cls(**{**data, "notebooks": {name: NotebookResult.from_json(nb)
                                            for name, nb in data["notebooks"].items()}})


class Refused(Exception):
    """A submission that is not graded as it is, with the reason."""


def read_submission(folder):
    """The submission's regular files as {relative path: bytes}. Symbolic links, FIFOs,
    sockets and devices are refused with the reason, before anything follows or reads
    them; so are oversized submissions."""
    folder = Path(folder)
    files, total = {}, 0
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise Refused(f"{folder.name} is not a folder")
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        rel_dir = Path(dirpath).relative_to(folder)
        if len(rel_dir.parts) >= MAX_DEPTH:
            raise Refused(f"its folders are nested more than {MAX_DEPTH} deep "
                          f"({_printable(str(rel_dir))[:120]}...)")
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            mode = os.lstat(path).st_mode
            rel = str(path.relative_to(folder))
            if not _utf8(rel):
                raise Refused(f"the file name '{_printable(rel)}' is not UTF-8; rename it "
                              "(submissions may hold UTF-8 file names only)")
            if stat.S_ISLNK(mode):
                raise Refused(f"{rel} is a symbolic link; submissions may hold regular files only")
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                        else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
                raise Refused(f"{rel} is {kind}; submissions may hold regular files only")
            if name.startswith(".ipynb_checkpoints") or "/.ipynb_checkpoints" in rel:
                continue
            total += os.lstat(path).st_size
            if total > MAX_SUBMISSION_BYTES or len(files) >= MAX_FILES:
                raise Refused(f"the submission is larger than {MAX_SUBMISSION_BYTES // 2**20} MiB "
                              f"or {MAX_FILES} files")
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as f:
                files[rel] = f.read()
    return files


def _utf8(name):
    """Whether a file name (as Python decodes it from the OS) is valid UTF-8."""
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:  # undecodable bytes, kept by the OS's surrogateescape
        return False


def _printable(name):
    """A file name as text that can be printed and stored: undecodable bytes as \\xNN."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def check_notebooks(files, notebooks):
    """Why the submitted notebooks cannot be graded as they are, or None."""
    import nbformat

    from grader.grading import bounds

    present = sorted(p for p in files if p.endswith(".ipynb") and "/" not in p)
    for name in notebooks:
        data = files.get(f"{name}.ipynb")
        if data is None:
            others = [p for p in present if p[:-6] not in notebooks]
            if others:
                return f"{name}.ipynb is missing; found {', '.join(others)} instead (renamed?)"
            return f"{name}.ipynb is missing from the submission"
        if not data:
            return f"{name}.ipynb is empty (0 bytes)"
        text = data.decode("utf-8", errors="replace")
        problem = bounds.too_large(text)
        if problem:
            return f"{name}.ipynb is larger than a notebook may be: {problem}"
        try:
            nb = nbformat.reads(text, as_version=4)
        except Exception as err:
            return f"{name}.ipynb is not a readable notebook: {str(err).splitlines()[0][:200]}"
        if not nb.cells:
            return f"{name}.ipynb has no cells"
    return None


def _write_tree(base, files):
    for rel, data in files.items():
        path = Path(base) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _read_tree(base):
    base = Path(base)
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def _config(course, job):
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.Exchange.root = str(course / "exchange")
    config.Application.log_level = "WARNING"
    config.GradingExecute.notebook_budget = job.settings.notebook_budget
    config.GradingExecute.call_timeout = job.settings.call_timeout
    config.GradingExecute.device = job.settings.device
    config.GradingExecute.write_checks = True  # read by _checks, then taken out
    config.GradingExecute.grade_at_ceiling = job.settings.grade_at_ceiling
    if job.settings.kernel_name:
        config.GradingExecute.kernel_name = job.settings.kernel_name
    return config


def _explain(log):
    """One line an instructor can act on, from nbgrader's log of a failed autograde."""
    text = log or ""
    if "Kernel died" in text or "DeadKernelError" in text or "kernel died" in text:
        return "the kernel died while running the notebook (os._exit, a crash, or running out of memory)"
    if "nconsistent checksum" in text or "checksum has changed" in text.lower() and "Error" in text:
        return ("a test cell was tampered with (its nbgrader metadata or its type was changed), "
                "so nbgrader refused to grade it")
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("File ")]
    # nbgrader ends with its own summary ("Please see the above traceback"): the exception
    # above it says what went wrong
    errors = [l for l in lines if re.match(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b:?", l)
              and "NbGraderException" not in l]
    return "autograde failed: " + ((errors or lines)[-1][:300] if lines else "no log")


def _checks(out, notebook):
    """The NotebookChecks the grading preprocessor handed out of nbgrader's run, taken out
    of the autograded folder (the merge records them in autograded/.status.json)."""
    import json

    from grader.grading.execute import outcomes_path

    path = outcomes_path(out, notebook)
    if not path.exists():
        return NotebookChecks()
    checks = NotebookChecks.from_json(json.loads(path.read_text()))
    path.unlink()
    return checks


def _results(course, job):
    """Scores nbgrader recorded (late penalty included), and the checks of each notebook."""
    from nbgrader.api import Gradebook

    out = course / "autograded" / job.student / job.assignment
    notebooks = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission(job.assignment, job.student)
        timestamp = sub.timestamp.isoformat() if sub.timestamp else None
        for nb in sub.notebooks:
            notebooks[nb.name] = NotebookResult(
                grades={g.name: CellGrade(g.auto_score, g.max_score, g.needs_manual_grade)
                        for g in nb.grades},
                comments={c.name: c.auto_comment for c in nb.comments},
                late_penalty=nb.late_submission_penalty,
                checks=_checks(out, nb.name))
    return timestamp, notebooks


_SCRATCH = set()  # the throwaway course folders being graded in this process


def _scratch_gradebooks():
    """The gradebook of a throwaway course folder is read back once and deleted: nbgrader's
    sessions on it need not wait for the disk (about 30 commits per submission, each an
    fsync of a few milliseconds, more on a slow or network disk). The course's own
    gradebook, written by the merge, keeps SQLite's default durability.

    nbgrader makes a SQLAlchemy engine for each of the ten or so `Gradebook`s a submission
    opens, and an engine's statement cache is its own, so every submission compiled the
    same statements again. Here one engine is kept per scratch gradebook's path (the same
    path for every submission of a process's thread, see _scratch_course), and its
    connections are closed when a submission is done, so the next one opens its own file."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import Engine, make_url
    import nbgrader.api

    if getattr(_scratch_gradebooks, "done", False):
        return
    _scratch_gradebooks.done = True

    @event.listens_for(Engine, "connect")
    def _no_sync(dbapi_connection, _record):
        try:
            files = [row[2] for row in dbapi_connection.execute("PRAGMA database_list")]
        except Exception:  # not SQLite
            return
        if any(f and os.path.dirname(f) in _SCRATCH for f in files):
            dbapi_connection.execute("PRAGMA synchronous = OFF")
            dbapi_connection.execute("PRAGMA journal_mode = MEMORY")

    def kept_engine(url, *args, **kwargs):
        try:
            path = make_url(url).database
        except Exception:
            path = None
        if not path or os.path.dirname(path) not in _SCRATCH:
            return create_engine(url, *args, **kwargs)
        kept = _ENGINES.setdefault(os.path.dirname(path), {})
        key = (str(url), args, tuple(sorted(kwargs.items())))
        if key not in kept:
            kept[key] = create_engine(url, *args, **kwargs)
        return kept[key]

    nbgrader.api.create_engine = kept_engine


_ENGINES = {}  # scratch course folder -> its gradebook engines, kept from one submission to the next
_BASE = []  # this process's folder for scratch courses (made once, unpredictable)
_HELD = []  # the open, locked file that marks that folder as in use, for the process's life
SCRATCH_PREFIX = "grading-"
IN_USE = ".in-use"  # in a scratch base folder: locked (flock) by the process that made it


def _scratch_base():
    """This process's folder for scratch courses in the temp folder, made once and removed
    when the process ends. A process that is killed (a Dask worker stopped by its nanny, a
    machine lost) cannot remove its own, so each new one first removes the folders whose
    marker file no process holds locked any more (an open file's lock ends with its
    process, however it ends; one being made is locked before it gets its name)."""
    base, marker = held_temp_folder(SCRATCH_PREFIX)
    _HELD.append(marker)
    atexit.register(shutil.rmtree, base, True)
    return base


def held_temp_folder(prefix):
    """(a new folder `prefix`* in the temp folder, its marker): the folder is marked in use
    for as long as the marker file stays open. First removes the folders of `prefix` whose
    marker no process holds locked any more (their makers were killed)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        _remove_if_abandoned(folder)
    base = tempfile.mkdtemp(prefix=prefix)
    marker = open(os.path.join(base, IN_USE + ".new"), "w")
    if _lock(marker.fileno()):  # where it cannot be locked (Windows, some network disks), the
        os.rename(marker.name, os.path.join(base, IN_USE))  # marker keeps its temporary name: never swept
    return base, marker


def _remove_if_abandoned(folder):
    """Remove a held_temp_folder whose maker has ended (its marker is not locked); one
    without a marker (being made, not ours, or made where flock is missing) is left alone."""
    try:
        fd = os.open(folder / IN_USE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        abandoned = _lock(fd)  # False while its process is alive and holds the lock
    finally:
        os.close(fd)
    if abandoned:
        shutil.rmtree(folder, ignore_errors=True)


def _lock(fd):
    """Whether an exclusive flock on fd was taken now (False: held elsewhere, or no flock)."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _held_base():
    """This process's scratch base folder (_scratch_base), made on first use."""
    if not _BASE or not os.path.isdir(_BASE[0]):
        _BASE[:] = [_scratch_base()]
    return _BASE[0]


def scratch_folder(prefix):
    """A new, empty folder `prefix`* in this process's scratch base: removed with the base when
    the process ends, and swept by the next process where this one is killed first."""
    return tempfile.mkdtemp(prefix=prefix, dir=_held_base())


def _scratch_course():
    """The throwaway course folder of this process's thread, empty: the same path for each
    of its submissions (one worker thread grades one submission at a time)."""
    course = Path(_held_base()) / f"course-{threading.get_ident()}"
    shutil.rmtree(course, ignore_errors=True)
    course.mkdir(mode=0o700)
    return course


def _close_scratch_engines(course):
    """Close the pooled connections of the engines of a finished scratch course: the next
    submission's gradebook is a new file at the same path."""
    for engine in _ENGINES.get(str(course), {}).values():
        engine.dispose()


def grade_submission(job):
    """Grade one submission in a course folder of its own; never raises for the student's
    sake: whatever goes wrong becomes a "needs_attention" result with its reason."""
    start = time.monotonic()
    result = SubmissionResult(job.student, job.assignment, NEEDS_ATTENTION)
    problem = check_notebooks(job.files, job.notebooks)
    if problem:
        result.reason = problem
        return result
    _scratch_gradebooks()
    course = _scratch_course()
    _SCRATCH.add(str(course))
    try:
        (course / "nbgrader_config.py").write_text(job.config)
        (course / "gradebook.db").write_bytes(job.gradebook)
        _write_tree(course / "solutions" / job.assignment, job.source)
        _write_tree(course / "submitted" / job.student / job.assignment, job.files)
        if job.extension is not None:  # grader.grading.late reads it from the course folder
            from grader.grading import extensions

            extensions.save(course, {(job.student, job.assignment): job.extension})
        from grader.grading import layout

        api = layout.nbgrader_api(_config(course, job))
        with _quiet_logs():
            outcome = api.autograde(job.assignment, job.student, force=True, create=True)
        out = course / "autograded" / job.student / job.assignment
        if not outcome["success"] or not out.is_dir():
            result.reason = _explain(f"{outcome['log']}\n{outcome['error']}")
            return result
        result.timestamp, result.notebooks = _results(course, job)
        stalled = [(name, nb.checks.stall_reason) for name, nb in result.notebooks.items()
                   if nb.checks.stalled]
        if stalled:
            result.notebooks, result.retry = {}, True
            result.reason = "; ".join(f"{name}: {why}" for name, why in stalled)
            return result
        result.files = _read_tree(out)
        result.status = GRADED
        return result
    except Exception as err:  # a broken submission must not take the caller down
        result.reason = _explain(f"{type(err).__name__}: {err}")
        return result
    finally:
        result.elapsed = time.monotonic() - start
        _close_scratch_engines(course)
        _SCRATCH.discard(str(course))
        shutil.rmtree(course, ignore_errors=True)


class _quiet_logs:
    """nbgrader's SQLAlchemy warnings and kernels' transport notices are noise here."""

    def __enter__(self):
        import warnings

        self.catch = warnings.catch_warnings()
        self.catch.__enter__()
        warnings.simplefilter("ignore")
        return self

    def __exit__(self, *exc):
        self.catch.__exit__(*exc)
        return False
