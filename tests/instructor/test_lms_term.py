"""The LMS round trip of one assignment: a Canvas gradebook export as the roster, a Canvas
download with its submission times, an extension, late work, work whose time the LMS did
not give, students off the roster; then the gradebook, the formgrader, the feedback,
grades.csv, grades_canvas.csv and the report must all show the same numbers.

Two submissions are graded for real (make autograde's pipeline: the late penalty from the
student's due date given by the grading and written by its merge, the feedback from their
autograded notebooks); the others' scores are written with nbgrader's Gradebook API, as
the tests are about collection, lateness and the exports."""
import csv
import datetime
import html
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile

import nbformat
import pytest

from support.classes import CLASS_ASSIGNMENT as A, CLASS_BUDGET
from grader.instructor import lms, report, roster
from grader.instructor import cli as instructor
from support import synthetic
from grader.grading import autograde, layout

pytestmark = pytest.mark.xdist_group("lms_term")
NB = f"{A}.ipynb"
DUE = datetime.datetime(2025, 10, 1, 17, 0, 0)
CANVAS_COLUMN = "05 Scaled Attention (4567)"
CANVAS_EXPORT = (
    f'"Student","ID","SIS User ID","SIS Login ID","Section","{CANVAS_COLUMN}","Quiz 1 (4568)","Current Score"\n'
    '"    Points Possible","","","","","10","5","(read only)"\n'
    '"Lovelace, Ada","101","S101","ada","Section A","","",""\n'
    '"Ångström, Zoë","102","S102","zoe","Section B","","",""\n'
    '"Hopper, Grace","103","","grace","Section A","","",""\n'
    '"Gauss, Carl","104","S104","carl","Section B","","",""\n'
    '"Lee, Dan","105","S105","dan","Section A","","",""\n'
    '"Student, Test","999999","","","Section A","","",""\n')
TIMES = ("user_id,submitted_at\n"
         "101,2025-10-01T16:00:00Z\n"        # ada: an hour early
         "103,2025-10-03T18:00:00Z\n"        # grace: 2 days 1 hour late -> 3 started days
         "102,2025-10-02T12:00:00Z\n"        # zoe: 19 hours late, but 2 days' extension
         "999,2025-10-01T12:00:00Z\n")       # off the roster, on time; dan has no row
# what the course's policy (10 % of the points earned per started day) must give, worked out here
EXPECTED = {  # student: (raw score, penalty)
    "ada": (10.0, 0.0), "grace": (10.0, 3.0), "zoe": (10.0, 0.0), "dan": (8.0, 0.0),
    "999": (5.0, 0.0), "eve": (4.0, 0.0),
}
GRADED_FOR_REAL = ["grace", "zoe"]


def _gradebook(root):
    from nbgrader.api import Gradebook

    return Gradebook(layout.db_url(root), layout.load_config(root).CourseDirectory.course_id)


def record_scores(root, assignment, student, fraction, timestamp=None):
    """Write a submission's scores with nbgrader's Gradebook API, without grading it: every
    test cell gets ``fraction`` of its points; its files go to autograded/ as autograde's would."""
    submitted = root / "submitted" / student / assignment
    if submitted.is_dir():
        shutil.copytree(submitted, root / "autograded" / student / assignment)
    with _gradebook(root) as gb:
        gb.update_or_create_student(student)
        sub = gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        for nb in sub.notebooks:
            for grade in nb.grades:
                grade.auto_score, grade.needs_manual_grade = grade.max_score * fraction, False
        gb.db.commit()


def _timestamp(root, student):
    from nbgrader.utils import parse_utc

    text = (root / "submitted" / student / A / "timestamp.txt").read_text().strip()
    return parse_utc(text) if text else None


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    root = synthetic.make_course(tmp_path_factory.mktemp("lms_term"), gradebook=True)
    config = layout.load_config(root)
    (root / "canvas_export.csv").write_text(CANVAS_EXPORT)
    roster.import_roster(root, root / "canvas_export.csv")
    layout.ensure_gradebook(root, config)
    with _gradebook(root) as gb:
        gb.update_or_create_assignment(A, duedate=DUE)
    (root / "extensions.csv").write_text(f"student,assignment,extra\nzoe,{A},2 days\n")
    instructor.import_extensions(root, root / "extensions.csv")

    good = nbformat.writes(synthetic.answered(root, A, A))
    download = root / "submissions.zip"
    with zipfile.ZipFile(download, "w") as z:
        z.writestr(f"lovelaceada_101_9001_{NB}", good)
        z.writestr(f"hoppergrace_LATE_103_9003_{NB}", good)
        z.writestr(f"angstromzoe_LATE_102_9002_{NB}", good)
        z.writestr(f"leedan_LATE_105_9005_{NB}", good)
        z.writestr(f"someonenew_999_9009_{NB}", good)
        z.writestr("gausscarl_104_9004_notes.pdf", b"%PDF-1.4")
    (root / "times.csv").write_text(TIMES)
    collected = lms.collect(root, download, A, times_path=root / "times.csv")

    graded = autograde.Grading(root, jobs=1, budget=CLASS_BUDGET, call_timeout=10).run(
        students=GRADED_FOR_REAL, progress=False)
    merged = _gradebook_numbers(root)  # as the merge wrote them, before anything else runs
    for student in ("ada", "dan", "999"):
        record_scores(root, A, student, EXPECTED[student][0] / 10, _timestamp(root, student))
    record_scores(root, A, "eve", 0.4, DUE)  # handed in through the exchange, on no roster
    exported = report.export(root, quiet=True)
    api = instructor._api(root)
    for student in GRADED_FOR_REAL:
        assert api.generate_feedback(A, student)["success"]
    return root, collected, graded, exported, merged


def _gradebook_numbers(root):
    with _gradebook(root) as gb:
        return {s.student.id: (s.score, s.late_submission_penalty, s.timestamp) for s in gb.assignment_submissions(A)}


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_every_file_is_collected_or_skipped_with_its_reason(term):
    root, collected, graded, *_ = term
    assert set(collected.collected) == {"ada", "grace", "zoe", "dan", "999"}
    assert collected.skipped == [("gausscarl_104_9004_notes.pdf", "not a notebook (.pdf)")]
    assert graded["graded"] == 2 and graded["needs_attention"] == 0
    warnings = " ".join(collected.warnings)
    assert "someonenew_999_9009" in warnings and "not on the roster" in warnings
    assert "1 submission(s) without a submission time" in warnings  # dan's
    info = lms.collected_info(root, A)
    assert info["grace"][0]["time"] == "2025-10-03T18:00:00" and info["grace"][0]["time_source"] == "times.csv, row 3"
    assert info["dan"][0]["time_status"] == "unknown" and "LATE" in info["dan"][0]["time_source"]
    # nbgrader needs a time (its formgrader fails on an empty one): the due date, so it is not late
    assert (root / "submitted" / "dan" / A / "timestamp.txt").read_text().startswith("2025-10-01 17:00:00")


def test_the_gradebook_holds_the_policys_penalties_from_each_students_due_date(term):
    root, *_ = term
    numbers = _gradebook_numbers(root)
    assert {s: (raw, penalty) for s, (raw, penalty, _) in numbers.items()} == pytest.approx(EXPECTED)
    # zoe is 19 hours late for the assignment (10 % without her extension), on time for hers
    assert numbers["zoe"][2] - DUE == datetime.timedelta(hours=19)


def test_the_merge_writes_the_penalty_the_grading_gave_from_each_students_due_date(term):
    """Computed once, where nbgrader grades (the worker, given the student's extension), and
    written by the merge as it is: nothing after it has to correct it."""
    *_, merged = term
    assert {s: (merged[s][0], merged[s][1] or 0.0) for s in GRADED_FOR_REAL} == pytest.approx(
        {s: EXPECTED[s] for s in GRADED_FOR_REAL})


def test_grades_csv_and_the_canvas_csv_carry_the_gradebooks_numbers(term):
    root, *_ = term
    numbers = _gradebook_numbers(root)
    with open(root / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    for student, (raw, penalty, _) in numbers.items():
        assert float(rows[student]["raw_score"]) == pytest.approx(raw)
        assert float(rows[student]["late_submission_penalty"]) == pytest.approx(penalty)
        assert float(rows[student]["score"]) == pytest.approx(raw - penalty)
    assert rows["grace"]["days_late"] == "3" and rows["grace"]["late_time_source"] == "times.csv, row 3"
    assert rows["zoe"]["days_late"] == "0" and rows["zoe"]["extended_duedate"] == "2025-10-03 17:00:00"
    assert rows["dan"]["days_late"] == "" and rows["dan"]["late_time_source"].startswith("lateness unknown")
    assert rows["dan"]["timestamp"] == ""  # the due date stands in for it in nbgrader: no time to show
    assert rows["carl"]["status"] == "missing" and rows["carl"]["score"] == ""

    canvas = _rows(root / "grades_canvas.csv")
    by_id = {r[1]: r for r in canvas[2:]}
    for student, canvas_id in [("ada", "101"), ("grace", "103"), ("zoe", "102"), ("dan", "105"), ("999", "999")]:
        raw, penalty, _ = numbers[student]
        assert float(by_id[canvas_id][5]) == pytest.approx(raw - penalty), student
    assert by_id["104"][5] == ""  # carl handed nothing in: blank, which Canvas leaves alone


def test_the_canvas_csv_is_in_canvas_gradebook_import_format(term):
    """Canvas' import: Student, ID, SIS User ID, SIS Login ID, Section, then one column per
    assignment named "Name (Canvas id)", and the "Points Possible" row first."""
    root, *_ = term
    canvas = _rows(root / "grades_canvas.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", CANVAS_COLUMN]
    assert canvas[1] == ["    Points Possible", "", "", "", "", "10"]
    assert all(len(r) == len(canvas[0]) for r in canvas)
    by_id = {r[1]: r[:5] for r in canvas[2:]}
    assert by_id["101"] == ["Lovelace, Ada", "101", "S101", "ada", "Section A"]
    assert by_id["102"] == ["Ångström, Zoë", "102", "S102", "zoe", "Section B"]
    assert by_id["103"] == ["Hopper, Grace", "103", "", "grace", "Section A"]
    assert by_id["999"] == ["999", "999", "", "", ""]  # off the roster: the Canvas id of the download
    assert "999999" not in by_id  # Canvas' test student is no student
    assert all(r[1] or r[2] or r[3] for r in canvas[2:])  # every row has an id Canvas matches by
    assert "eve" not in {r[0] for r in canvas[2:]}  # nothing Canvas could match her by


def test_off_roster_students_are_listed_with_what_to_do(term):
    root, _, _, exported, _ = term
    todo = dict(exported["table"].off_roster)
    assert set(todo) == {"999", "eve"}
    assert "Canvas ID 999 from the download" in todo["999"] and "make roster" in todo["999"]
    assert "NOT in grades_canvas.csv" in todo["eve"] and "lms_user_id" in todo["eve"]
    part = (root / "reports" / "grade_report.md").read_text().split("## Not on the roster")[1].split("\n## ")[0]
    assert "| 999 |" in part and "| eve |" in part


def test_the_report_shows_the_same_late_penalties_extension_and_unknown_lateness(term):
    root, *_ = term
    text = (root / "reports" / "grade_report.md").read_text()
    students = text.split("## Students")[1].split("\n## ")[0]
    for student, (raw, penalty, _) in _gradebook_numbers(root).items():  # each total is the gradebook's
        assert re.search(rf"^\| {student} \| [^|]* \| {report.score_text(raw - penalty)} / 10( \(late\))? \|",
                         students, re.M), student
    assert "| grace | Grace Hopper | 7 / 10 (late) |" in students
    assert "| zoe | Zoë Ångström | 10 / 10 |" in students
    late_part = text.split("## Late\n")[1].split("\n## ")[0]
    assert "| grace | 05_scaled_attention | 2025-10-03 18:00 UTC | 2025-10-01 17:00 UTC | 2 days 1 hour | 3 | 7 / 10 |" in late_part
    assert "| zoe |" not in late_part and "| dan |" not in late_part
    unknown = text.split("## Lateness unknown")[1].split("\n## ")[0]
    assert "| dan |" in unknown and "TIMES=" in unknown and "| grace |" not in unknown
    extended = text.split("## Extensions")[1].split("\n## ")[0]
    assert "| zoe | 05_scaled_attention | 2025-10-01 17:00 UTC | 2025-10-03 17:00 UTC |" in extended


def _feedback_text(root, student):
    page = (root / "feedback" / student / A / f"{A}.html").read_text()
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_feedback_shows_the_same_penalty_and_honours_the_extension(term):
    root, *_ = term
    grace = _feedback_text(root, "grace")
    assert "Handed in late. Submitted 2025-10-03 18:00 UTC, 2 days 1 hour after the due date" in grace
    assert "It cost 3 of the 10 points earned" in grace and "Late submission penalty (Score: -3.0)" in grace
    zoe = _feedback_text(root, "zoe")
    assert "Handed in late" not in zoe and "Late submission penalty" not in zoe


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def formgrader(term):
    """The course served by a real Jupyter server with nbgrader's formgrader."""
    root = term[0]
    port, token = _free_port(), "formgrader-test"
    log = open(root / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyter", "server", "--no-browser", f"--port={port}",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root"],
                            cwd=root, stdout=log, stderr=subprocess.STDOUT)

    def get(path):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?token={token}", timeout=60) as r:
            return r.read().decode()

    deadline = time.monotonic() + 180
    while True:
        try:
            get("/api/status")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Jupyter server did not start:\n" + (root / "server.log").read_text()[-2000:])
            time.sleep(0.5)
    yield get
    proc.terminate()
    proc.wait(timeout=60)
    log.close()


def test_the_formgrader_shows_the_score_before_the_penalty_and_says_so(term, formgrader):
    """README: the formgrader lists each submission's score before the late penalty (nbgrader's
    formgrader has no penalty column) and its timestamp, and every page says so; the penalty
    and the final score are in the feedback, the CSV files and the report. The pages are
    served by the course's formgrader (grader/instructor/formgrader.py) with nbgrader's JSON."""
    root, *_ = term
    numbers = _gradebook_numbers(root)
    shown = {s["student"]: s for s in json.loads(formgrader(f"/formgrader/api/submissions/{A}"))}
    for student, (raw, penalty, stamp) in numbers.items():
        assert shown[student]["score"] == pytest.approx(raw), student
        assert not any("penalty" in key for key in shown[student])
        assert shown[student]["timestamp"] == (stamp.isoformat() if stamp else None)
    assert shown["grace"]["score"] == 10.0 and numbers["grace"][1] == 3.0  # 7 everywhere else
    for path in (f"/formgrader/manage_submissions/{A}", "/formgrader/gradebook", "/formgrader/manage_students"):
        page = formgrader(path)
        assert "course-late-note" in page and "before the late penalty" in page, path
    from grader.instructor.formgrader import CourseAPI
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = layout.load_config(root)
    stock = NbGraderAPI(CourseDirectory(config=config), config=config)
    assert json.loads(formgrader(f"/formgrader/api/submissions/{A}")) == json.loads(json.dumps(stock.get_submissions(A)))
    assert f"answered by {CourseAPI.__name__}" in (root / "server.log").read_text()  # the course's, not stock


@pytest.mark.parametrize("configured, known, expected", [
    ({}, [CANVAS_COLUMN, "Quiz 1 (4568)"], CANVAS_COLUMN),               # the Canvas export's own column
    ({A: "Attention (99)"}, [CANVAS_COLUMN], "Attention (99)"),          # c.GradeReport.canvas_columns first
    ({}, ["Quiz 1 (4568)"], A),                                          # unknown to Canvas: it creates it
    ({}, [CANVAS_COLUMN, "05 scaled_attention (4570)"], A),              # two fit: none is guessed
])
def test_canvas_columns_are_named_as_canvas_names_them(configured, known, expected):
    assert report.canvas_column(A, configured, known) == expected
