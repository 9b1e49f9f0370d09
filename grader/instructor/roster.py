"""The class roster: students imported into nbgrader's gradebook with nbgrader's own import.

    python -m grader.instructor roster students.csv        # or: make roster CSV=students.csv

The CSV is nbgrader's format: a header with ``id`` (required) and any of ``first_name``,
``last_name``, ``email``, ``lms_user_id`` (the student's id in the LMS, e.g. the Canvas user
id: collect uses it to match LMS file names, and grades_canvas.csv to match Canvas'
gradebook), plus Canvas' ``sis_user_id``, ``sis_login_id`` and ``section``. A gradebook
export from Canvas ("Student", "ID", "SIS User ID", "SIS Login ID", "Section") is accepted
too: the SIS Login ID becomes the course id (or the SIS User ID, or the Canvas ID where those
are empty) and the Canvas ID the ``lms_user_id``; its assignment columns ("Scaled attention
(4567)") are remembered, so grades_canvas.csv names its columns as Canvas does.

nbgrader's gradebook stores the first five columns; the Canvas ones, and who is on the
roster, are kept in the course file ``roster.json`` (read by grader.instructor.report).

Every student on the roster is in the report and the exports; one who hands nothing in is
listed as missing, not given a silent 0.

A student collected from an LMS download before the roster named them was filed under their
LMS id (the Canvas user id: grader.instructor.lms); importing a roster row with that
``lms_user_id`` moves their submissions to their roster id and takes the stand-in out of the
gradebook, the grading status, the download's record and feedback/ (merge_stand_ins), so the
exports name them once; make autograde then grades them under their own id.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.instructor.csvfile import read_csv
from grader.grading import layout
from grader.instructor.lms import rename_in_records, safe_student_id

COLUMNS = ("id", "first_name", "last_name", "email", "lms_user_id")
CANVAS_COLUMNS = ("Student", "ID", "SIS Login ID")
LMS_COLUMNS = ("sis_user_id", "sis_login_id", "section")   # kept in roster.json
STORE = "roster.json"
CANVAS_ASSIGNMENT = re.compile(r"^(?P<name>.+) \((?P<id>\d+)\)$")


def read_rows(path):
    """Roster rows as nbgrader columns; SystemExit with the reason when the file cannot be used."""
    header, reader = read_csv(path, "roster")
    rows = list(reader)
    if all(c in header for c in CANVAS_COLUMNS):
        rows = [_from_canvas(r) for r in rows if _is_canvas_student(r)]
    elif "id" not in header:
        raise SystemExit(f"{path}: the header needs an 'id' column (nbgrader's roster format: "
                         f"{', '.join(COLUMNS)}), or Canvas' gradebook columns ({', '.join(CANVAS_COLUMNS)}); "
                         f"found: {', '.join(header) or 'nothing'}")
    else:
        unknown = [h for h in header if h not in COLUMNS + LMS_COLUMNS]
        if unknown:
            print(f"roster: ignoring column(s) nbgrader does not store: {', '.join(unknown)}")
        rows = [{k: (r.get(k) or "").strip() for k in COLUMNS + LMS_COLUMNS if k in header} for r in rows]
    problems, seen = [], {}
    for line, row in enumerate(rows, start=2):
        sid = row.get("id", "")
        why = safe_student_id(sid)
        if why:
            problems.append(f"row {line}: {why}")
        elif sid in seen:
            problems.append(f"row {line}: id {sid!r} already on row {seen[sid]}")
        else:
            seen[sid] = line
    if problems:
        raise SystemExit(f"{path}: nothing imported:\n  " + "\n  ".join(problems))
    if not rows:
        raise SystemExit(f"{path}: no students in the file")
    return rows


def _is_canvas_student(row):
    name = (row.get("Student") or "").strip()
    return name and name != "Points Possible" and name != "Student, Test" and (row.get("ID") or "").strip()


def _from_canvas(row):
    last, _, first = (row.get("Student") or "").partition(",")
    canvas_id = (row.get("ID") or "").strip()
    sid = (row.get("SIS Login ID") or "").strip() or (row.get("SIS User ID") or "").strip() or canvas_id
    return {"id": sid, "first_name": first.strip(), "last_name": last.strip(), "email": "",
            "lms_user_id": canvas_id, "sis_user_id": (row.get("SIS User ID") or "").strip(),
            "sis_login_id": (row.get("SIS Login ID") or "").strip(), "section": (row.get("Section") or "").strip()}


def canvas_assignment_columns(path):
    """The assignment columns of a Canvas gradebook export ("Name (id)"), else []."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        header = [h.strip() for h in next(csv.reader(f), [])]
    if not all(c in header for c in CANVAS_COLUMNS):
        return []
    return [h for h in header if CANVAS_ASSIGNMENT.match(h)]


def load_store(root):
    """roster.json: {"students": {id: {sis_user_id, sis_login_id, section}}, "canvas_columns":
    [...]}; None when no roster was imported since the file exists."""
    path = Path(root) / STORE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _save_store(root, rows, csv_path):
    store = load_store(root) or {"students": {}, "canvas_columns": []}
    for r in rows:
        store["students"][r["id"]] = {k: r.get(k, "") for k in LMS_COLUMNS}
    columns = canvas_assignment_columns(csv_path)
    if columns:
        store["canvas_columns"] = columns
    (Path(root) / STORE).write_text(json.dumps(store, indent=1, sort_keys=True, ensure_ascii=False), encoding="utf-8")


def import_roster(root, csv_path):
    """Check the roster, then `nbgrader db student import` it; prints who is new."""
    root = Path(root)
    rows = read_rows(csv_path)
    config = layout.load_config(root)
    before = set(student_ids(root, config))
    columns = [c for c in COLUMNS if any(c in r for r in rows)]
    with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="", delete=False) as tmp:
        writer = csv.DictWriter(tmp, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    try:
        proc = subprocess.run([sys.executable, "-m", "nbgrader", "db", "student", "import", tmp.name],
                              cwd=root, capture_output=True, text=True)
    finally:
        Path(tmp.name).unlink(missing_ok=True)
    if proc.returncode:
        raise SystemExit(f"nbgrader db student import failed:\n{proc.stderr[-2000:]}")
    after = student_ids(root, config)
    _save_store(root, rows, csv_path)
    new = sorted(set(after) - before)
    print(f"roster: {len(rows)} student(s) imported from {csv_path} ({len(new)} new, "
          f"{len(rows) - len(new)} updated); the gradebook now has {len(after)} student(s)")
    for line in merge_stand_ins(root, rows, config):
        print(line)
    after = student_ids(root, config)
    not_listed = sorted(set(after) - {r['id'] for r in rows})
    if not_listed:
        print(f"  in the gradebook but not in this file (kept): {', '.join(not_listed)}")
    return after


def merge_stand_ins(root, rows, config):
    """For each roster row whose lms_user_id is not its id: where an LMS download was collected
    before the roster named the student, their work was filed under that LMS id, a stand-in.
    Its submitted/ folders move to the student's own (an assignment the student has under
    their own id already keeps theirs: the stand-in's copy came from an earlier download); the
    stand-in leaves the gradebook (nbgrader's remove_student), the grading status,
    autograded/, the downloads' records (collected.json, under the student's id now) and
    feedback/ (its pages withdrawn, from the exchange too). An LMS id that is a student's own
    id on the roster is never a stand-in. Returns what it says it did, a line each."""
    from nbgrader.api import Gradebook

    from grader.grading.status import Status
    from grader.instructor import feedback

    root = Path(root)
    listed = {r["id"] for r in rows} | set((load_store(root) or {}).get("students", {}))
    pairs = [(r["id"], (r.get("lms_user_id") or "").strip()) for r in rows]
    pairs = [(real, lms_id) for real, lms_id in pairs if lms_id and lms_id not in listed and not safe_student_id(lms_id)]
    if not pairs:
        return []
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        in_gradebook = {s.id for s in gb.students}
    status = Status(root)
    lines = []
    for real, lms_id in pairs:
        folder = root / "submitted" / lms_id
        if not (folder.is_dir() or lms_id in in_gradebook or status.data.get(lms_id)):
            continue
        moved, kept = [], []
        for work in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
            target = root / "submitted" / real / work.name
            if target.exists():
                kept.append(work.name)
                shutil.rmtree(work)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(work, target)
                moved.append(work.name)
        shutil.rmtree(folder, ignore_errors=True)
        rename_in_records(root, lms_id, real)
        shutil.rmtree(root / "autograded" / lms_id, ignore_errors=True)
        status.drop_student(lms_id)
        if lms_id in in_gradebook:
            with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
                gb.remove_student(lms_id)
        withdrawn = feedback.withdraw_stale(root, student=lms_id)
        lines.append(f"  {real} was collected as {lms_id} (their LMS id) before the roster named them: "
                     + (f"moved {', '.join(moved)} to submitted/{real}/; " if moved else "")
                     + (f"kept {real}'s own {', '.join(kept)}; " if kept else "")
                     + f"{lms_id} removed from the gradebook and the grading status"
                     + (f", its {len(withdrawn)} feedback page folder(s) withdrawn" if withdrawn else "")
                     + ("; run make autograde to grade them as " + real if moved else ""))
    return lines


def student_ids(root, config=None):
    from nbgrader.api import Gradebook

    config = config or layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        return sorted(s.id for s in gb.students)
