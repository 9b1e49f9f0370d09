"""A class's size does not change what a command costs in SQL, and the fast paths give
what nbgrader gives.

One small class is built without grading (tests/support/big_class.py: a few submissions
written with nbgrader's Gradebook API, then copied to every student through SQL), with
SMALL students; every operation is run and its SQL statements counted (SQLAlchemy's
engine events); the class then grows to LARGE students and the counts must not have
changed. On the large class each result is compared with stock nbgrader's: the
formgrader API's JSON with nbgrader's NbGraderAPI, grades.csv with nbgrader's CSV export,
the late-policy pass with the penalties computed from nbgrader's ORM objects.
"""
import contextlib
import csv
import json
import sqlite3

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from support import big_class

SMALL, LARGE = 30, 150
A = "05_scaled_attention"
B = "03_masked_softmax"
STUDENT = "s00007"


class _Statements:
    count = 0


def _on_execute(conn, cursor, statement, parameters, context, executemany):
    _Statements.count += 1


@contextlib.contextmanager
def statements():
    """Count the SQL statements SQLAlchemy executes inside the block (an executemany once)."""
    event.listen(Engine, "before_cursor_execute", _on_execute)
    box = {}
    before = _Statements.count
    try:
        yield box
    finally:
        event.remove(Engine, "before_cursor_execute", _on_execute)
        box["n"] = _Statements.count - before


def _apis(root):
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from grader.grading import layout
    from grader.instructor.formgrader import CourseAPI

    config = layout.load_config(root)
    config.Application.log_level = "WARNING"
    return (lambda: NbGraderAPI(CourseDirectory(config=config), config=config),
            lambda: CourseAPI(CourseDirectory(config=config), config=config))


API_CALLS = {
    "assignments": ("get_assignments", ()),
    "assignment": ("get_assignment", (A,)),
    "notebooks": ("get_notebooks", (A,)),
    "submissions": ("get_submissions", (A,)),
    "submissions of an assignment nobody handed in": ("get_submissions", ("01_bag_of_words",)),
    "submitted notebooks": ("get_notebook_submissions", (A, A)),
    "notebook indices": ("get_notebook_submission_indices", (A, A)),
    "students": ("get_students", ()),
    "student": ("get_student", (STUDENT,)),
    "a seed student": ("get_student", ("seed_late",)),
    "student submissions": ("get_student_submissions", (STUDENT,)),
    "submission": ("get_submission", (A, STUDENT)),
    "student notebook submissions": ("get_student_notebook_submissions", (STUDENT, A)),
}


def _measure(root):
    """{operation: SQL statements} on the class as it is."""
    from nbgrader.api import Gradebook

    from grader.grading import late, layout
    from grader.instructor import report

    config = layout.load_config(root)
    counts = {}
    with Gradebook(layout.db_url(root)) as gb:
        with statements() as n:
            late.apply(gb, config)
        counts["late policy"] = n["n"]
        with statements() as n:
            late.apply(gb, config, A, STUDENT)
        counts["late policy, one submission"] = n["n"]
    with statements() as n:
        report.gather(root, config)
    counts["export's reading"] = n["n"]
    with statements() as n:
        report.export(root, quiet=True)
    counts["export"] = n["n"]
    _stock, ours = _apis(root)
    for label, (method, args) in API_CALLS.items():
        api = ours()
        with statements() as n:
            getattr(api, method)(*args)
        counts[f"api {label}"] = n["n"]
    api = ours()
    ids = list(api.existing_submission_ids(A, A))
    with statements() as n:
        next(api.existing_submission_ids(A, A, after=ids[len(ids) // 2]), None)
    counts["next"] = n["n"]
    with statements() as n:
        next(api.existing_submission_ids(A, A, before=ids[len(ids) // 2], failed=True), None)
    counts["previous incorrect"] = n["n"]
    stock, _ours = _apis(root)
    with statements() as n:
        stock().get_notebook_submission_indices(A, A)
    counts["stock nbgrader's notebook indices"] = n["n"]
    return counts


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """The class at SMALL students, its counts; then at LARGE students, its counts."""
    root, seeds = big_class.small_course(tmp_path_factory.mktemp("class") / "course", [A, B], SMALL)
    small = _measure(root)
    big_class.replicate(root, seeds, SMALL, LARGE - SMALL)
    large = _measure(root)
    return root, seeds, small, large


@pytest.mark.parametrize("operation", ["late policy", "late policy, one submission", "export's reading", "export",
                                       *[f"api {label}" for label in API_CALLS], "next", "previous incorrect"])
def test_the_sql_statements_of_an_operation_do_not_grow_with_the_class(grown, operation):
    _root, _seeds, small, large = grown
    assert large[operation] == small[operation], (operation, small[operation], large[operation])


def test_the_statement_counter_sees_a_cost_that_grows_with_the_class(grown):
    """nbgrader's own notebook indices load each submission's student lazily, one query each."""
    _root, _seeds, small, large = grown
    assert large["stock nbgrader's notebook indices"] - small["stock nbgrader's notebook indices"] >= LARGE - SMALL


@pytest.mark.parametrize("label", list(API_CALLS))
def test_the_course_formgrader_api_gives_nbgraders_json(grown, label):
    root, *_ = grown
    stock, ours = _apis(root)
    method, args = API_CALLS[label]
    expected = getattr(stock(), method)(*args)
    got = getattr(ours(), method)(*args)
    assert json.dumps(got, sort_keys=True, default=str) == json.dumps(expected, sort_keys=True, default=str)


def test_next_and_previous_are_nbgraders_neighbours(grown):
    """nbgrader's SubmissionNavigationHandler: the sorted ids of the submitted notebooks on
    disk; next/prev are the neighbours, "incorrect" ones among those with failed tests."""
    from nbgrader.api import Gradebook

    from grader.grading import layout

    root, *_ = grown
    stock, ours = _apis(root)
    api = stock()
    with Gradebook(layout.db_url(root)) as gb:
        notebooks = api._filter_existing_notebooks(A, gb.notebook_submissions(A, A))
        ids = sorted(nb.id for nb in notebooks)
        failed = sorted(nb.id for nb in notebooks if nb.failed_tests)
    assert failed and len(failed) < len(ids)  # the seeds have some failed tests, not all
    ours = ours()
    for i in (0, 1, len(ids) // 2, len(ids) - 1):
        current = ids[i]
        assert next(ours.existing_submission_ids(A, A, after=current), None) == (ids[i + 1] if i + 1 < len(ids) else None)
        assert next(ours.existing_submission_ids(A, A, before=current), None) == (ids[i - 1] if i else None)
        later = [x for x in failed if x > current]
        assert next(ours.existing_submission_ids(A, A, after=current, failed=True), None) == (later[0] if later else None)


def test_grades_csv_has_nbgraders_export_numbers(grown, tmp_path):
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    from grader.grading import layout
    root, *_ = grown
    out = {"grades": root / "grades.csv"}  # written by the fixture's last export, on the large class
    stock_csv = tmp_path / "stock.csv"
    with Gradebook(layout.db_url(root)) as gb:
        CsvExportPlugin(to=str(stock_csv)).export(gb)
    with open(stock_csv) as f:
        stock = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(f) if r["timestamp"]}
    with open(out["grades"]) as f:
        ours = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(f) if r["status"] == "graded"}
    assert set(ours) == set(stock) and len(ours) == 2 * (LARGE + 4)
    for key, row in stock.items():
        mine = ours[key]
        for column in ("duedate", "timestamp", "last_name", "first_name", "email"):
            assert mine[column] == row[column], (key, column)
        for column in ("raw_score", "late_submission_penalty", "score", "max_score"):
            assert float(mine[column]) == pytest.approx(float(row[column]), abs=1e-9), (key, column)
    assert any(float(r["late_submission_penalty"]) > 0 for r in stock.values())  # the late seed's copies


def test_the_late_policy_pass_gives_the_policys_penalty_for_nbgraders_scores(grown):
    """Penalties cleared, then written again by the set-based pass: each equals the policy
    applied to nbgrader's own score and lateness of that notebook (its ORM objects)."""
    from nbgrader.api import Gradebook

    from grader.grading import late, layout

    root, *_ = grown
    config = layout.load_config(root)
    con = sqlite3.connect(root / "gradebook.db")
    con.execute("UPDATE submitted_notebook SET late_submission_penalty = NULL")
    con.commit()
    con.close()
    rule = late.policy(config)
    with Gradebook(layout.db_url(root)) as gb:
        changed = late.apply(gb, config)
        expected = {}
        for assignment in (A, B):
            for sub in gb.assignment_submissions(assignment):
                for nb in sub.notebooks:
                    expected[(sub.student.id, assignment)] = (
                        min(rule.penalty(nb.score, sub.total_seconds_late), nb.score) or None,
                        nb.late_submission_penalty)
    assert {k: v[0] for k, v in expected.items()} == {k: v[1] for k, v in expected.items()}
    assert len(changed) == sum(1 for penalty, _ in expected.values() if penalty)  # the late copies
    assert len(changed) >= LARGE // 4


def test_a_regrades_gradebook_template_holds_the_assignment_and_no_student(grown, tmp_path):
    from nbgrader.api import Gradebook

    from grader.grading import layout
    from grader.grading.autograde import Grading

    root, *_ = grown
    shared = Grading(root)._shared(A, tmp_path)
    path = tmp_path / "template.db"
    path.write_bytes(shared["gradebook"])
    con = sqlite3.connect(path)
    counts = {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
              for t in ("student", "submitted_assignment", "submitted_notebook", "grade", "comment", "assignment")}
    con.close()
    assert counts == {"student": 0, "submitted_assignment": 0, "submitted_notebook": 0, "grade": 0, "comment": 0,
                      "assignment": 1}
    with Gradebook(f"sqlite:///{path}") as template, Gradebook(layout.db_url(root)) as course:
        def cells(gb):
            nb = gb.find_notebook(A, A)
            return (gb.find_assignment(A).duedate,
                    sorted((c.name, c.max_score, c.cell_type) for c in nb.grade_cells),
                    sorted((c.name, c.checksum, c.locked) for c in nb.source_cells),
                    sorted(c.name for c in nb.solution_cells))
        assert cells(template) == cells(course)


def test_merging_a_result_costs_the_same_statements_and_writes_nbgraders_rows(grown):
    """The driver's merge (grader.grading.merge): a new submission and a regrade of an
    existing one, each in a fixed number of statements, leave the rows nbgrader's own
    Gradebook API reads back as the result says (scores, comments, penalty, timestamp)."""
    from nbgrader.api import Gradebook

    from grader.grading import layout
    from grader.grading.autograde import Grading
    from grader.grading.results import CellGrade, NotebookResult
    from grader.grading.submission import SubmissionResult

    root, *_ = grown
    with Gradebook(layout.db_url(root)) as gb:
        cells = {g.name: g.max_score for g in gb.find_notebook(A, A).grade_cells}
        comments = [c.name for c in gb.find_notebook(A, A).solution_cells]
        gb.update_or_create_student("newcomer")
    first = sorted(cells)[0]

    def result(student, stamp):
        return SubmissionResult(student, A, "graded", timestamp=stamp, files={"05_scaled_attention.ipynb": b"{}"},
                                notebooks={A: NotebookResult(
                                    grades={n: CellGrade(0.0 if n == first else p, p, False) for n, p in cells.items()},
                                    comments={c: f"auto {c}" for c in comments}, late_penalty=0.5)})

    counts = []
    for student, stamp in [("newcomer", "2025-10-01 12:00:00"), ("s00008", "2025-10-01 13:00:00"),
                           ("newcomer", "2025-10-01 14:00:00")]:
        with statements() as n:
            Grading(root).merge(result(student, stamp), "fp")
        counts.append(n["n"])
        with Gradebook(layout.db_url(root)) as gb:
            sub = gb.find_submission(A, student)
            nb = gb.find_submission_notebook(A, A, student)
            assert str(sub.timestamp) == stamp
            assert {g.name: g.auto_score for g in nb.grades} == {n: (0.0 if n == first else p) for n, p in cells.items()}
            assert not any(g.needs_manual_grade for g in nb.grades)
            assert {c.name: c.auto_comment for c in nb.comments} == {c: f"auto {c}" for c in comments}
            assert nb.late_submission_penalty == 0.5 and nb.score == sum(cells.values()) - cells[first]
    assert counts[1] == counts[2], counts  # two regrades alike, whatever the class holds


def test_progress_without_a_terminal_is_a_line_per_finished_item():
    import io

    from grader.grading.layout import Progress

    out = io.StringIO()
    bar = Progress("autograde", 3, stream=out)
    bar.note("starting 2 local workers")
    for student in ("ada", "bo", "cy"):
        bar.done(f"{student} / {A}", "graded (1.0 s)")
    bar.close()
    assert out.getvalue().splitlines() == [
        "autograde: starting 2 local workers", f"autograde: [1/3] ada / {A} graded (1.0 s)",
        f"autograde: [2/3] bo / {A} graded (1.0 s)", f"autograde: [3/3] cy / {A} graded (1.0 s)"]


def test_a_regrades_attention_list_agrees_with_its_counts_and_names_earlier_runs(tmp_path):
    from grader.grading.autograde import _attention_lines, _summary
    from grader.grading.status import Status

    status = Status(tmp_path)
    status.set("ada", A, {"fingerprint": "1", "status": "needs_attention", "reason": "the kernel died"})
    status.set("bo", A, {"fingerprint": "2", "status": "needs_attention", "reason": "renamed"})
    status.set("cy", A, {"fingerprint": "3", "status": "graded"})
    summary = {"graded": 1, "needs_attention": 1, "skipped": 1, "attention": [("bo", A, "renamed")]}
    chosen = {("ada", A), ("bo", A), ("cy", A)}
    head = _summary(summary, 3, "every student", 1.0, "2 local worker(s)")
    lines = _attention_lines(summary, status, chosen)
    assert "1 graded, 1 need attention, 1 unchanged" in head
    assert lines[0] == f"  NEEDS ATTENTION bo / {A}: renamed"  # this run's: as many as counted
    assert "1 more need attention from an earlier run" in lines[1]
    assert lines[2] == f"  NEEDS ATTENTION (earlier run) ada / {A}: the kernel died"
    assert len(lines) == 3


def test_feedback_is_made_once_and_again_only_when_its_inputs_change(grown):
    """make feedback STUDENT=... ASSIGNMENT=...: nbgrader's page, then nothing to do, then a
    manual grade given in the formgrader makes it again."""
    from nbgrader.api import Gradebook

    from grader.grading import layout
    from grader.instructor import feedback

    root, *_ = grown
    student = "s00011"
    first = feedback.generate(root, A, student, progress=False)
    page = root / "feedback" / student / A / f"{A}.html"
    assert first["written"] == 1 and not first["failed"] and page.exists()
    assert feedback.generate(root, A, student, progress=False) == {"written": 0, "unchanged": 1, "failed": {}, "withdrawn": []}
    with Gradebook(layout.db_url(root)) as gb:
        grade = sorted(gb.find_submission_notebook(A, A, student).grades, key=lambda g: g.name)[0]
        grade.manual_score = 0.25
        gb.db.commit()
    again = feedback.generate(root, A, student, progress=False)
    assert again["written"] == 1
    assert "0.25" in page.read_text()


def test_ctrl_c_keeps_what_was_recorded_and_says_a_plain_rerun_continues(grown, monkeypatch, capsys):
    """make autograde stopped by Ctrl-C (KeyboardInterrupt while it waits for the cluster):
    the results recorded before are committed and in the status, the rest are not, and it
    says so, with the exit status of an interrupted command."""
    from nbgrader.api import Gradebook

    from grader.grading import autograde, layout
    from grader.grading.results import CellGrade, NotebookResult
    from grader.grading.status import Status
    from grader.grading.submission import SubmissionResult

    root, *_ = grown
    with Gradebook(layout.db_url(root)) as gb:
        cells = {g.name: g.max_score for g in gb.find_notebook(A, A).grade_cells}
    chosen = ["s00020", "s00021", "s00022", "s00023"]

    def interrupted_map(self, jobs, count, workdir, bar):
        for i, (job, fp) in enumerate(jobs):
            if i == 2:
                raise KeyboardInterrupt
            yield SubmissionResult(job.student, job.assignment, "graded", elapsed=1.0,
                                   timestamp="2025-10-02 10:00:00", files={f"{A}.ipynb": b"{}"},
                                   notebooks={A: NotebookResult(grades={n: CellGrade(0.0, p, False)
                                                                        for n, p in cells.items()})}), fp

    monkeypatch.setattr(autograde.Grading, "_map", interrupted_map)
    code = autograde.main(["--root", str(root), *[f"--student={s}" for s in chosen], "--assignment", A])
    out, err = capsys.readouterr()
    assert code == 130
    assert "INTERRUPTED (Ctrl-C): 2 submission(s) finished in this run are recorded and kept" in err
    assert "2 were not graded" in err and "A plain `make autograde` (no FORCE=1) continues" in err
    status = Status(root)
    assert [s for s in chosen if status.get(s, A)["graded_at"] > 0] == chosen[:2]  # the copies' entries say 0
    with Gradebook(layout.db_url(root)) as gb:
        assert [str(gb.find_submission(A, s).timestamp) for s in chosen[:2]] == ["2025-10-02 10:00:00"] * 2
        assert str(gb.find_submission(A, chosen[2]).timestamp) != "2025-10-02 10:00:00"
