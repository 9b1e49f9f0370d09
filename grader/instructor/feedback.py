"""Feedback pages, regenerated where something changed, on the grading cluster.

    python -m grader.instructor feedback [--assignment A] [--student S] [--force]
                                         [--jobs N] [--scheduler tcp://host:8786]
    make feedback [ASSIGNMENT=...] [STUDENT=...] [FORCE=1] [JOBS=N] [SCHEDULER=...]

Each page is nbgrader's (GenerateFeedback with the course's preprocessors:
nbgrader_config.py: hidden tests removed, the late notice, no active content). First the
late policy is applied to the selection's current scores (grader.grading.late), then
each graded submission's inputs are fingerprinted: its autograded files (their names,
sizes and times), its rows in the gradebook (timestamp, every cell's automatic and manual
score and extra credit, comments, late penalty), the student's extension, the course's
configuration, and the code that makes a page (FEEDBACK_CODE: the course's feedback
preprocessors and late policy, nbgrader's and nbconvert's versions); a change elsewhere in
the grader makes no page again. A submission whose fingerprint matches the one its
pages were made from (feedback/.status.json) and whose pages are there is skipped. Pages of a
submission that is no longer graded (it needs attention now, so grading left it no grades,
or its student left the gradebook) are withdrawn from feedback/ and named, here and before
`make release-feedback` releases the folder: a student never gets a page for a grade that
is gone.

The rest go, in batches of one assignment's submissions, to the same kind of Dask cluster
as `make autograde` (embedded, `JOBS` workers, or `SCHEDULER`'s): a batch carries the
autograded files, a gradebook holding the assignment and those students' rows only, the
configuration and the extensions, and nbgrader makes the pages in a throwaway course
folder on the worker, one exporter for the whole batch. A selection that fits in one
batch is made in this process, without starting a cluster. Pages are written under
feedback/<student>/<assignment>/ as the batches finish; a submission whose pages could
not be made is named with nbgrader's reason, and the others are kept.
"""
import dataclasses
import hashlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from grader.grading import extensions, late, layout, scores

BATCH = 50  # submissions of one assignment per task: nbgrader's exporter is built once per batch
# What a feedback page is made by, besides the configuration: the course's modules in
# GenerateFeedback's and HTMLExporter's preprocessors (nbgrader_config.py) and what they
# use, and the packages that render the page.
FEEDBACK_CODE = ("grader/instructor/feedback.py", "grader/instructor/late.py", "grader/instructor/nbgrader_plugins.py",
                 "grader/grading/late.py", "grader/grading/extensions.py", "grader/grading/sanitize.py")
FEEDBACK_PACKAGES = ("nbgrader", "nbconvert", "nbformat", "jinja2", "bleach", "beautifulsoup4", "mistune", "pygments")
STATUS = ".status.json"  # under feedback/: {student: {assignment: fingerprint}}


@dataclass
class FeedbackJob:
    assignment: str
    students: list
    autograded: dict          # student -> {relative path: bytes}: autograded/<student>/<assignment>/
    gradebook: bytes          # a gradebook with the assignment and these students' rows only
    config: str               # the text of the course's nbgrader_config.py
    extensions: dict = field(default_factory=dict)  # (student, assignment) -> Extension


@dataclass
class FeedbackResult:
    assignment: str
    pages: dict = field(default_factory=dict)    # student -> {relative path: bytes}
    failed: dict = field(default_factory=dict)   # student -> why no page was made
    elapsed: float = 0.0


# --- on the worker ------------------------------------------------------------------

def _scratch_config(course):
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.Exchange.root = str(course / "exchange")
    config.Application.log_level = "WARNING"
    return config


def make_pages(job):
    """nbgrader's feedback for a batch, in a course folder of its own; never raises for a
    student's sake."""
    from grader.grading import submission

    start = time.monotonic()
    result = FeedbackResult(job.assignment)
    submission._scratch_gradebooks()  # one SQLAlchemy engine per scratch gradebook, no fsync
    course = Path(tempfile.mkdtemp(prefix="feedback-"))
    submission._SCRATCH.add(str(course))
    try:
        (course / "nbgrader_config.py").write_text(job.config)
        (course / "gradebook.db").write_bytes(job.gradebook)
        for student in job.students:
            submission._write_tree(course / "autograded" / student / job.assignment, job.autograded[student])
        if job.extensions:
            extensions.save(course, job.extensions)
        api = layout.nbgrader_api(_scratch_config(course))
        outcome = api.generate_feedback(job.assignment)
        log = f"{outcome.get('log') or ''}\n{outcome.get('error') or ''}"
        reasons = _failures(log, job.students)
        for student in job.students:
            out = course / "feedback" / student / job.assignment
            pages = submission._read_tree(out) if out.is_dir() else {}
            if any(name.endswith(".html") for name in pages):
                result.pages[student] = pages
            else:
                result.failed[student] = reasons.get(student) or _reason(log)
    except Exception as err:
        for student in job.students:
            result.failed.setdefault(student, f"{type(err).__name__}: {str(err)[:300]}")
    finally:
        result.elapsed = time.monotonic() - start
        submission._close_scratch_engines(course)
        submission._SCRATCH.discard(str(course))
        shutil.rmtree(course, ignore_errors=True)
    return result


def _reason(log):
    """One line from nbgrader's log of a failure (the exception it reports)."""
    from grader.grading.submission import _explain

    return "nbgrader could not make the page: " + _explain(log).removeprefix("autograde failed: ")


def _failures(log, students):
    """{student: why} from nbgrader's log of a batch: each failure is logged as the line
    that names its folder (autograded/<student>/<assignment>), then its traceback as the
    next record, whose last unindented line is the exception; so a batch's reasons are
    each student's own."""
    found = {}
    for block in log.split("There was an error processing assignment: ")[1:]:
        first, _, rest = block.partition("\n")
        parts = Path(first.strip()).parts
        student = parts[-2] if len(parts) >= 2 else None
        lines = rest.splitlines()
        # the record's own lines are indented by four spaces (nbgrader's log formatter)
        record = [l[4:] for l in itertools.takewhile(lambda l: not l.startswith("["), lines[1:])]
        exception = [l.strip() for l in record if l.strip() and not l.startswith((" ", "\t"))]
        if student in students:
            found[student] = "nbgrader could not make the page: " + (
                exception[-1][:300] if exception else _reason(rest).split(": ", 1)[-1])
    return found


def feedback_task(job, expected_environment):
    """The Dask task: make_pages on a worker with this checkout's grader."""
    from grader.grading.autograde import UnfitWorker, environment

    if environment() != expected_environment:
        raise UnfitWorker("a worker has another version of the course's grader, reference data or packages")
    return make_pages(job)


# --- here ---------------------------------------------------------------------------

def _comments(db, assignment, student):
    """{submitted notebook id: [(cell, automatic comment, manual comment)]} of the selection."""
    from nbgrader.api import Assignment, BaseCell, Comment, SubmittedAssignment, SubmittedNotebook

    query = db.query(Comment.notebook_id, BaseCell.name, Comment.auto_comment, Comment.manual_comment)\
        .join(BaseCell, BaseCell.id == Comment.cell_id)\
        .join(SubmittedNotebook, SubmittedNotebook.id == Comment.notebook_id)\
        .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)\
        .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
    if assignment:
        query = query.filter(Assignment.name == assignment)
    if student:
        query = query.filter(SubmittedAssignment.student_id == student)
    found = {}
    for nb_id, *row in query.order_by(BaseCell.name):
        found.setdefault(nb_id, []).append(row)
    return found


def _files_signature(folder):
    """(name, size, modification time) of every file under a folder: what the autograded
    files are, without reading them (only make autograde writes them)."""
    out = []
    for dirpath, _dirs, files in os.walk(folder):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            info = os.stat(path)
            out.append((os.path.relpath(path, folder), info.st_size, info.st_mtime_ns))
    return sorted(out)


def fingerprint(sub, comments, folder, common, ext):
    """What a submission's feedback is made from (see the module's docstring)."""
    data = {
        "timestamp": str(sub.timestamp), "seconds_late": sub.total_seconds_late,
        "notebooks": [[nb.name, nb.penalty, [dataclasses.astuple(c) for c in nb.cells], comments.get(nb.id, [])]
                      for nb in sub.notebooks],
        "files": _files_signature(folder),
        "extension": [str(ext.due), ext.extra_seconds] if ext else None,
    }
    h = hashlib.sha256(common.encode())
    h.update(json.dumps(data, sort_keys=True, default=str).encode())
    return h.hexdigest()


def feedback_code():
    """A hash of FEEDBACK_CODE's files and FEEDBACK_PACKAGES' versions."""
    from importlib import metadata

    h = hashlib.sha256()
    for rel in FEEDBACK_CODE:
        path = layout.ROOT / rel
        h.update(rel.encode() + b"\0" + (path.read_bytes() if path.exists() else b""))
    for name in FEEDBACK_PACKAGES:
        try:
            h.update(f"{name}=={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name} missing".encode())
    return h.hexdigest()


class FeedbackStatus:
    """feedback/.status.json: the fingerprint each submission's pages were made from."""

    def __init__(self, root):
        self.path = Path(root) / "feedback" / STATUS
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, student, assignment):
        return self.data.get(student, {}).get(assignment)

    def set(self, student, assignment, fp):
        self.data.setdefault(student, {})[assignment] = fp

    def drop(self, student, assignment):
        self.data.get(student, {}).pop(assignment, None)

    def save(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def batch_gradebook(root, config, assignment, students, template, dest):
    """The assignment's gradebook template with these students' rows copied in from the
    course gradebook (students, submissions, notebooks, grades, comments)."""
    from nbgrader.api import Comment, Grade, Student, SubmittedAssignment, SubmittedNotebook

    Path(dest).write_bytes(template)
    layout.copy_course_rows(root, dest, {
        Student: "id IN (SELECT id FROM chosen)",
        SubmittedAssignment: "student_id IN (SELECT id FROM chosen) AND assignment_id IN "
                             "(SELECT id FROM main.assignment)",
        SubmittedNotebook: "assignment_id IN (SELECT id FROM main.submitted_assignment)",
        Grade: "notebook_id IN (SELECT id FROM main.submitted_notebook)",
        Comment: "notebook_id IN (SELECT id FROM main.submitted_notebook)",
    }, chosen=students)
    return Path(dest).read_bytes()


def _replace(dst, files):
    from grader.grading.autograde import _replace_dir

    _replace_dir(dst, files)


@dataclass(frozen=True)
class Withdrawn:
    """Pages taken out of feedback/: their submission is no longer graded."""
    student: str
    assignment: str
    reason: str


NOT_GRADED = "not graded now (make autograde left it no grades: its summary and the report say why)"
NOT_A_STUDENT = "the student is no longer in the gradebook"


def withdraw_stale(root, assignment=None, student=None, graded=None):
    """Take out of feedback/ the pages of every submission of the selection that has none
    of its own now: its student is not in the gradebook, or it has no grades there or no
    autograded notebook (make autograde removes both for a submission that needs
    attention). graded: {(student, assignment)} already read, else read here. Returns
    [Withdrawn]; their entries in feedback/.status.json go with them, and their copies in the
    exchange where make release-feedback had released them (fetch_feedback finds none)."""
    from nbgrader.api import Gradebook, Student

    root = Path(root)
    base = root / "feedback"
    folders = [f for s in sorted(base.iterdir()) if s.is_dir() and student in (None, s.name)
               for f in sorted(s.iterdir()) if f.is_dir() and assignment in (None, f.name)] if base.is_dir() else []
    if not folders:
        return []
    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        students = {row[0] for row in gb.db.query(Student.id)}
        if graded is None:
            graded = {(sub.student, sub.assignment) for sub in scores.read(gb.db, assignment, student)
                      if (root / "autograded" / sub.student / sub.assignment).is_dir()}
    status = FeedbackStatus(root)
    released = Path(config.Exchange.root) / config.CourseDirectory.course_id / "feedback"
    withdrawn = []
    for folder in folders:
        s, a = folder.parent.name, folder.name
        if (s, a) in graded:
            continue
        for name in _released_names(folder):  # taken back from the exchange too, where it was released
            (released / name).unlink(missing_ok=True)
        shutil.rmtree(folder)
        if not any(folder.parent.iterdir()):
            folder.parent.rmdir()
        status.drop(s, a)
        withdrawn.append(Withdrawn(s, a, NOT_GRADED if s in students else NOT_A_STUDENT))
    if withdrawn:
        status.save()
    return withdrawn


def _released_names(folder):
    """The names nbgrader's release_feedback gives the folder's pages in the exchange (a
    hash of the submission's secret and the notebook's name, as fetch_feedback looks them up)."""
    from nbgrader.utils import notebook_hash

    secret = folder / "submission_secret.txt"
    if not secret.is_file():
        return []
    key = secret.read_text()
    return [f"{notebook_hash(secret=key, notebook_id=page.stem)}.html" for page in sorted(folder.glob("*.html"))]


def withdrawn_lines(withdrawn):
    """What make feedback and make release-feedback say of the pages they took out."""
    if not withdrawn:
        return []
    return ([f"withdrew the pages of {len(withdrawn)} submission(s) no longer graded, from feedback/ and from the exchange where released:"]
            + [f"  WITHDRAWN {w.student} / {w.assignment}: {w.reason}" for w in withdrawn])


def generate(root, assignment=None, student=None, force=False, jobs=None, scheduler=None, progress=True,
             memory=None):
    """Make the feedback pages that changed (all with force) for the selection, after
    withdrawing those of submissions no longer graded; returns {"written": n, "unchanged": n,
    "failed": {(student, assignment): reason}, "withdrawn": [Withdrawn]}."""
    from nbgrader.api import Gradebook

    from grader.grading.autograde import WORKER_MEMORY, default_jobs

    root = Path(root)
    config = layout.load_config(root)
    layout.ensure_gradebook(root, config)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        late.apply(gb, config, assignment, student)
        subs = scores.read(gb.db, assignment, student, cells=True)
        comments = _comments(gb.db, assignment, student)
    granted = extensions.load(root)
    common = json.dumps([feedback_code(), (root / "nbgrader_config.py").read_text()])
    subs = [sub for sub in subs if (root / "autograded" / sub.student / sub.assignment).is_dir()]
    # (one in the gradebook but not autograded here has no page: nbgrader would skip it too)
    withdrawn = withdraw_stale(root, assignment, student, {(sub.student, sub.assignment) for sub in subs})
    status = FeedbackStatus(root)
    todo, unchanged = [], 0
    for sub in subs:
        folder = root / "autograded" / sub.student / sub.assignment
        fp = fingerprint(sub, comments, folder, common, granted.get((sub.student, sub.assignment)))
        pages = root / "feedback" / sub.student / sub.assignment
        if not force and status.get(sub.student, sub.assignment) == fp and any(pages.glob("*.html")):
            unchanged += 1
            continue
        todo.append((sub.student, sub.assignment, fp))
    summary = {"written": 0, "unchanged": unchanged, "failed": {}, "withdrawn": withdrawn}
    if not todo:
        return summary
    bar = layout.Progress("feedback", len(todo), enabled=progress)
    bar.note(f"{len(todo)} submission(s) to make pages for ({unchanged} unchanged)")
    fps = {(s, a): fp for s, a, fp in todo}
    config_text = (root / "nbgrader_config.py").read_text()

    def batches(workdir):
        templates = {}
        by_assignment = {}
        for s, a, _ in todo:
            by_assignment.setdefault(a, []).append(s)
        for a, students in sorted(by_assignment.items()):
            if a not in templates:
                templates[a] = layout.gradebook_template(root, config, a, Path(workdir) / f"{a}.db")
            for i in range(0, len(students), BATCH):
                chosen = students[i:i + BATCH]
                db = batch_gradebook(root, config, a, chosen, templates[a], Path(workdir) / "batch.db")
                autograded = {s: _read(root / "autograded" / s / a) for s in chosen}
                yield FeedbackJob(a, chosen, autograded, db, config_text,
                                  {(s, a): granted[(s, a)] for s in chosen if (s, a) in granted})

    def record(result):
        for s, files in result.pages.items():
            _replace(root / "feedback" / s / result.assignment, files)
            status.set(s, result.assignment, fps[(s, result.assignment)])
            summary["written"] += 1
            bar.done(f"{s} / {result.assignment}", "written")
        for s, reason in result.failed.items():
            status.drop(s, result.assignment)
            summary["failed"][(s, result.assignment)] = reason
            bar.done(f"{s} / {result.assignment}", f"FAILED: {reason}")

    try:
        with tempfile.TemporaryDirectory(prefix="feedback-") as workdir:
            if len(todo) <= BATCH and not scheduler:
                bar.note("making the pages here (one batch)")
                for job in batches(workdir):
                    record(make_pages(job))
            else:
                _on_cluster(root, batches(workdir), record, bar, jobs or default_jobs(), scheduler,
                            memory or WORKER_MEMORY, len(todo))
    finally:
        status.save()
        bar.close()
    return summary


def _read(folder):
    from grader.grading.submission import _read_tree

    return _read_tree(folder)


def _on_cluster(root, jobs, record, bar, workers, scheduler, memory, count):
    """Run the batches on the embedded cluster or the scheduler's, a few at a time, and
    record each as it finishes."""
    import dask
    from distributed import as_completed

    from grader.grading.autograde import (DASK_CONFIG, Grading, RunStopped, UnfitWorker, _close_quietly,
                                          _own_process_groups, _quiet_dask, environment)

    grading = Grading(root, jobs=workers, scheduler=scheduler, memory=memory)
    expected = environment()
    batches = -(-count // BATCH)
    # the grading's settings: embedded workers forked from its forkserver, as the grading's are
    with dask.config.set(DASK_CONFIG), _quiet_dask():
        where = scheduler or f"{min(workers, batches)} local worker(s)"
        bar.note(f"{batches} batch(es) on {where}" + ("" if scheduler else " (starting them)"))
        cluster, client = grading._connect(min(workers, batches), kernels=False)
        try:
            if not scheduler:
                _own_process_groups(client)
            running = as_completed(with_results=True, raise_errors=False)
            window = max(2, 2 * sum(client.nthreads().values()))
            in_flight = 0
            for job in jobs:
                running.add(client.submit(feedback_task, job, expected, pure=False))
                in_flight += 1
                if in_flight >= window:
                    _collect(next(running), record, RunStopped, UnfitWorker)
                    in_flight -= 1
            for item in running:
                _collect(item, record, RunStopped, UnfitWorker)
        finally:
            _close_quietly(client, cluster)


def _collect(item, record, RunStopped, UnfitWorker):
    future, outcome = item
    if future.status == "finished":
        record(outcome)
    else:
        err = outcome[1] if isinstance(outcome, tuple) and len(outcome) == 3 else outcome
        if isinstance(err, UnfitWorker):
            raise RunStopped(f"{err}: start every worker from the same commit and environment as this checkout")
        raise RunStopped(f"a feedback batch failed on the cluster ({type(err).__name__}: {str(err)[:300]}); "
                         "the pages written so far are kept: run again for the rest")
    future.release()


def main_summary(summary, seconds):
    failed = summary["failed"]
    lines = [f"feedback: {summary['written']} submission(s) written under feedback/, {summary['unchanged']} unchanged "
             f"and skipped (FORCE=1 makes them again), {len(failed)} failed; {seconds:.1f} s"]
    lines += [f"  FAILED {s} / {a}: {reason}" for (s, a), reason in sorted(failed.items())]
    return "\n".join(lines + withdrawn_lines(summary["withdrawn"]))


def run(root, assignment=None, student=None, force=False, jobs=None, scheduler=None, memory=None):
    """make feedback: generate, then say what was done."""
    start = time.monotonic()
    summary = generate(root, assignment, student, force, jobs, scheduler, memory=memory)
    print(main_summary(summary, time.monotonic() - start))
    return summary
