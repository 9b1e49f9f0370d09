"""A large class built in seconds from a few submissions ("seeds"), for the class-size
tests (tests/instructor/test_class_size.py) and the benchmark (scripts/bench_class.py).

Each seed is one student's graded submission of one assignment: a row in the gradebook
with its notebooks, grades and comments, its folders in submitted/ and autograded/, and
its entry in autograded/.status.json. `replicate` gives every new student a copy of one
seed per assignment: the gradebook rows are copied through SQL (new ids, the seed's
scores, timestamp and penalty), the folders are hard links to the seed's files, and the
status entry is the seed's (the same files give the same fingerprint, so a plain
`make autograde` finds nothing to do). The seeds come from real gradings in the
benchmark (`make autograde` on a few students) and are written directly for the tests
(`fake_seeds`: nbgrader's own Gradebook API, no kernel).
"""
import datetime
import json
import os
import shutil
import sqlite3
import uuid
from pathlib import Path

import nbformat

from grader.grading import layout
from grader.grading.status import Status

DUE = datetime.datetime(2025, 10, 1, 17, 0)


def student_name(i):
    return f"s{i:05d}"


def structure(root, assignments, duedates=None):
    """The course gradebook with each assignment's notebooks and cells, read from the
    sources by nbgrader's own preprocessors (ComputeChecksums, SaveCells): what `make
    release` records, without running anything."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import ComputeChecksums, SaveCells

    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        for name in assignments:
            gb.update_or_create_assignment(name, duedate=(duedates or {}).get(name, DUE))
    for name in assignments:
        for notebook in layout.expected_notebooks(root, name):
            nb = nbformat.read(Path(root) / "solutions" / name / f"{notebook}.ipynb", as_version=4)
            resources = {"nbgrader": {"notebook": notebook, "assignment": name, "db_url": layout.db_url(root)}}
            nb, resources = ComputeChecksums().preprocess(nb, resources)
            SaveCells().preprocess(nb, resources)


def fake_seeds(root, assignments, kinds=("full", "partial", "late", "manual")):
    """One seed per kind and assignment, written with nbgrader's Gradebook API (no grading):
    "full" every point, on time; "partial" the first graded cell only; "late" every point,
    26 hours after the due date, with the policy's penalty; "manual" a manual grade and
    extra credit. Each gets its submitted/ and autograded/ folders (the released notebook
    stands for both) with nbgrader's timestamp.txt, and a status entry.
    Returns {assignment: [seed student ids]}."""
    from nbgrader.api import Gradebook

    from grader.grading.results import GRADED, NotebookChecks, Record

    config = layout.load_config(root)
    status = Status(root)
    seeds = {}
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        for name in assignments:
            seeds[name] = []
            for kind in kinds:
                student = f"seed_{kind}"
                gb.update_or_create_student(student, first_name=kind.title(), last_name="Seed",
                                            email=f"{kind}@example.org")
                stamp = DUE + (datetime.timedelta(hours=26) if kind == "late" else -datetime.timedelta(hours=1))
                sub = gb.update_or_create_submission(name, student, timestamp=stamp)
                for nb in sub.notebooks:
                    for i, grade in enumerate(sorted(nb.grades, key=lambda g: g.cell_id)):
                        grade.auto_score = grade.max_score if kind != "partial" or i == 0 else 0.0
                        grade.needs_manual_grade = False
                        if kind == "manual" and i == 0:
                            grade.manual_score, grade.extra_credit = max(0.0, grade.max_score - 1), 0.5
                    for comment in nb.comments:
                        comment.auto_comment = f"{kind} comment"
                gb.db.commit()
                for folder in ("submitted", "autograded"):
                    path = Path(root) / folder / student / name
                    path.mkdir(parents=True, exist_ok=True)
                    for notebook in layout.expected_notebooks(root, name):
                        shutil.copy(Path(root) / "notebooks" / name / f"{notebook}.ipynb", path / f"{notebook}.ipynb")
                    (path / "timestamp.txt").write_text(f"{stamp} UTC")
                record = Record(GRADED, f"fp-{kind}-{name}", 0.0, 1.0,
                                notebooks={nb: NotebookChecks() for nb in layout.expected_notebooks(root, name)})
                status.set(student, name, record.to_json())
                seeds[name].append(student)
    status.flush()
    from grader.grading import late
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        late.apply(gb, config)
    return seeds


def replicate(root, seeds, first, count, roster=True):
    """Students first .. first+count-1 (s00000, s00001, ...), each with a copy of one seed
    per assignment (student i gets seed i % len(seeds) of each): gradebook rows copied
    through SQL, folders hard-linked, status entries copied. `roster` adds them with
    names and e-mail addresses as `make roster` would."""
    db = Path(root) / "gradebook.db"
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA synchronous = OFF")
        con.execute("PRAGMA journal_mode = MEMORY")
        seed_subs = {}
        for name, students in seeds.items():
            for student in students:
                (sub_id,) = con.execute(
                    "SELECT sa.id FROM submitted_assignment sa JOIN assignment a ON a.id = sa.assignment_id "
                    "WHERE a.name = ? AND sa.student_id = ?", (name, student)).fetchone()
                seed_subs[(name, student)] = (sub_id, [row[0] for row in con.execute(
                    "SELECT id FROM submitted_notebook WHERE assignment_id = ?", (sub_id,))])
        con.execute("CREATE TEMP TABLE sub_map (new TEXT, seed TEXT, student TEXT)")
        con.execute("CREATE TEMP TABLE nb_map (new TEXT, seed TEXT, sub TEXT)")
        students, subs, nbs = [], [], []
        for i in range(first, first + count):
            student = student_name(i)
            students.append((student, f"First{i}" if roster else None, f"Last{i}" if roster else None,
                             f"{student}@example.org" if roster else None, str(100000 + i) if roster else None))
            for name, pool in seeds.items():
                seed_sub, seed_nbs = seed_subs[(name, pool[i % len(pool)])]
                new_sub = uuid.uuid4().hex
                subs.append((new_sub, seed_sub, student))
                nbs += [(uuid.uuid4().hex, seed_nb, new_sub) for seed_nb in seed_nbs]
        con.executemany("INSERT INTO student (id, first_name, last_name, email, lms_user_id) VALUES (?, ?, ?, ?, ?)",
                        students)
        con.executemany("INSERT INTO sub_map VALUES (?, ?, ?)", subs)
        con.executemany("INSERT INTO nb_map VALUES (?, ?, ?)", nbs)
        con.execute("INSERT INTO submitted_assignment (id, assignment_id, student_id, timestamp, extension) "
                    "SELECT m.new, sa.assignment_id, m.student, sa.timestamp, sa.extension "
                    "FROM sub_map m JOIN submitted_assignment sa ON sa.id = m.seed")
        con.execute("INSERT INTO submitted_notebook (id, assignment_id, notebook_id, flagged, late_submission_penalty) "
                    "SELECT m.new, m.sub, sn.notebook_id, sn.flagged, sn.late_submission_penalty "
                    "FROM nb_map m JOIN submitted_notebook sn ON sn.id = m.seed")
        con.execute("INSERT INTO grade (id, notebook_id, cell_id, auto_score, manual_score, extra_credit, "
                    "needs_manual_grade) SELECT lower(hex(randomblob(16))), m.new, g.cell_id, g.auto_score, "
                    "g.manual_score, g.extra_credit, g.needs_manual_grade FROM nb_map m JOIN grade g ON g.notebook_id = m.seed")
        con.execute("INSERT INTO comment (id, notebook_id, cell_id, auto_comment, manual_comment) "
                    "SELECT lower(hex(randomblob(16))), m.new, c.cell_id, c.auto_comment, c.manual_comment "
                    "FROM nb_map m JOIN comment c ON c.notebook_id = m.seed")
        con.commit()
    finally:
        con.close()
    status = Status(root)
    for i in range(first, first + count):
        student = student_name(i)
        for name, pool in seeds.items():
            seed = pool[i % len(pool)]
            for folder in ("submitted", "autograded"):
                _link_tree(Path(root) / folder / seed / name, Path(root) / folder / student / name)
            entry = status.get(seed, name)
            if entry is not None:
                status.data.setdefault(student, {})[name] = entry
    status._write()
    return [student_name(i) for i in range(first, first + count)]


def _link_tree(src, dst):
    """dst as a tree of hard links to src's files."""
    for dirpath, _dirs, files in os.walk(src):
        target = Path(dst) / Path(dirpath).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            os.link(Path(dirpath) / f, target / f)


def small_course(dest, assignments, students, kinds=("full", "partial", "late", "manual")):
    """A course with `students` students (plus the seeds) of the given assignments, built
    without grading: the class-size tests' class. Returns (root, seeds)."""
    from support import synthetic

    root = synthetic.make_course(dest)
    structure(root, layout.assignments(root))
    seeds = fake_seeds(root, assignments, kinds)
    replicate(root, seeds, 0, students)
    (Path(root) / "seeds.json").write_text(json.dumps(seeds))
    return root, seeds
