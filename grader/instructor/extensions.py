"""Per-student extensions: a later due date for one student and one assignment.

    make extensions CSV=extensions.csv      # python -m grader.instructor extensions extensions.csv

The CSV has a header with ``student`` (the course id), ``assignment``, and for each row
either ``due`` (the new due date, e.g. "2025-11-09 17:00:00 Europe/Berlin"; UTC when no
zone is given, as for nbgrader's due dates) or ``extra`` (time added to the assignment's
due date: "2 days", "36 hours", "1 day 12 hours", "90 minutes", or a number of hours). An
``extra`` of 0 removes the student's extension. Rows for students and assignments already
in the store replace theirs; the others stay.

nbgrader's gradebook has no field for an extension, so they are kept in the course file
``extensions.json`` (beside ``gradebook.db``), which grader.instructor.late reads: the penalty
(nbgrader autograde, the formgrader's Autograde button, make autograde, feedback and
export), the late notice in the feedback, grades.csv and the report all measure lateness
from the extended due date.
"""
import datetime
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from grader.instructor.csvfile import read_csv

STORE = "extensions.json"
UNITS = {"w": 7 * 86400, "week": 7 * 86400, "d": 86400, "day": 86400, "h": 3600, "hour": 3600,
         "hr": 3600, "m": 60, "min": 60, "minute": 60}
EXTRA = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+?)s?\b")


@dataclass(frozen=True)
class Extension:
    """A later due date for one student's assignment: a fixed date, or time added to the
    assignment's due date."""
    student: str
    assignment: str
    due: Optional[datetime.datetime] = None   # UTC, naive (as nbgrader stores due dates)
    extra_seconds: Optional[float] = None

    def new_due(self, duedate):
        """The student's due date, given the assignment's (None when neither is known)."""
        if self.due is not None:
            return self.due
        if duedate is None:
            return None
        return duedate + datetime.timedelta(seconds=self.extra_seconds or 0.0)

    def seconds_late(self, seconds_late, duedate):
        """Seconds late measured from the extended due date, given nbgrader's seconds late
        measured from the assignment's due date."""
        new = self.new_due(duedate)
        if new is None or duedate is None:
            return seconds_late
        return seconds_late - (new - duedate).total_seconds()

    def describe(self, duedate=None):
        new = self.new_due(duedate)
        when = f"{new:%Y-%m-%d %H:%M} UTC" if new else "the assignment's due date"
        added = f" (+{_duration(self.extra_seconds)})" if self.extra_seconds else ""
        return f"extended to {when}{added}"


def _duration(seconds):
    days, rest = divmod(int(seconds), 86400)
    hours, minutes = rest // 3600, (rest % 3600) // 60
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or f"{int(seconds)} s"


def parse_extra(text):
    """'2 days', '36h', '1 day 12 hours', '90 minutes' or a number of hours, in seconds."""
    text = str(text or "").strip().lower()
    try:
        return float(text) * 3600
    except ValueError:
        pass
    parts = EXTRA.findall(text)
    if not parts or EXTRA.sub("", text).strip(" ,+and") or any(unit not in UNITS for _, unit in parts):
        raise ValueError(f"{text!r} is not an amount of time (e.g. '2 days', '36 hours', '1 day 12 hours', "
                         "'90 minutes', or a number of hours)")
    return sum(float(n) * UNITS[unit] for n, unit in parts)


# --- the store ----------------------------------------------------------------------------

def load(root):
    """{(student, assignment): Extension} from the course's extensions.json."""
    path = Path(root) / STORE
    if not path.exists():
        return {}
    out = {}
    for item in json.loads(path.read_text(encoding="utf-8")).get("extensions", []):
        due = datetime.datetime.fromisoformat(item["due"]) if item.get("due") else None
        ext = Extension(item["student"], item["assignment"], due, item.get("extra_seconds"))
        out[(ext.student, ext.assignment)] = ext
    return out


def save(root, extensions):
    items = []
    for ext in sorted(extensions.values(), key=lambda e: (e.assignment, e.student)):
        item = asdict(ext)
        item["due"] = ext.due.isoformat() if ext.due else None
        items.append(item)
    (Path(root) / STORE).write_text(json.dumps({"extensions": items}, indent=1, ensure_ascii=False),
                                   encoding="utf-8")


def find(root, student, assignment):
    return load(root).get((student, assignment))


# --- importing a CSV ----------------------------------------------------------------------

def read_rows(path, assignments):
    """[(Extension, remove?)] from the CSV; SystemExit naming every row that cannot be used."""
    from nbgrader.utils import parse_utc

    path = Path(path)
    header, reader = read_csv(path, "extensions", lower=True)
    if not {"student", "assignment"} <= set(header) or not {"due", "extra"} & set(header):
        raise SystemExit(f"{path}: the header needs 'student', 'assignment' and 'due' (a new due date) "
                         f"or 'extra' (time added); found: {', '.join(header) or 'nothing'}")
    rows, problems, seen = [], [], {}
    for line, row in enumerate(reader, start=2):
        student, assignment = (row.get("student") or "").strip(), (row.get("assignment") or "").strip()
        due, extra = (row.get("due") or "").strip(), (row.get("extra") or "").strip()
        why = None
        if not student:
            why = "no student"
        elif assignment not in assignments:
            why = f"unknown assignment {assignment!r} (use one of {', '.join(assignments)})"
        elif bool(due) == bool(extra):
            why = "give either 'due' or 'extra', not both and not neither"
        elif (student, assignment) in seen:
            why = f"{student} / {assignment} already on row {seen[(student, assignment)]}"
        else:
            try:
                if due:
                    rows.append((Extension(student, assignment, due=parse_utc(due)), False))
                else:
                    seconds = parse_extra(extra)
                    rows.append((Extension(student, assignment, extra_seconds=seconds), seconds == 0))
            except (ValueError, OverflowError) as err:
                why = str(err) if extra else f"{due!r} is not a date (e.g. 2025-11-09 17:00:00 Europe/Berlin)"
        if why:
            problems.append(f"row {line}: {why}")
        seen.setdefault((student, assignment), line)
    if problems:
        raise SystemExit(f"{path}: nothing stored:\n  " + "\n  ".join(problems))
    if not rows:
        raise SystemExit(f"{path}: no extensions in the file")
    return rows


def import_csv(root, csv_path):
    """Check the CSV, then store its extensions; prints each one with the new due date.
    Returns the extensions stored and the course's config (the late policy then applies
    them: grader.instructor.cli.import_extensions)."""
    from nbgrader.api import Gradebook

    from grader.grading import layout

    root = Path(root)
    rows = read_rows(csv_path, layout.assignments(root))
    config = layout.load_config(root)
    layout.ensure_gradebook(root, config)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        students = {s.id for s in gb.students}
        dues = {a.name: a.duedate for a in gb.assignments}
    store = load(root)
    for ext, remove in rows:
        key = (ext.student, ext.assignment)
        if remove:
            had = store.pop(key, None)
            print(f"  {ext.student} / {ext.assignment}: " + ("extension removed" if had else "no extension to remove"))
            continue
        store[key] = ext
        due = dues.get(ext.assignment)
        note = "" if due else " (the assignment has no due date yet, so nothing is late)"
        unknown = "" if ext.student in students else " (not in the gradebook yet: check the id)"
        print(f"  {ext.student} / {ext.assignment}: {ext.describe(due)}{note}{unknown}")
    save(root, store)
    return store, config
