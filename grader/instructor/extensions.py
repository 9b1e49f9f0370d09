"""Per-student extensions from the instructor's CSV file: a later due date for one student
and one assignment.

    make extensions CSV=extensions.csv      # python -m grader.instructor extensions extensions.csv

The CSV has a header with ``student`` (the course id), ``assignment``, and for each row
either ``due`` (the new due date, e.g. "2025-11-09 17:00:00 Europe/Berlin"; UTC when no
zone is given, as for nbgrader's due dates) or ``extra`` (time added to the assignment's
due date: "2 days", "36 hours", "1 day 12 hours", "90 minutes", or a number of hours). An
``extra`` of 0 removes the student's extension. Rows for students and assignments already
in the store replace theirs; the others stay.

The store itself (``extensions.json``, the ``Extension`` record) is grading's:
grader.grading.extensions, which the late policy (grader.grading.late) reads, so the
penalty (nbgrader autograde, the formgrader's Autograde button, make autograde, feedback
and export), the late notice in the feedback, grades.csv and the report all measure
lateness from the extended due date.
"""
from pathlib import Path

from grader.grading.extensions import STORE, Extension, load, parse_extra, save
from grader.instructor.csvfile import read_csv

__all__ = ["STORE", "Extension", "import_csv", "load", "parse_extra", "read_rows", "save"]


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
