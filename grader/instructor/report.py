"""Grades out of nbgrader's gradebook: grades.csv, grades_canvas.csv and the grade report.

    python -m grader.instructor export       # or: make export

Every score comes from the gradebook (nbgrader.api.Gradebook): the autograded score (from
the checks, which run outside the student's kernel), a manual grade or extra credit given
in the formgrader, and the late penalty that
the course's policy (grader.instructor.late) gives for that score, written back to the gradebook
first so that the formgrader, feedback and these files agree.

Who is listed: every student in the gradebook (the roster, `make roster`, plus anyone who
handed something in) for every assignment that counts: its due date has passed or
something was collected for it. A student with nothing for such an assignment is
"missing" (no score, not a silent 0) once its due date (or the student's extension) has
passed, and "not due yet" before: not in the totals, nor in the missing or struggling lists;
a submission nbgrader could not grade is "needs attention" with its reason; one collected but
not graded yet is "not graded yet".

Lateness is measured from each student's due date: the assignment's, or the one a
per-student extension (grader.instructor.extensions) gives. A submission whose time the LMS did not
give (grader.instructor.lms) has lateness "unknown": no penalty, and listed in the report with what to
do.

grades_canvas.csv follows Canvas' gradebook import: `Student`, `ID` (the Canvas user id),
`SIS User ID`, `SIS Login ID`, `Section` (from the roster, grader.instructor.roster), one column per
assignment named as Canvas names it ("Name (id)": c.GradeReport.canvas_columns, else the
column of the same name in the Canvas export imported as the roster, else the assignment's
name, for which Canvas creates a new column), and the "Points Possible" row. Canvas matches
a row by ID, SIS User ID or SIS Login ID: a student with none of them (not on the roster,
and no Canvas id in the download) is left out of it and listed, with what to do, in the
export's output and the report.

Text that comes from students (ids and names from LMS file names, error messages, named
mistakes) is escaped in the Markdown and HTML reports and cannot start a spreadsheet
formula in the CSV files.
"""
import csv
import datetime
import html
import os
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from traitlets import Dict, Float
from traitlets.config import Configurable

from grader.grading import extensions, late, layout, scores
from grader.instructor import lms, roster

GRADED, MISSING, ATTENTION, PENDING = "graded", "missing", "needs_attention", "not_graded_yet"
NOT_DUE = "not_due_yet"  # nothing handed in, and the student's due date is still ahead
NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
                    "email", "raw_score", "late_submission_penalty", "score", "max_score"]
EXTRA_COLUMNS = ["status", "needs_attention", "flags", "manual_grade", "extra_credit", "days_late",
                 "late_time_source", "mistakes", "extended_duedate"]
CANVAS_ID_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "    Points Possible"  # Canvas' own label, leading spaces included
NO_ROSTER = ("No roster imported (make roster CSV=..., e.g. Canvas' gradebook export): grades_canvas.csv has "
             "only the students whose Canvas ID is known, without SIS ids or sections.")


class GradeReport(Configurable):
    """Settings of the grade report (nbgrader_config.py: c.GradeReport.<name>)."""

    struggling_percent = Float(
        50.0, help="Students whose total is below this % are listed as struggling").tag(config=True)
    canvas_columns = Dict(
        {}, help="Canvas gradebook column for an assignment, e.g. {'05_scaled_attention': "
                 "'Scaled attention (4567)'}: with Canvas' id in brackets the import updates that "
                 "assignment. Without it: the column of the same name (case, spaces and "
                 "underscores aside) in the Canvas export imported as the roster, else the "
                 "assignment's name (Canvas creates a new column).").tag(config=True)


# --- reading the status file: the one place that knows its format -----------------------

def read_status(root):
    """{(student, assignment): grader.grading.results.Record} from autograded/.status.json
    (grader.grading.status.Status), the one store of outcomes: the status, its reason, and
    the checks of each notebook (their named mistakes, flags and budgets)."""
    from grader.grading.status import Status

    return {(student, assignment): record for student, assignment, record in Status(root).records()}


# --- escaping ---------------------------------------------------------------------------

_MD_ALWAYS = re.compile(r"([\\`*{}\[\]!|~@])")
_MD_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def md(text):
    """Student-provided text as literal Markdown on one line: no emphasis, code, links,
    images, autolinks, table cells or HTML (an underscore inside a word stays as it is)."""
    text = " ".join(str(text).split())
    text = html.escape(text, quote=False)                  # <, >, & (HTML and entities)
    text = _MD_ALWAYS.sub(r"\\\1", text)                  # markup, images, links, a@b autolinks
    text = _MD_EDGE_UNDERSCORE.sub(r"\\_", text)          # _emphasis_, but not snake_case
    text = text.replace("://", "\\://")                   # http:// autolinks
    return re.sub(r"(?i)\bwww\.", r"www\\.", text)          # www. autolinks


def esc(text):
    return html.escape(str(text), quote=True)


def cell(value):
    """A CSV value that no spreadsheet runs as a formula (OWASP: prefix with a quote)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) else f"{round(value, 4)}"
    value = str(value)
    if value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def score_text(value):
    return "" if value is None else f"{value:.2f}".rstrip("0").rstrip(".")


# --- the table --------------------------------------------------------------------------

@dataclass
class Row:
    student: str
    assignment: str
    status: str
    max_score: float
    duedate: datetime.datetime = None
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    timestamp: datetime.datetime = None
    seconds_late: float = 0.0
    raw_score: float = None      # nbgrader's submission score: manual over auto, plus extra credit
    penalty: float = None
    score: float = None          # what counts: max(0, raw - penalty)
    manual: bool = False
    extra_credit: float = 0.0
    needs_manual_grade: bool = False
    reason: str = ""
    flags: list = field(default_factory=list)
    mistakes: dict = field(default_factory=dict)
    cells: dict = field(default_factory=dict)   # "notebook/grade_id" -> (score, max)
    time_source: str = ""
    extended_due: datetime.datetime = None     # a per-student extension's due date
    lateness_unknown: bool = False             # the LMS gave no submission time

    @property
    def late(self):
        return self.status == GRADED and self.seconds_late > 0

    @property
    def due(self):
        """This student's due date: the extension's, else the assignment's."""
        return self.extended_due or self.duedate


@dataclass
class Table:
    rows: list
    students: list          # dicts: id, first_name, last_name, email, lms_user_id
    assignments: list       # dicts: name, duedate, max_score (those that count)
    not_counted: list       # assignment names
    policy: str
    threshold: float
    canvas_columns: dict = field(default_factory=dict)   # assignment -> Canvas column
    off_roster: list = field(default_factory=list)       # (student, what the instructor must do)
    roster_imported: bool = True                         # roster.json exists (make roster)

    def by_student(self):
        """student -> their rows, in assignment order (computed once)."""
        if getattr(self, "_by_student", None) is None:
            out = defaultdict(list)
            for r in self.rows:
                out[r.student].append(r)
            for rows in out.values():
                rows.sort(key=lambda r: r.assignment)
            self._by_student = out
        return self._by_student

    def totals(self):
        """student -> {points, possible, percent, missing, open, late} (computed once)."""
        if getattr(self, "_totals", None) is None:
            rows_of = self.by_student()
            out = {}
            for s in self.students:
                rows = rows_of.get(s["id"], [])
                counted = [r for r in rows if r.status in (GRADED, MISSING)]
                points = sum(r.score or 0.0 for r in rows if r.status == GRADED)
                possible = sum(r.max_score or 0.0 for r in counted)
                out[s["id"]] = {"points": points, "possible": possible,
                                "percent": 100.0 * points / possible if possible else None,
                                "missing": sum(r.status == MISSING for r in rows),
                                "open": sum(r.status in (ATTENTION, PENDING) for r in rows),
                                "late": sum(r.late for r in rows)}
            self._totals = out
        return self._totals


def _collected(root):
    """{assignment: students with a folder in submitted/}: one pass over the folder."""
    found = defaultdict(set)
    submitted = Path(root) / "submitted"
    if not submitted.is_dir():
        return found
    with os.scandir(submitted) as students:
        for student in students:
            if student.is_dir() and not student.name.startswith("."):
                with os.scandir(student.path) as folders:
                    for folder in folders:
                        if folder.is_dir():
                            found[folder.name].add(student.name)
    return found


def gather(root, config=None, now=None):
    """Read the gradebook (and the status file) into a Table; writes nothing. The gradebook
    is read in a few set-based statements (grader.grading.scores), whatever the class size."""
    from nbgrader.api import Assignment, Gradebook

    root = Path(root)
    config = config or layout.load_config(root)
    settings = GradeReport(config=config)
    now = now or datetime.datetime.utcnow()
    status = read_status(root)
    granted = extensions.load(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        students = _students(root, gb, status)
        assignments = gb.db.query(Assignment.name, Assignment.duedate, Assignment.max_score)\
            .order_by(Assignment.name).all()
        submissions = {(sub.assignment, sub.student): sub for sub in scores.read(gb.db, cells=True)}
    collected_of = _collected(root)
    touched_of = defaultdict(set)
    for (student, name) in list(status) + [(s, a) for (a, s) in submissions]:
        touched_of[name].add(student)
    rows, counted, not_counted = [], [], []
    for name, duedate, max_score in assignments:
        collected = collected_of.get(name, set())
        if not (touched_of[name] | collected) and not (duedate and duedate < now):
            not_counted.append(name)
            continue
        counted.append({"name": name, "duedate": duedate, "max_score": max_score})
        info = lms.collected_info(root, name)
        for s in students:
            _canvas_id_from_download(s, info.get(s["id"], []))
            row = Row(student=s["id"], assignment=name, status=MISSING, max_score=max_score,
                      duedate=duedate, first_name=s["first_name"], last_name=s["last_name"],
                      email=s["email"], lms_user_id=s["lms_user_id"])
            record = status.get((s["id"], name))
            row.flags, row.mistakes = (record.flag_texts(), record.mistakes()) if record else ([], {})
            sub = submissions.get((name, s["id"]))
            ext = granted.get((s["id"], name))
            row.extended_due = ext.new_due(duedate) if ext else None
            if sub is not None:
                _fill(row, sub)
                if ext:
                    row.seconds_late = ext.seconds_late(row.seconds_late, duedate)
                if record and record.status == ATTENTION:
                    row.flags.insert(0, f"graded in the gradebook although the last autograde said: {record.reason}")
                files = info.get(s["id"], [])
                sources = {f.get("time_source") for f in files} - {None, ""}
                row.time_source = "; ".join(sorted(sources))
                row.lateness_unknown = any(f.get("time_status") == "unknown" for f in files)
            elif record and record.status == ATTENTION:
                row.status, row.reason = ATTENTION, record.reason
            elif s["id"] in collected:
                row.status = PENDING
                row.reason = "collected but not graded yet: run make autograde"
            elif (due := row.extended_due or duedate) is not None and due > now:
                row.status = NOT_DUE  # the assignment counts (something was collected), this student's time is not up
            rows.append(row)
    rule = late.policy(config)
    store = roster.load_store(root) or {}
    columns = {a["name"]: canvas_column(a["name"], settings.canvas_columns, store.get("canvas_columns", []))
               for a in counted}
    return Table(rows=rows, students=students, assignments=counted, not_counted=not_counted,
                 policy=rule.describe(), threshold=settings.struggling_percent,
                 canvas_columns=columns, off_roster=_off_roster(students) if store else [],
                 roster_imported=bool(store))


def _students(root, gb, status):
    """Every student in the gradebook or the status file, with the roster's Canvas fields."""
    listed = (roster.load_store(root) or {}).get("students", {})
    students = [{"id": s.id, "first_name": s.first_name or "", "last_name": s.last_name or "",
                 "email": s.email or "", "lms_user_id": s.lms_user_id or ""} for s in gb.students]
    known = {s["id"] for s in students}
    students += [{"id": s, "first_name": "", "last_name": "", "email": "", "lms_user_id": ""}
                 for s in sorted({s for s, _ in status} - known)]
    for s in students:
        s.update({k: listed.get(s["id"], {}).get(k, "") for k in roster.LMS_COLUMNS})
        s["canvas_id"] = s["lms_user_id"]
        s["on_roster"] = s["id"] in listed
    return sorted(students, key=lambda s: s["id"])


def _canvas_id_from_download(student, files):
    """A student the roster gives no Canvas id gets the one in their Canvas file names."""
    if not student["canvas_id"]:
        ids = {f.get("lms_id") for f in files if f.get("lms") == "canvas"} - {None, ""}
        if len(ids) == 1:
            student["canvas_id"] = ids.pop()


def _off_roster(students):
    """(student, what to do) for every student the roster does not list."""
    out = []
    for s in students:
        if s["on_roster"]:
            continue
        if s["canvas_id"] or s["sis_user_id"] or s["sis_login_id"]:
            todo = (f"not on the roster; grades_canvas.csv has them with Canvas ID {s['canvas_id']} from the "
                    "download. Add them to the roster (make roster CSV=..., e.g. Canvas' gradebook export) "
                    "for their name, SIS ids and section, with that Canvas ID as lms_user_id: where they were "
                    "collected under it, their work moves to their roster id. Then make autograde and make export.")
        else:
            todo = ("not on the roster and no Canvas id known, so they are NOT in grades_canvas.csv (Canvas "
                    "matches rows by ID, SIS User ID or SIS Login ID). Add them to the roster with their "
                    "lms_user_id (make roster CSV=...), then make export.")
        out.append((s["id"], todo))
    return out


def canvas_column(assignment, configured, known):
    """The Canvas gradebook column of an assignment: configured, else the Canvas export's
    column of the same name ("05 Scaled Attention (4567)"), else its own name."""
    if assignment in configured:
        return configured[assignment]
    wanted = lms.name_key(assignment)
    hits = [c for c in known if lms.name_key(roster.CANVAS_ASSIGNMENT.match(c)["name"]) == wanted]
    return hits[0] if len(hits) == 1 else assignment


def _fill(row, sub):
    """A graded row from the submission's scores (grader.grading.scores.SubmissionScores)."""
    row.status = GRADED
    row.timestamp = sub.timestamp
    row.seconds_late = sub.total_seconds_late
    row.raw_score = sub.score
    row.penalty = sub.penalty
    row.score = max(0.0, sub.score - row.penalty)
    row.needs_manual_grade = sub.needs_manual_grade
    for nb in sub.notebooks:
        for grade in nb.cells:
            row.manual |= grade.manual
            row.extra_credit += grade.extra_credit
            row.cells[f"{nb.name}/{grade.name}"] = (grade.score, grade.max_score)
    if row.needs_manual_grade:
        row.flags.append("needs manual grading in the formgrader")


# --- exports ----------------------------------------------------------------------------

def _iso(dt):
    return "" if dt is None else str(dt)


def write_grades_csv(table, path):
    """One row per student and assignment that counts; nbgrader's export columns first."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(NBGRADER_COLUMNS + EXTRA_COLUMNS)
        for r in sorted(table.rows, key=lambda r: (r.assignment, r.student)):
            graded = r.status == GRADED
            writer.writerow([cell(v) for v in [
                r.assignment, _iso(r.duedate), "" if r.lateness_unknown else _iso(r.timestamp), r.student, r.last_name, r.first_name,
                r.email, r.raw_score if graded else None, r.penalty if graded else None,
                r.score if graded else None, r.max_score,
                r.status, r.reason if r.status == ATTENTION else "", "; ".join(r.flags),
                "yes" if r.manual else "", r.extra_credit or None,
                late.days_late(r.seconds_late) if graded and not r.lateness_unknown else None,
                r.time_source if r.late or r.lateness_unknown else "",
                "; ".join(f"{k}: {v}" for k, v in sorted(r.mistakes.items())), _iso(r.extended_due)]])


def canvas_rows(table):
    """Canvas' gradebook import: one row per student Canvas can match (by ID, SIS User ID or
    SIS Login ID), one column per assignment, and the "Points Possible" row; missing and
    ungraded work is left empty (Canvas ignores blanks)."""
    header = CANVAS_ID_COLUMNS + [table.canvas_columns.get(a["name"], a["name"]) for a in table.assignments]
    rows = [header, [POINTS_POSSIBLE, "", "", "", ""] + [score_text(a["max_score"]) for a in table.assignments]]
    scores = {(r.student, r.assignment): r for r in table.rows}
    for s in table.students:
        if not (s["canvas_id"] or s["sis_user_id"] or s["sis_login_id"]):
            continue
        name = ", ".join(p for p in (s["last_name"], s["first_name"]) if p) or s["id"]
        line = [name, s["canvas_id"], s["sis_user_id"], s["sis_login_id"], s["section"]]
        for a in table.assignments:
            r = scores.get((s["id"], a["name"]))
            line.append(score_text(r.score) if r is not None and r.status == GRADED else "")
        rows.append(line)
    return rows


def write_canvas_csv(table, path):
    rows = canvas_rows(table)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL)
        writer.writerow(rows[0])
        writer.writerow(rows[1])  # "    Points Possible" must keep its leading spaces
        for line in rows[2:]:
            writer.writerow([cell(v) for v in line])


# --- the report -------------------------------------------------------------------------

def summaries(table):
    rows_of = defaultdict(list)
    for r in table.rows:
        rows_of[r.assignment].append(r)
    out = []
    for a in table.assignments:
        rows = rows_of[a["name"]]
        graded = [r for r in rows if r.status == GRADED]
        pct = [100.0 * r.score / a["max_score"] for r in graded if a["max_score"]]
        out.append({
            "assignment": a["name"], "due": a["duedate"], "max": a["max_score"],
            "handed_in": sum(r.status not in (MISSING, NOT_DUE) for r in rows), "graded": len(graded),
            "attention": sum(r.status == ATTENTION for r in rows),
            "pending": sum(r.status == PENDING for r in rows),
            "missing": sum(r.status == MISSING for r in rows), "late": sum(r.late for r in rows),
            "mean": statistics.mean(pct) if pct else None,
            "median": statistics.median(pct) if pct else None,
            "min": min(pct) if pct else None, "max_pct": max(pct) if pct else None,
        })
    return out


def lists(table):
    totals = table.totals()
    rows_of = table.by_student()
    attention = [r for r in table.rows if r.status in (ATTENTION, PENDING)]
    missing = defaultdict(list)
    for r in table.rows:
        if r.status == MISSING:
            missing[r.student].append(r.assignment)
    late_rows = [r for r in table.rows if r.late]
    unknown = [r for r in table.rows if r.status == GRADED and r.lateness_unknown]
    struggling = []
    for s in table.students:
        t = totals[s["id"]]
        if t["percent"] is not None and t["percent"] < table.threshold:
            names = Counter(n for r in rows_of.get(s["id"], []) for n in r.mistakes.values())
            struggling.append((s["id"], t, names.most_common(3)))
    return {"attention": attention, "missing": dict(missing), "late": late_rows, "unknown": unknown,
            "struggling": struggling, "extended": [r for r in table.rows if r.extended_due],
            "flagged": [r for r in table.rows if r.status == GRADED and r.flags]}


def cell_stats(table):
    passed, tried = Counter(), Counter()
    for r in table.rows:
        if r.status == GRADED:
            for name, (got, best) in r.cells.items():
                tried[name] += 1
                passed[name] += bool(best) and (got or 0) >= best
    return passed, tried


def plots(table, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    totals = table.totals()
    percents = [t["percent"] for t in totals.values() if t["percent"] is not None]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(percents, bins=10, range=(0, 100), color="tab:blue", edgecolor="white")
    ax.set(xlabel="total score (% of the points of the assignments that count)", ylabel="students",
           title=f"Whole roster: {len(percents)} of {len(totals)} students")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(out / "score_histogram.png", dpi=100)
    plt.close(fig)

    passed, tried = cell_stats(table)
    names = sorted(tried)
    fig, ax = plt.subplots(figsize=(7, 0.3 * max(1, len(names)) + 1.2))
    ax.barh(names or ["(nothing graded)"], [100 * passed[c] / tried[c] for c in names] or [0], color="tab:green")
    ax.set(xlabel="% of graded submissions with full points", xlim=(0, 100), title="Pass rate per test")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "pass_rate.png", dpi=100)
    plt.close(fig)

    mistakes = Counter(n for r in table.rows if r.status == GRADED for n in r.mistakes.values())
    labels = [n for n, _ in mistakes.most_common(15)]
    fig, ax = plt.subplots(figsize=(7, 0.35 * max(1, len(labels)) + 1.2))
    ax.barh([l[:60].replace("$", r"\$") for l in labels] or ["(none seen)"], [mistakes[n] for n in labels] or [0],
            color="tab:red")
    ax.set(xlabel="test cells where the checker named it", title="Misconceptions seen")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "misconceptions.png", dpi=100)
    plt.close(fig)
    return mistakes


def _pct(v):
    return "" if v is None else f"{v:.0f}%"


def _when(dt):
    return "" if dt is None else f"{dt:%Y-%m-%d %H:%M} UTC"


@dataclass
class Section:
    """One section of the report. Every text and cell is plain text, escaped by the writer,
    so the Markdown and the HTML show the same thing."""
    title: str
    intro: list = field(default_factory=list)   # paragraphs
    header: Optional[list] = None               # the table's column names; None: no table
    rows: list = field(default_factory=list)    # the table's rows, each a list of cells
    image: Optional[str] = None                 # a plot's file name beside the report


def sections(table):
    """The report as a list of Sections."""
    totals = table.totals()
    rows_of = table.by_student()
    found = lists(table)
    per = summaries(table)
    passed, tried = cell_stats(table)
    mistakes = Counter(n for r in table.rows if r.status == GRADED for n in r.mistakes.values())
    count = Counter(r.status for r in table.rows)
    out = [Section("Grade report", intro=[
        f"students: {len(table.students)}; assignments that count: {len(table.assignments)}"
        + (f" (not counted yet, nothing collected and not due: {', '.join(table.not_counted)})" if table.not_counted else ""),
        f"submissions graded: {count[GRADED]}; need attention: {count[ATTENTION]}; "
        f"not graded yet: {count[PENDING]}; missing: {count[MISSING]}; not due yet: {count[NOT_DUE]}; "
        f"late: {len(found['late'])}; lateness unknown: {len(found['unknown'])}; "
        f"extensions: {len(found['extended'])}; not on the roster: {len(table.off_roster)}",
        f"late policy: {table.policy}",
        "Scores are read from nbgrader's gradebook: manual grades, extra credit and late penalties included.",
    ])]
    out.append(Section(
        "Students",
        intro=["Total: points of the graded assignments over the points of the graded and missing ones (a "
               "missing assignment counts 0 there); open = needs attention or not graded yet, left out of "
               "the total until it is graded."],
        header=["student", "name", *[a["name"] for a in table.assignments], "total", "%", "missing", "late", "open"],
        rows=[[s["id"], " ".join(p for p in (s["first_name"], s["last_name"]) if p),
               *[_row_text(r) for r in rows_of.get(s["id"], [])],
               f"{score_text(totals[s['id']]['points'])} / {score_text(totals[s['id']]['possible'])}",
               _pct(totals[s["id"]]["percent"]), totals[s["id"]]["missing"], totals[s["id"]]["late"],
               totals[s["id"]]["open"]] for s in table.students]))
    out.append(Section(
        "Assignments",
        header=["assignment", "due", "max", "handed in", "graded", "needs attention", "not graded yet", "missing",
                "late", "mean", "median", "min", "max %"],
        rows=[[p["assignment"], _when(p["due"]), score_text(p["max"]), p["handed_in"], p["graded"], p["attention"],
               p["pending"], p["missing"], p["late"], _pct(p["mean"]), _pct(p["median"]), _pct(p["min"]),
               _pct(p["max_pct"])] for p in per]))
    no_total = sum(t["percent"] is None for t in totals.values())
    out.append(Section(
        "Score histogram",
        intro=[f"Every student on the roster, by total: {len(totals) - no_total} students"
               + (f"; {no_total} with nothing graded or missing yet are not in it" if no_total else "")],
        image="score_histogram.png"))
    out.append(Section(
        "Needs attention",
        intro=["Submissions that have no score yet, with the reason."] if found["attention"]
        else ["Nothing: every submission that was handed in is graded."],
        header=["student", "assignment", "reason"] if found["attention"] else None,
        rows=[[r.student, r.assignment, r.reason] for r in found["attention"]]))
    out.append(Section(
        "Missing",
        intro=["Nothing handed in for an assignment that counts (no score, not a 0 in the exports)."]
        if found["missing"] else ["Nobody is missing an assignment."],
        header=["student", "missing assignments"] if found["missing"] else None,
        rows=[[s, ", ".join(a)] for s, a in sorted(found["missing"].items())]))
    out.append(Section(
        "Late",
        intro=[table.policy, "Late by: from the student's due date (an extension's, where one was granted)."]
        + ([] if found["late"] else ["No late submissions."]),
        header=["student", "assignment", "submitted", "due", "late by", "penalty", "score", "time from"]
        if found["late"] else None,
        rows=[[r.student, r.assignment, _when(r.timestamp), _when(r.due) + " (extended)" * bool(r.extended_due),
               extensions.duration(r.seconds_late), score_text(r.penalty),
               f"{score_text(r.score)} / {score_text(r.max_score)}", r.time_source or "nbgrader submission time"]
              for r in found["late"]]))
    out.append(Section(
        "Lateness unknown",
        intro=["Collected from an LMS that gave no submission time: no penalty was applied. Collect again with "
               "the LMS's times (make collect ZIP=... TIMES=...: Moodle's grading worksheet, or a CSV of student "
               "and submitted_at), then make autograde and make export."] if found["unknown"] else ["Nobody."],
        header=["student", "assignment", "due", "what the LMS said"] if found["unknown"] else None,
        rows=[[r.student, r.assignment, _when(r.due), r.time_source] for r in found["unknown"]]))
    out.append(Section(
        "Extensions",
        intro=[] if found["extended"] else ["None granted (make extensions CSV=...)."],
        header=["student", "assignment", "due", "extended to"] if found["extended"] else None,
        rows=[[r.student, r.assignment, _when(r.duedate), _when(r.extended_due)] for r in found["extended"]]))
    out.append(Section(
        "Not on the roster",
        intro=["Students in the gradebook whom the roster does not list, and what to do."] if table.off_roster
        else ["Nobody: every student is on the roster."] if table.roster_imported else [NO_ROSTER],
        header=["student", "what to do"] if table.off_roster else None,
        rows=[list(item) for item in table.off_roster]))
    out.append(Section(
        "Struggling",
        intro=[f"Total below {table.threshold:g}%, with the mistakes the checks named most often."]
        + ([] if found["struggling"] else ["Nobody."]),
        header=["student", "total", "%", "missing", "most frequent named mistakes"] if found["struggling"] else None,
        rows=[[s, f"{score_text(t['points'])} / {score_text(t['possible'])}", _pct(t["percent"]), t["missing"],
               "; ".join(f"{n} ({k})" for n, k in names) or "none named"] for s, t, names in found["struggling"]]))
    out.append(Section(
        "Flagged",
        intro=["Scores come from the checks, which run outside the student's kernel. These graded submissions "
               "changed a cell they were given, did something no answer needs, or wait for a manual grade."]
        + ([] if found["flagged"] else ["Nothing flagged."]),
        header=["student", "assignment", "flag"] if found["flagged"] else None,
        rows=[[r.student, r.assignment, flag] for r in found["flagged"] for flag in r.flags]))
    out.append(Section(
        "Pass rate per test", header=["test", "passed", "graded"],
        rows=[[c.split("/", 1)[-1], passed[c], tried[c]] for c in sorted(tried)], image="pass_rate.png"))
    out.append(Section(
        "Misconceptions named by the checks", header=["misconception", "test cells"],
        rows=[[n, k] for n, k in mistakes.most_common()] or [["(none)", 0]], image="misconceptions.png"))
    return out


def _row_text(r):
    if r.status == GRADED:
        text = f"{score_text(r.score)} / {score_text(r.max_score)}"
        marks = ["late"] * r.late + ["manual"] * r.manual + ["+extra"] * bool(r.extra_credit)
        return text + (f" ({', '.join(marks)})" if marks else "")
    return {MISSING: "missing", ATTENTION: "needs attention", PENDING: "not graded yet", NOT_DUE: "not due yet"}[r.status]


def write_markdown(secs, path):
    lines = []
    for i, sec in enumerate(secs):
        lines += [("# " if i == 0 else "## ") + md(sec.title), ""]
        lines += [f"- {md(t)}" if i == 0 else md(t) for t in sec.intro]
        lines += [""] * bool(sec.intro)
        if sec.image:
            lines += [f"![{md(sec.title)}]({sec.image})", ""]
        if sec.header:
            lines.append("| " + " | ".join(md(h) for h in sec.header) + " |")
            lines.append("|" + "---|" * len(sec.header))
            lines += ["| " + " | ".join(md(v) for v in row) + " |" for row in sec.rows]
            lines.append("")
    Path(path).write_text("\n".join(lines), encoding="utf-8")


def write_html(secs, path):
    parts = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>Grade report</title>",
             "<style>body{font-family:sans-serif;max-width:72em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.2em .5em;"
             "text-align:left;vertical-align:top}th{background:#f3f3f3}</style></head><body>"]
    for i, sec in enumerate(secs):
        level = 1 if i == 0 else 2
        parts.append(f"<h{level}>{esc(sec.title)}</h{level}>")
        parts += [f"<p>{esc(t)}</p>" for t in sec.intro]
        if sec.image:
            parts.append(f"<img src='{esc(sec.image)}' alt='{esc(sec.title)}'>")
        if sec.header:
            parts.append("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in sec.header) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in sec.rows]
            parts.append("</table>")
    parts.append("</body></html>")
    Path(path).write_text("\n".join(parts), encoding="utf-8")


def export(root, csv_path=None, canvas_path=None, report_dir=None, quiet=False):
    """Apply the late policy in the gradebook, then write grades.csv, grades_canvas.csv and
    reports/grade_report.{md,html} with their plots. Returns the paths. Says each step
    as it ends (on stderr, with its time), unless quiet."""
    import sys
    import time

    from nbgrader.api import Gradebook

    start = time.monotonic()

    def step(text):
        if not quiet:
            print(f"export: {text} ({time.monotonic() - start:.1f} s)", file=sys.stderr, flush=True)

    root = Path(root)
    config = layout.load_config(root)
    layout.ensure_gradebook(root, config)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        changed = late.apply(gb, config)
    step(f"late policy applied to the gradebook ({len(changed)} penalty(ies) changed)")
    table = gather(root, config)
    step(f"read {len(table.rows)} rows ({len(table.students)} students x {len(table.assignments)} assignments)")
    csv_path = Path(csv_path or root / "grades.csv")
    canvas_path = Path(canvas_path or root / "grades_canvas.csv")
    out = Path(report_dir or root / "reports")
    out.mkdir(parents=True, exist_ok=True)
    write_grades_csv(table, csv_path)
    write_canvas_csv(table, canvas_path)
    step(f"wrote {csv_path.name} and {canvas_path.name}")
    plots(table, out)
    secs = sections(table)
    write_markdown(secs, out / "grade_report.md")
    write_html(secs, out / "grade_report.html")
    step(f"wrote {out / 'grade_report.md'} (.html) and its plots")
    if not quiet:
        counts = Counter(r.status for r in table.rows)
        print(f"late policy: {table.policy}" + (f" ({len(changed)} penalty(ies) updated in the gradebook)" if changed else ""))
        print(f"wrote {csv_path.name} ({len(table.rows)} rows: {counts[GRADED]} graded, {counts[MISSING]} missing, "
              f"{counts[NOT_DUE]} not due yet, "
              f"{counts[ATTENTION]} need attention, {counts[PENDING]} not graded yet), {canvas_path.name} "
              f"({len(canvas_rows(table)) - 2} students x {len(table.assignments)} assignments: "
              f"{', '.join(table.canvas_columns.values()) or 'none'}) and {out / 'grade_report.md'} (.html)")
        for student, todo in table.off_roster:
            print(f"  {student}: {todo}")
        if not table.roster_imported:
            print(f"  {NO_ROSTER}")
        unknown = sum(r.status == GRADED and r.lateness_unknown for r in table.rows)
        if unknown:
            print(f"  {unknown} submission(s) with lateness unknown (no time from the LMS): see the report's "
                  "'Lateness unknown' section")
    return {"grades": csv_path, "canvas": canvas_path, "report": out / "grade_report.md",
            "html": out / "grade_report.html", "table": table, "late_changes": changed}
