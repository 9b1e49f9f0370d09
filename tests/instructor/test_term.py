"""One small term, as an instructor runs it: a roster, a due date, an LMS download with a
late resubmission, grading, a manual grade and extra credit in the gradebook, the exports,
feedback released through the exchange; and the exchange route as students use it."""
import csv
import html
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from support.classes import CLASS_ASSIGNMENT as A, CLASS_BUDGET
from grader.instructor import cli as instructor
from grader.instructor import lms, report, roster
from support import synthetic
from grader.grading import autograde, layout
from support.paths import ROOT

pytestmark = pytest.mark.xdist_group("term")
NB = f"{A}.ipynb"
REPO = ROOT
EVIL = "Likely mistake: =1+2 ![x](http://evil.example/x.png) | a | b <script>alert(1)</script> \u2014 boom"
ROSTER = ('id,first_name,last_name,email,lms_user_id\n'
          'ada,Ada,Lovelace,ada@example.org,101\n'
          'bob,Bob,"=HYPERLINK(""http://evil.example"")",,102\n'
          'carl,Carl,Gauss,,103\n'
          'eve,Eve,"Example =1+2 ![x](http://evil.example/x.png) | a <script>alert(1)</script>",,106\n')


def _nbgrader(root, *args):
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _gradebook(root):
    from nbgrader.api import Gradebook

    return Gradebook(layout.db_url(root), layout.load_config(root).CourseDirectory.course_id)


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    root = synthetic.make_course(tmp_path_factory.mktemp("term"))
    (root / "roster.csv").write_text(ROSTER)
    roster.import_roster(root, root / "roster.csv")
    _nbgrader(root, "db", "assignment", "add", A, "--duedate=2025-10-01 17:00:00 UTC")
    good = nbformat.writes(synthetic.answered(root, A, A))
    wrong = nbformat.writes(synthetic.VARIANTS["softmax_wrong_dim"](root, A, A))
    evil = nbformat.writes(synthetic.answered(
        root, A, A, edit=lambda gid, src: synthetic._body(src, f"raise ValueError({EVIL!r})")))
    download = root / "canvas.zip"
    with zipfile.ZipFile(download, "w") as z:
        z.writestr(f"lovelaceada_101_9001_{NB}", good)
        z.writestr(f"hyperlinkhttpevilexamplebob_LATE_102_9002_{NB}", good)
        z.writestr(f"hyperlinkhttpevilexamplebob_LATE_102_9003_{A}-1.ipynb", wrong)  # the later one
        z.writestr(f"exampleeve_106_9006_{NB}", evil)          # raises EVIL in a solution cell
        z.writestr("gausscarl_103_9007_notes.pdf", b"%PDF-1.4")                     # carl: no notebook
    (root / "times.csv").write_text("user_id,submitted_at\n101,2025-10-01T12:00:00Z\n"
                                    "102,2025-10-02T10:00:00Z\n106,2025-10-01T16:59:00Z\n")  # bob: 17 hours late
    collected = lms.collect(root, download, A, times_path=root / "times.csv")
    graded = autograde.Grading(root, jobs=1, budget=CLASS_BUDGET, call_timeout=10).run(progress=False)
    with _gradebook(root) as gb:  # what an instructor does in the formgrader
        gb.find_grade("test_sdpa_causal", A, A, "ada").manual_score = 0.0
        gb.find_grade("test_sdpa_causal", A, A, "bob").extra_credit = 1.0
        gb.db.commit()
    exported = report.export(root, quiet=True)
    instructor.feedback(root)
    instructor.release_feedback(root)
    return root, collected, graded, exported


def test_the_download_is_collected_with_the_latest_resubmission(term):
    root, collected, graded, _ = term
    assert set(collected.collected) == {"ada", "bob", "eve"}
    assert dict(collected.skipped).keys() == {f"hyperlinkhttpevilexamplebob_LATE_102_9002_{NB}",
                                              "gausscarl_103_9007_notes.pdf"}
    assert graded["graded"] == 3 and graded["needs_attention"] == 0


def test_report_and_exports_agree_with_the_gradebook_after_an_override_and_a_penalty(term):
    root, _, _, exported = term
    with _gradebook(root) as gb:
        final = {s.student.id: (s.score, s.late_submission_penalty, max(0.0, s.score - s.late_submission_penalty))
                 for s in gb.assignment_submissions(A)}
    assert final["ada"] == (9.0, 0.0, 9.0)            # the manual 0 replaced an autograded point
    assert final["bob"][:2] == (3.0, pytest.approx(0.3))  # 2 + 1 extra credit, then 10 % for one started day
    with open(root / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    for student, (raw, penalty, score) in final.items():
        assert float(rows[student]["raw_score"]) == pytest.approx(raw)
        assert float(rows[student]["late_submission_penalty"]) == pytest.approx(penalty)
        assert float(rows[student]["score"]) == pytest.approx(score)
    assert rows["ada"]["manual_grade"] == "yes" and rows["bob"]["extra_credit"] == "1"
    assert rows["bob"]["days_late"] == "1" and rows["bob"]["late_time_source"] == "times.csv, row 3"
    text = (root / "reports" / "grade_report.md").read_text()
    students = text.split("## Students")[1].split("##")[0]
    assert "| ada | Ada Lovelace | 9 / 10 (manual) | 9 / 10 | 90% |" in students
    assert re.search(r"\| bob \| .* \| 2\.7 / 10 \(late, \+extra\) \| 2\.7 / 10 \| 27% \|", students)
    late_part = text.split("## Late")[1].split("##")[0]
    assert "| bob | 05_scaled_attention |" in late_part and "| 0.3 | 2.7 / 10 |" in late_part
    assert "10% of the points earned" in late_part


def test_before_the_due_date_nothing_handed_in_is_not_due_yet_not_missing(term):
    """Read the day before the due date (the assignment counts already: files were collected):
    carl, with nothing handed in, is "not due yet", out of his total, the missing list and the
    struggling list; after the due date the same gradebook says missing (the test below)."""
    import datetime

    root, *_ = term
    table = report.gather(root, now=datetime.datetime(2025, 9, 30, 12, 0))
    carl = next(r for r in table.rows if r.student == "carl")
    assert carl.status == report.NOT_DUE and report._row_text(carl) == "not due yet"
    assert table.totals()["carl"]["possible"] == 0 and table.totals()["carl"]["percent"] is None
    found = report.lists(table)
    assert "carl" not in found["missing"] and "carl" not in [s for s, *_ in found["struggling"]]
    after = report.gather(root, now=datetime.datetime(2025, 10, 2, 12, 0))
    assert next(r for r in after.rows if r.student == "carl").status == report.MISSING


def test_a_student_with_nothing_handed_in_is_missing_not_zero(term):
    root, *_ = term
    with open(root / "grades.csv", newline="") as f:
        carl = next(r for r in csv.DictReader(f) if r["student_id"] == "carl")
    assert carl["status"] == "missing" and carl["score"] == "" and carl["raw_score"] == ""
    text = (root / "reports" / "grade_report.md").read_text()
    assert "| carl | 05_scaled_attention |" in text.split("## Missing")[1].split("##")[0]
    assert "| carl | Carl Gauss | missing |" in text
    hist = text.split("## Score histogram")[1].split("##")[0]
    assert "4 students" in hist  # the whole roster, carl included
    with open(root / "grades_canvas.csv", newline="") as f:
        canvas = {r[1]: r for r in csv.reader(f)}
    assert canvas["103"][5] == ""  # carl


def test_canvas_csv_has_canvas_gradebook_import_shape(term):
    root, *_ = term
    with open(root / "grades_canvas.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A]
    assert rows[1] == ["    Points Possible", "", "", "", "", "10"]
    body = {r[1]: r for r in rows[2:]}
    assert set(body) == {"101", "102", "103", "106"} and all(len(r) == 6 for r in rows)
    assert body["101"][:5] == ["Lovelace, Ada", "101", "", "", ""] and body["101"][5] == "9"  # no SIS ids on this roster
    assert body["102"][5] == "2.7"
    assert body["102"][0].startswith("'=")  # a name never becomes a spreadsheet formula


def test_student_text_is_escaped_in_the_reports_and_csv(term):
    root, *_ = term
    text = (root / "reports" / "grade_report.md").read_text()
    misconceptions = text.split("## Misconceptions")[1].split("##")[0]
    assert "=1+2" not in misconceptions and "evil" not in misconceptions  # raised text names no mistake
    assert "Example =1+2" in text  # the student's name from the roster is shown ...
    assert "![x](http" not in text and "<script>" not in text  # ... as text, not an image or HTML
    for line in text.splitlines():
        if line.startswith("|") and "=1+2" in line:
            unescaped = re.sub(r"\\\|", "", line).count("|")
            header = text[:text.index(line)].rsplit("\n|---", 1)[0].rsplit("\n", 1)[-1]
            assert unescaped == header.count("|"), line  # no extra table columns
    page = (root / "reports" / "grade_report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page and "src='http" not in page
    for name in ("grades.csv", "grades_canvas.csv"):
        with open(root / name, newline="") as f:
            for row in csv.reader(f):
                assert not any(v and v[0] in "=+-@" for v in row), row


def test_release_feedback_works_for_lms_submissions(term):
    root, *_ = term
    released = list((root / "exchange" / "self-attention" / "feedback").glob("*.html"))
    assert len(released) == 3
    page = html.unescape(re.sub(r"<[^>]+>", " ", (root / "feedback" / "bob" / A / f"{A}.html").read_text()))
    assert "Handed in late" in page and "Submitted 2025-10-02 10:00 UTC, 17 hours after the due date" in page
    assert "Late submission penalty (Score: -0.3)" in " ".join(page.split())


@pytest.mark.usefixtures("commands_share_the_template")
def test_plain_nbgrader_autograde_applies_the_course_late_policy(tmp_path):
    """The policy is nbgrader's LateSubmissionPlugin: `nbgrader autograde` itself uses it."""
    root = synthetic.make_course(tmp_path / "course")
    _nbgrader(root, "db", "assignment", "add", A, "--duedate=2025-10-01 17:00:00 UTC")
    _nbgrader(root, "generate_assignment", A, "--force")
    folder = synthetic.make_submission(root, "ada", A, "correct")
    (folder / "timestamp.txt").write_text("2025-10-03 18:00:00.000000 UTC")  # 2 days 1 hour late
    _nbgrader(root, "autograde", A, "--student", "ada", "--create")
    with _gradebook(root) as gb:
        sub = gb.find_submission(A, "ada")
        assert sub.score == 10.0 and sub.late_submission_penalty == pytest.approx(3.0)  # 3 days x 10 %


def test_assignment_names_several_as_make_release_takes_them(tmp_path, capsys):
    """ASSIGNMENT="01_bag_of_words 05_scaled_attention" releases both to the exchange; a name
    the course lacks stops the command naming it, before anything is released; an LMS download
    takes one name."""
    root = synthetic.make_course(tmp_path / "course")
    with pytest.raises(SystemExit, match="unknown assignment '07_nope'"):
        instructor.main(["release-exchange", "--assignment", f"{A} 07_nope", "--root", str(root)])
    outbound = root / "exchange" / "self-attention" / "outbound"
    assert not outbound.exists() or not any(outbound.iterdir())
    instructor.main(["release-exchange", "--assignment", f"01_bag_of_words {A}", "--root", str(root)])
    out = capsys.readouterr().out
    assert out.startswith("01_bag_of_words: released to ") and f"\n{A}: released to " in out, out
    assert (outbound / A / NB).exists() and (outbound / "01_bag_of_words" / "01_bag_of_words.ipynb").exists()
    with pytest.raises(SystemExit, match="an LMS download holds one assignment"):
        instructor.main(["collect", "--zip", str(tmp_path / "download.zip"), "--assignment",
                         f"01_bag_of_words {A}", "--root", str(root)])


def test_exchange_route_release_fetch_submit_collect(tmp_path, capsys):
    root = synthetic.make_course(tmp_path / "course")
    instructor.release_exchange(root, A)
    assert (root / "exchange" / "self-attention" / "outbound" / A / NB).exists()
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        f'c = get_config()\nc.Exchange.root = "{root / "exchange"}"\nc.CourseDirectory.course_id = "self-attention"\n')
    student = {"cwd": home, "env": {"HOME": str(home), "PATH": str(Path(sys.executable).parent)}}

    def run(*args):
        proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], capture_output=True, text=True, **student)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stderr

    assert f"self-attention {A}" in run("list")
    run("fetch_assignment", A)
    nbformat.write(synthetic.answered(root, A, A), home / A / NB)
    run("submit", A, "--student=ada")
    instructor.collect(root, assignment=A)
    assert f"{A}: 1 submission(s) in submitted/: 1 new, 0 replaced by a newer submission, 0 unchanged" \
        in capsys.readouterr().out
    folder = root / "submitted" / "ada" / A
    first = (folder / "timestamp.txt").read_text()
    assert (folder / NB).exists() and first

    run("submit", A, "--student=ada")  # handed in again: the newer submission replaces the first
    instructor.collect(root, assignment=A)
    out = capsys.readouterr().out
    assert "1 submission(s) in submitted/: 0 new, 1 replaced by a newer submission, 0 unchanged" in out, out
    assert "replaced: ada" in out and (folder / "timestamp.txt").read_text() != first
    instructor.collect(root, assignment=A)
    assert "0 new, 0 replaced by a newer submission, 1 unchanged" in capsys.readouterr().out


def test_make_clean_keeps_grades_and_clean_grades_asks(tmp_path):
    (tmp_path / "gradebook.db").write_text("grades")
    (tmp_path / "submitted" / "ada").mkdir(parents=True)
    dry = subprocess.run(["make", "-n", "-f", str(REPO / "Makefile"), "clean"], cwd=tmp_path,
                         capture_output=True, text=True).stdout
    assert "gradebook.db" not in dry and "submitted" not in dry
    refused = subprocess.run(["make", "-s", "-f", str(REPO / "Makefile"), "clean-grades"], cwd=tmp_path,
                             capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert refused.returncode != 0 and "CONFIRM=yes" in refused.stdout
    assert (tmp_path / "gradebook.db").exists() and (tmp_path / "submitted").exists()
    done = subprocess.run(["make", "-s", "-f", str(REPO / "Makefile"), "clean-grades", "CONFIRM=yes"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and not (tmp_path / "gradebook.db").exists()
