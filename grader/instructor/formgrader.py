"""nbgrader's formgrader, fast at class size: the same pages, the same JSON, answered
from a few indexed queries.

nbgrader 0.9.6's formgrader API (`nbgrader.apps.api.NbGraderAPI`) answers most calls by
globbing every student's folder, reading every submission's `timestamp.txt`, loading
gradebook rows one by one through the ORM, and computing each aggregate (scores over every
submission of every assignment) before filtering: at 1,350 students x 8 assignments a
student's page took 54 s, "Next" 8 s, a submission list 16 s. `CourseAPI` answers the same
calls with the same JSON:

- the lists (submissions of an assignment, submitted notebooks, students) from one
  grouped query each, filtered by the assignment before anything is summed;
- the averages of every assignment or notebook from one grouped query;
- a student's page and one submission from that student's rows and folders only;
- the course folders scanned once per call (one pass over submitted/, nbgrader's
  `timestamp.txt` parsed once per file version);
- "Next" and "Previous" by one query for the neighbour, not the list of the class.

The gradebook gets four indexes (on the columns the lists join by, grader.grading.layout
.index_gradebook) that nbgrader's schema lacks. Nothing is changed in nbgrader: this
module is a Jupyter server extension that serves nbgrader's own pages and front end
through subclasses of its handlers, registered ahead of nbgrader's, and its templates
through a loader that adds one note to every page: the scores and averages there are
before the late penalty (nbgrader has no penalty column; the score after it is in
grades.csv, the Canvas CSV, the report and the feedback). Long tables are paged (50 rows
a page, DataTables' own paging, which nbgrader turns off).

Enabled for the course's environment by `make install` (`python -m
grader.instructor.formgrader enable`, which writes the extension's file in the
environment's jupyter_server_config.d, as an installed package's would be; `--user` for
the user's ~/.jupyter instead, `disable` to take it out); it does nothing where nbgrader's
formgrader is not enabled.
"""
import datetime
import functools
import os
from pathlib import Path

from nbgrader.api import (Assignment, BaseCell, Grade, GradeCell, MissingEntry, Notebook, Student,
                          SubmittedAssignment, SubmittedNotebook, TaskCell)
from nbgrader.apps.api import NbGraderAPI
from nbgrader.utils import as_timezone, parse_utc

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "formgrader_templates"
STATIC = HERE / "formgrader_static"
DEFAULT_STRUCTURE = "{nbgrader_step}/{student_id}/{assignment_id}"
LATE_NOTE = ("Scores, totals and averages on these pages are before the late penalty (nbgrader has no penalty "
             "column): the score after it is in grades.csv, grades_canvas.csv, the grade report and the "
             "feedback (make export, make feedback).")

_TIMESTAMPS = {}  # path -> ((mtime_ns, size), parsed timestamp): timestamp.txt parsed once per version


def _timestamp_file(path):
    """nbgrader's get_submitted_timestamp for one timestamp.txt path: the parsed time, or
    None when there is no file (parsed once per version of the file)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    key = (info.st_mtime_ns, info.st_size)
    cached = _TIMESTAMPS.get(path)
    if cached and cached[0] == key:
        return cached[1]
    with open(path) as fh:
        value = parse_utc(fh.read().strip())
    _TIMESTAMPS[path] = (key, value)
    return value


class CourseAPI(NbGraderAPI):
    """nbgrader's NbGraderAPI answering from indexed queries; every method returns what
    nbgrader's own returns (tests/instructor/test_class_size.py compares them on one gradebook)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._scanned = None
        self._source = None
        from grader.grading.layout import index_gradebook

        index_gradebook(self.coursedir.db_url)

    # --- the course folders, read once per call -----------------------------------

    @property
    def _default_layout(self):
        return self.coursedir.directory_structure == DEFAULT_STRUCTURE

    def _path(self, step, student, assignment):
        if self._default_layout:  # nbgrader's format_path, without its formatting per call
            return os.path.join(self.coursedir.root, step, student, assignment)
        return self.coursedir.format_path(step, student, assignment)

    def _submitted_index(self):
        """{assignment: {students with that folder in submitted/}}: one pass over the folder
        (nbgrader's glob of submitted/*/*, without its per-call repetition)."""
        if self._scanned is None:
            found = {}
            base = os.path.join(self.coursedir.root, self.coursedir.submitted_directory)
            try:
                students = list(os.scandir(base))
            except OSError:
                students = []
            for student in students:
                if student.name.startswith(".") or not student.is_dir():
                    continue
                try:
                    with os.scandir(student.path) as folders:
                        for folder in folders:
                            if not folder.name.startswith(".") and folder.is_dir():
                                found.setdefault(folder.name, set()).add(student.name)
                except OSError:
                    continue
            self._scanned = found
        return self._scanned

    def get_source_assignments(self):
        if self._source is None:
            self._source = super().get_source_assignments()
        return self._source

    def get_submitted_students(self, assignment_id):
        if not self._default_layout:
            return super().get_submitted_students(assignment_id)
        if assignment_id == "*":
            index = self._submitted_index()
            return set().union(*index.values()) if index else set()
        if self._scanned is not None:
            return set(self._scanned.get(assignment_id, ()))
        base = os.path.join(self.coursedir.root, self.coursedir.submitted_directory)
        try:
            with os.scandir(base) as students:
                return {s.name for s in students if not s.name.startswith(".")
                        and os.path.isdir(os.path.join(s.path, assignment_id))}
        except OSError:
            return set()

    def get_submitted_timestamp(self, assignment_id, student_id):
        folder = os.path.abspath(self._path(self.coursedir.submitted_directory, student_id, assignment_id))
        return _timestamp_file(os.path.join(folder, "timestamp.txt"))

    def _is_autograded(self, assignment_id, student_id, db_timestamp):
        """nbgrader's test for one student: an autograded folder, and the submitted folder's
        timestamp equal to the gradebook's."""
        if not os.path.isdir(self._path(self.coursedir.autograded_directory, student_id, assignment_id)):
            return False
        return self.get_submitted_timestamp(assignment_id, student_id) == db_timestamp

    def get_autograded_students(self, assignment_id):
        with self.gradebook as gb:
            stamps = dict(gb.db.query(SubmittedAssignment.student_id, SubmittedAssignment.timestamp)
                          .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
                          .filter(Assignment.name == assignment_id).all())
        return {s for s, stamp in stamps.items() if self._is_autograded(assignment_id, s, stamp)}

    # --- assignments and notebooks --------------------------------------------------

    @staticmethod
    def _cell_sums(gb, assignment_id=None):
        """{(assignment, notebook, "grade"|"task", cell type): sum of Grade.score}: nbgrader's
        averages' numerators, in one grouped query."""
        gc, tc = GradeCell.__table__, TaskCell.__table__
        kind = gc.c.id.isnot(None)
        query = gb.db.query(Assignment.name, Notebook.name, kind, BaseCell_type(gc, tc),
                            _sum0(Grade.score))\
            .select_from(Grade).join(BaseCell, BaseCell.id == Grade.cell_id)\
            .join(Notebook, Notebook.id == BaseCell.notebook_id)\
            .join(Assignment, Assignment.id == Notebook.assignment_id)\
            .outerjoin(gc, gc.c.id == Grade.cell_id).outerjoin(tc, tc.c.id == Grade.cell_id)\
            .filter((gc.c.id.isnot(None)) | (tc.c.id.isnot(None)))
        if assignment_id is not None:
            query = query.filter(Assignment.name == assignment_id)
        rows = query.group_by(Assignment.name, Notebook.name, kind, BaseCell_type(gc, tc)).all()
        return {(a, nb, "grade" if is_grade else "task", cell_type): total
                for a, nb, is_grade, cell_type, total in rows}

    @staticmethod
    def _averages(sums, count, assignment=None, notebook=None):
        """nbgrader's average_*_score for an assignment (or one of its notebooks)."""
        if count == 0:
            return 0.0, 0.0, 0.0, 0.0

        def total(kind, cell_type=None):
            return sum(v for (a, nb, k, t), v in sums.items() if a == assignment and (notebook is None or nb == notebook)
                       and k == kind and (cell_type is None or t == cell_type))

        if notebook is None:
            score = total("grade") + total("task")
        else:
            score = sum(v for (a, nb, _k, _t), v in sums.items() if a == assignment and nb == notebook)
        return (score / count, total("grade", "code") / count, total("grade", "markdown") / count,
                total("task", "markdown") / count)

    def _assignment_dict(self, gb, assignment_id, sums, released):
        sourcedir = os.path.abspath(self._path(self.coursedir.source_directory, ".", assignment_id))
        if not os.path.isdir(sourcedir):
            return None
        try:
            db_assignment = gb.find_assignment(assignment_id)
        except MissingEntry:
            assignment = {"id": None, "name": assignment_id, "duedate": None, "display_duedate": None,
                          "duedate_notimezone": None, "duedate_timezone": _numeric_tz(self.timezone),
                          "average_score": 0, "average_code_score": 0, "average_written_score": 0,
                          "average_task_score": 0, "max_score": 0, "max_code_score": 0,
                          "max_written_score": 0, "max_task_score": 0}
        else:
            assignment = db_assignment.to_dict()
            if db_assignment.duedate:
                ts = as_timezone(db_assignment.duedate, self.timezone)
                assignment["display_duedate"] = ts.strftime(self.timestamp_format)
                assignment["duedate_notimezone"] = ts.replace(tzinfo=None).isoformat()
            else:
                assignment["display_duedate"] = None
                assignment["duedate_notimezone"] = None
            assignment["duedate_timezone"] = _numeric_tz(self.timezone)
            (assignment["average_score"], assignment["average_code_score"], assignment["average_written_score"],
             assignment["average_task_score"]) = self._averages(sums, assignment["num_submissions"], assignment_id)
        if not self.exchange_is_functional:
            assignment["releaseable"] = False
            assignment["status"] = "draft"
        else:
            assignment["releaseable"] = True
            assignment["status"] = "released" if assignment_id in released else "draft"
        assignment["source_path"] = os.path.relpath(sourcedir, self.coursedir.root)
        releasedir = os.path.abspath(self._path(self.coursedir.release_directory, ".", assignment_id))
        assignment["release_path"] = (os.path.relpath(releasedir, self.coursedir.root)
                                      if os.path.exists(releasedir) else None)
        assignment["num_submissions"] = len(self.get_submitted_students(assignment_id))
        return assignment

    def get_assignment(self, assignment_id, released=None):
        if not released:
            released = self.get_released_assignments()
        with self.gradebook as gb:
            return self._assignment_dict(gb, assignment_id, self._cell_sums(gb, assignment_id), released)

    def get_assignments(self):
        released = self.get_released_assignments()
        with self.gradebook as gb:
            sums = self._cell_sums(gb)
            assignments = [self._assignment_dict(gb, name, sums, released) for name in self.get_source_assignments()]
        assignments.sort(key=lambda x: (x["duedate"] if x["duedate"] is not None else "None", x["name"]))
        return assignments

    def get_notebooks(self, assignment_id):
        with self.gradebook as gb:
            try:
                assignment = gb.find_assignment(assignment_id)
            except MissingEntry:
                assignment = None
            if not (assignment and assignment.notebooks):
                return super().get_notebooks(assignment_id)  # nbgrader's reading of the source folder
            sums = self._cell_sums(gb, assignment_id)
            notebooks = []
            for notebook in assignment.notebooks:
                x = notebook.to_dict()
                (x["average_score"], x["average_code_score"], x["average_written_score"],
                 x["average_task_score"]) = self._averages(sums, x["num_submissions"], assignment.name, notebook.name)
                notebooks.append(x)
        return notebooks

    # --- submissions ------------------------------------------------------------------

    def _display(self, ts):
        shown = self.__dict__.setdefault("_shown", {})
        if ts not in shown:
            shown[ts] = as_timezone(ts, self.timezone).strftime(self.timestamp_format)
        return shown[ts]

    def _placeholder(self, assignment_id, student_id, names, submitted):
        """nbgrader's row for a submission that is not (or not yet) in the gradebook."""
        ts = self.get_submitted_timestamp(assignment_id, student_id) if submitted else None
        first, last = names.get(student_id, (None, None))
        return {"id": None, "name": assignment_id,
                "timestamp": ts.isoformat() if ts else None,
                "display_timestamp": self._display(ts) if ts else None,
                "score": 0.0, "max_score": 0.0, "code_score": 0.0, "max_code_score": 0.0,
                "written_score": 0.0, "max_written_score": 0.0, "task_score": 0.0, "max_task_score": 0.0,
                "needs_manual_grade": False, "autograded": False, "submitted": submitted,
                "student": student_id, "last_name": last, "first_name": first}

    def get_submissions(self, assignment_id):
        with self.gradebook as gb:
            rows = _submission_rows(gb, SubmittedAssignment, assignment_id)
            names = dict(((s, (f, l)) for s, f, l in gb.db.query(Student.id, Student.first_name, Student.last_name)))
        ungraded = self.get_submitted_students(assignment_id) - self.get_autograded_students(assignment_id)
        submissions = []
        for row in rows:
            if row["student"] in ungraded:
                continue  # collected again since it was graded: listed below, as nbgrader does
            ts = row["timestamp"]
            row["timestamp"] = ts.isoformat() if ts else None
            row["display_timestamp"] = self._display(ts) if ts else None
            row["autograded"] = True
            row["submitted"] = True
            submissions.append(row)
        for student_id in ungraded:
            submissions.append(self._placeholder(assignment_id, student_id, names, True))
        submissions.sort(key=lambda x: x["student"])
        return submissions

    def get_submission(self, assignment_id, student_id, ungraded=None, students=None):
        if ungraded is not None or students is not None:
            return super().get_submission(assignment_id, student_id, ungraded, students)
        with self.gradebook as gb:
            return self._submission(gb, assignment_id, student_id)

    def _submission(self, gb, assignment_id, student_id):
        """nbgrader's get_submission for one student, from that student's rows and folders."""
        submitted = os.path.isdir(self._path(self.coursedir.submitted_directory, student_id, assignment_id))
        try:
            db_submission = gb.find_submission(assignment_id, student_id)
        except MissingEntry:
            db_submission = None
        if db_submission is not None and self._is_autograded(assignment_id, student_id, db_submission.timestamp):
            submission = db_submission.to_dict()
            submission["display_timestamp"] = (self._display(db_submission.timestamp)
                                               if db_submission.timestamp else None)
            submission["autograded"] = True
            submission["submitted"] = True
            return submission
        names = dict(((s, (f, l)) for s, f, l in gb.db.query(Student.id, Student.first_name, Student.last_name)
                      .filter(Student.id == student_id)))
        return self._placeholder(assignment_id, student_id, names, submitted)

    def get_student_submissions(self, student_id):
        with self.gradebook as gb:
            submissions = [self._submission(gb, assignment_id, student_id)
                           for assignment_id in self.get_source_assignments()]
        submissions.sort(key=lambda x: x["name"])
        return submissions

    def _strict_exchange(self):
        if self.exchange_is_functional:
            app = self.exchange.Submit(coursedir=self.coursedir, authenticator=self.authenticator, parent=self)
            return app.strict
        return False

    def _notebook_on_disk(self, assignment_id, notebook_id, student_id):
        folder = os.path.abspath(self._path(self.coursedir.autograded_directory, student_id, assignment_id))
        return os.path.exists(os.path.join(folder, f"{notebook_id}.ipynb"))

    def existing_submission_ids(self, assignment_id, notebook_id, after=None, before=None, failed=False):
        """The ids of a notebook's submissions whose autograded notebook exists (nbgrader's
        _filter_existing_notebooks), in nbgrader's order (by id); only those after or
        before an id, nearest first, and only failed ones, when asked: one query."""
        strict = self._strict_exchange()
        with self.gradebook as gb:
            query = gb.db.query(SubmittedNotebook.id, SubmittedAssignment.student_id)\
                .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)\
                .join(Assignment, Assignment.id == Notebook.assignment_id)\
                .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)\
                .filter(Notebook.name == notebook_id, Assignment.name == assignment_id)
            if failed:
                query = query.filter(SubmittedNotebook.failed_tests)
            if after is not None:
                query = query.filter(SubmittedNotebook.id > after).order_by(SubmittedNotebook.id)
            elif before is not None:
                query = query.filter(SubmittedNotebook.id < before).order_by(SubmittedNotebook.id.desc())
            else:
                query = query.order_by(SubmittedNotebook.id)
            for nb_id, student_id in query.yield_per(200):
                if strict or self._notebook_on_disk(assignment_id, notebook_id, student_id):
                    yield nb_id

    def get_notebook_submission_indices(self, assignment_id, notebook_id):
        return {nb_id: i for i, nb_id in enumerate(self.existing_submission_ids(assignment_id, notebook_id))}

    def get_notebook_submissions(self, assignment_id, notebook_id):
        with self.gradebook as gb:
            try:
                gb.find_notebook(notebook_id, assignment_id)
            except MissingEntry:
                return []
            submissions = _submission_rows(gb, SubmittedNotebook, assignment_id, notebook_id)
        indices = self.get_notebook_submission_indices(assignment_id, notebook_id)
        for nb in submissions:
            nb["index"] = indices.get(nb["id"], None)
        submissions = [x for x in submissions if x["index"] is not None]
        submissions.sort(key=lambda x: x["id"])
        return submissions

    # --- students ---------------------------------------------------------------------

    def _has_submitted(self, student_id):
        """Whether submitted/<student>/ holds an assignment's folder (nbgrader's glob, for one student)."""
        if not self._default_layout:
            return student_id in super().get_submitted_students("*")
        folder = os.path.join(self.coursedir.root, self.coursedir.submitted_directory, student_id)
        try:
            with os.scandir(folder) as entries:
                return any(not e.name.startswith(".") and e.is_dir() for e in entries)
        except OSError:
            return False

    def get_student(self, student_id, submitted=None):
        if submitted is not None:
            return super().get_student(student_id, submitted)
        try:
            with self.gradebook as gb:
                return gb.find_student(student_id).to_dict()
        except MissingEntry:
            if self._has_submitted(student_id):
                return {"id": student_id, "last_name": None, "first_name": None, "email": None,
                        "lms_user_id": None, "score": 0.0, "max_score": 0.0}
            return None


def BaseCell_type(gc, tc):
    from sqlalchemy import func

    return func.coalesce(gc.c.cell_type, tc.c.cell_type)


def _sum0(expr):
    from sqlalchemy import func

    return func.coalesce(func.sum(expr), 0.0)


def _numeric_tz(timezone):
    from nbgrader.utils import to_numeric_tz

    return to_numeric_tz(timezone)


def _submission_rows(gb, level, assignment_id, notebook_id=None):
    """nbgrader's submission_dicts (level SubmittedAssignment) or notebook_submission_dicts
    (level SubmittedNotebook, with failed_tests and flagged) for one assignment (or one
    notebook of it), in one grouped query that reads only that assignment's grades: the
    same sums (code cells, written cells, task cells, their total) and flags."""
    from sqlalchemy import and_, case, func, or_

    gc, tc = GradeCell.__table__, TaskCell.__table__
    code = gc.c.cell_type == "code"
    written = gc.c.cell_type == "markdown"
    task = tc.c.cell_type == "markdown"
    counted = or_(code, written, task)

    def total(condition, value):
        return func.coalesce(func.sum(case((condition, value))), 0.0)

    columns = [
        total(counted, Grade.score),
        total(counted, func.coalesce(gc.c.max_score, tc.c.max_score)),
        total(code, Grade.score), total(code, gc.c.max_score),
        total(written, Grade.score), total(written, gc.c.max_score),
        total(task, Grade.score), total(task, tc.c.max_score),
        func.max(case((Grade.needs_manual_grade, 1), else_=0)),
    ]
    if level is SubmittedNotebook:
        failed = and_(code, Grade.auto_score < gc.c.max_score)
        head = [SubmittedNotebook.id, Notebook.name, Student.id, Student.first_name, Student.last_name]
        columns += [func.max(case((failed, 1), else_=0)), SubmittedNotebook.flagged]
        keys = ["id", "name", "student", "first_name", "last_name", "score", "max_score", "code_score",
                "max_code_score", "written_score", "max_written_score", "task_score", "max_task_score",
                "needs_manual_grade", "failed_tests", "flagged"]
        group = [SubmittedNotebook.id, Notebook.name, Student.id, Student.first_name, Student.last_name,
                 SubmittedNotebook.flagged]
    else:
        head = [SubmittedAssignment.id, Assignment.name, SubmittedAssignment.timestamp, Student.first_name,
                Student.last_name, Student.id]
        keys = ["id", "name", "timestamp", "first_name", "last_name", "student", "score", "max_score",
                "code_score", "max_code_score", "written_score", "max_written_score", "task_score",
                "max_task_score", "needs_manual_grade"]
        group = head
    query = gb.db.query(*head, *columns)\
        .select_from(Grade)\
        .join(SubmittedNotebook, SubmittedNotebook.id == Grade.notebook_id)\
        .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)\
        .join(Student, Student.id == SubmittedAssignment.student_id)\
        .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)\
        .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)\
        .outerjoin(gc, gc.c.id == Grade.cell_id).outerjoin(tc, tc.c.id == Grade.cell_id)\
        .filter(Assignment.name == assignment_id, counted)
    if notebook_id is not None:
        query = query.filter(Notebook.name == notebook_id)
    out = []
    for row in query.group_by(*group).all():
        item = dict(zip(keys, row))
        item["needs_manual_grade"] = bool(item["needs_manual_grade"])
        if "failed_tests" in item:
            item["failed_tests"] = bool(item["failed_tests"])
        out.append(item)
    return out


# --- the server extension -------------------------------------------------------------

def _course_env(nbgrader_env):
    """nbgrader's Jinja environment with the course's base template first: every page
    gets the note on the late penalty and the paged tables."""
    from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PrefixLoader

    return Environment(loader=ChoiceLoader([
        FileSystemLoader(str(TEMPLATES)),
        PrefixLoader({"nbgrader": nbgrader_env.loader}),
        nbgrader_env.loader,
    ]))


class CourseHandler:
    """Mixed into each of nbgrader's formgrader handlers: the API is CourseAPI (one per
    request), pages render with the course's base template."""

    @property
    def api(self):
        api = getattr(self, "_course_api", None)
        if api is None:
            level = self.log.level
            self.coursedir.parent.load_config_file()
            api = CourseAPI(self.coursedir, self.authenticator, parent=self.coursedir.parent)
            api.log_level = level
            self._course_api = api
        return api

    def render(self, name, **ns):
        env = self.settings.get("course_formgrader_env")
        if env is None:
            env = self.settings["course_formgrader_env"] = _course_env(self.settings["nbgrader_jinja2_env"])
        return env.get_template(name).render(late_note=LATE_NOTE, **ns)


class CourseNavigation:
    """Next, Previous, and their "incorrect" versions: the neighbour by one query."""

    def _neighbour(self, assignment_id, notebook_id, submission, failed=False, forward=True):
        where = {"after": submission.id} if forward else {"before": submission.id}
        found = next(self.api.existing_submission_ids(assignment_id, notebook_id, failed=failed, **where), None)
        if found is None:
            return self._assignment_notebook_list_url(assignment_id, notebook_id)
        return self._submission_url(found)

    def _next(self, assignment_id, notebook_id, submission):
        return self._neighbour(assignment_id, notebook_id, submission)

    def _prev(self, assignment_id, notebook_id, submission):
        return self._neighbour(assignment_id, notebook_id, submission, forward=False)

    def _next_incorrect(self, assignment_id, notebook_id, submission):
        return self._neighbour(assignment_id, notebook_id, submission, failed=True)

    def _prev_incorrect(self, assignment_id, notebook_id, submission):
        return self._neighbour(assignment_id, notebook_id, submission, failed=True, forward=False)


def course_handlers():
    """nbgrader's formgrader routes, each with a subclass of its handler that answers
    through CourseAPI (static files are nbgrader's, as they are)."""
    from nbgrader.server_extensions.formgrader import apihandlers, handlers
    from nbgrader.server_extensions.formgrader.base import BaseHandler
    from tornado import web

    routes = []
    for route in handlers.default_handlers + apihandlers.default_handlers:
        pattern, cls, *rest = route
        if isinstance(cls, type) and issubclass(cls, BaseHandler):
            mixins = (CourseNavigation, CourseHandler) if cls is handlers.SubmissionNavigationHandler else (CourseHandler,)
            cls = type(f"Course{cls.__name__}", (*mixins, cls), {"__module__": __name__})
        routes.append((pattern, cls, *rest))
    routes.append((r"/formgrader/course-static/(.*)", web.StaticFileHandler, {"path": str(STATIC)}))
    return routes


def _jupyter_server_extension_points():
    return [{"module": "grader.instructor.formgrader"}]


def _load_jupyter_server_extension(serverapp):
    """Put the course's handlers ahead of nbgrader's formgrader (Tornado takes the first
    rule that matches), where that formgrader is enabled."""
    from jupyter_server.utils import url_path_join

    if not serverapp.jpserver_extensions.get("nbgrader.server_extensions.formgrader"):
        serverapp.log.info("course formgrader: nbgrader's formgrader is not enabled; nothing to do")
        return
    webapp = serverapp.web_app
    base = webapp.settings["base_url"]
    routes = [(url_path_join(base, pattern.lstrip("/")), *rest) for pattern, *rest in course_handlers()]
    webapp.add_handlers(".*$", routes)  # appended before the catch-all rule; moved ahead of every other
    rules = webapp.default_router.rules
    rules.insert(0, rules.pop(-2))
    serverapp.log.info("course formgrader: %d routes of nbgrader's formgrader answered by CourseAPI", len(routes))


load_jupyter_server_extension = _load_jupyter_server_extension

CONFIG_FILE = "grader-instructor-formgrader.json"


def config_path(user=False):
    """The extension's file in jupyter_server_config.d: the environment's, or the user's."""
    import sys

    from jupyter_core.paths import jupyter_config_dir

    base = Path(jupyter_config_dir()) if user else Path(sys.prefix) / "etc" / "jupyter"
    return base / "jupyter_server_config.d" / CONFIG_FILE


def main(argv=None):
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m grader.instructor.formgrader",
                                     description="Enable or disable the course's formgrader extension.")
    parser.add_argument("action", choices=["enable", "disable"])
    parser.add_argument("--user", action="store_true", help="in ~/.jupyter instead of this environment")
    args = parser.parse_args(argv)
    path = config_path(args.user)
    if args.action == "enable":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"ServerApp": {"jpserver_extensions": {"grader.instructor.formgrader": True}}}, indent=2) + "\n")
        print(f"course formgrader enabled: {path}")
    else:
        path.unlink(missing_ok=True)
        print(f"course formgrader disabled: {path} removed")


if __name__ == "__main__":
    main()
