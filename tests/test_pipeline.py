"""The instructor pipeline end to end, on a small synthetic class built from the solutions."""
import csv
import html
import os
import re
import signal
import subprocess
import sys
import time
import zipfile

import nbformat
import pytest

from grader import autograde, instructor, pipeline, synthetic

A = "05_scaled_attention"  # 5 test cells, 1 point each
BUDGET = 15
EXPECTED = {  # variant -> exact score
    "correct": 5, "softmax_wrong_dim": 2, "missing_scale": 2, "exception": 0,
    "infinite_loop": 0, "stub": 0, "deleted_test_cell": 5, "edited_test_cell": 5,
    "stderr_warning": 5,
}
BROKEN = {  # variant -> words the reason must contain
    "kernel_death": "kernel died", "tampered_metadata": "tampered", "invalid_json": "not a readable notebook",
    "empty_notebook": "empty", "missing_notebook": "missing", "renamed_notebook": "renamed",
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = synthetic.make_course(tmp_path_factory.mktemp("course"))
    for variant in [*EXPECTED, *BROKEN]:
        synthetic.make_submission(root, variant, A, variant)
    grading = autograde.Grading(root, jobs=2, budget=BUDGET)
    summary = grading.run(progress=False)
    instructor.export(root)
    instructor.feedback(root)
    return root, summary


def _db_scores(root):
    from nbgrader.api import Gradebook

    config = pipeline.load_config(root)
    with Gradebook(pipeline.db_url(root), config.CourseDirectory.course_id) as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(A)}


def test_every_variant_gets_exactly_its_expected_score(course):
    root, summary = course
    assert summary == {"graded": len(EXPECTED), "needs_attention": len(BROKEN), "skipped": 0}
    assert _db_scores(root) == {k: float(v) for k, v in EXPECTED.items()}


def test_broken_submissions_need_attention_with_their_reason(course):
    root, _ = course
    attention = {s: e["reason"] for s, a, e in pipeline.Status(root).attention()}
    assert set(attention) == set(BROKEN)
    for student, words in BROKEN.items():
        assert words in attention[student], attention[student]


def test_export_lists_broken_submissions_and_never_a_silent_zero(course):
    root, _ = course
    with open(root / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == A}
    assert list(rows[next(iter(rows))])[:11] == [
        "assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
        "raw_score", "late_submission_penalty", "score", "max_score"]  # nbgrader's columns first
    for student in BROKEN:
        assert rows[student]["score"] == "" and BROKEN[student] in rows[student]["needs_attention"]
    for student, score in EXPECTED.items():
        assert float(rows[student]["score"]) == score and rows[student]["needs_attention"] == ""


def test_report_shows_attention_pass_rates_and_misconceptions(course):
    root, _ = course
    report = (root / "reports" / "grade_report.md").read_text()
    for student in BROKEN:
        assert f"| {student} | {A} |" in report
    assert "softmax over the wrong dimension" in report and "no scale" in report
    assert "| test_sdpa_no_mask | 4 | 9 |" in report  # correct, deleted, edited, stderr
    for png in ("score_histogram.png", "pass_rate.png", "misconceptions.png"):
        assert (root / "reports" / png).stat().st_size > 1000


def test_feedback_has_no_hidden_test_source(course):
    root, _ = course
    for student in EXPECTED:
        page = root / "feedback" / student / A / f"{A}.html"
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert "hidden=True" not in text and "HIDDEN TESTS" not in text, student
    text = html.unescape(re.sub(r"<[^>]+>", "", (root / "feedback" / "softmax_wrong_dim" / A / f"{A}.html").read_text()))
    assert "Likely mistake: softmax over the wrong dimension" in text


def test_a_hanging_submission_costs_one_notebook_budget(course):
    root, _ = course
    entry = pipeline.Status(root).get("infinite_loop", A)
    assert entry["budget_exceeded"]
    assert entry["elapsed"] < BUDGET + 15  # not 60 s x 7 cells


def test_deleted_test_cell_is_restored_and_graded(course):
    root, _ = course
    nb = nbformat.read(root / "autograded" / "deleted_test_cell" / A / f"{A}.ipynb", as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert "test_sdpa_output" in ids


def _run_cli(root, *args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "grader.autograde", "--root", str(root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)


def test_interrupted_run_resumes_to_a_consistent_gradebook(tmp_path):
    root = synthetic.make_course(tmp_path / "course")
    students = [f"s{i}" for i in range(6)]
    for s in students:
        synthetic.make_submission(root, s, A, "correct")
    proc = _run_cli(root, "--jobs", "2")
    status_file = root / "autograded" / ".status.json"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(pipeline.Status(root).data) < 2:
        time.sleep(0.5)
    pipeline.kill_tree(proc.pid)  # killed half-way, workers and kernels included
    proc.wait()
    done_before = len(pipeline.Status(root).data)
    assert 2 <= done_before < len(students)

    proc = _run_cli(root, "--jobs", "2")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert f"{len(students) - done_before} graded" in out
    assert "submissions [" in err  # the progress bar: done/total [elapsed<remaining]
    assert _db_scores(root) == {s: 5.0 for s in students}
    assert not list((root / "autograded").glob("*/.*.incoming"))

    # unchanged submissions are skipped; a changed one is regraded, a broken one loses its grade
    synthetic.make_submission(root, "s0", A, "missing_scale")
    synthetic.make_submission(root, "s1", A, "invalid_json")
    out, err = _run_cli(root, "--jobs", "2").communicate(timeout=300)
    assert "1 graded, 1 need attention, 4 unchanged and skipped" in out
    scores = _db_scores(root)
    assert scores["s0"] == 2.0 and "s1" not in scores
    assert status_file.exists()


def test_zip_collect_uses_the_documented_file_name_pattern(tmp_path):
    root = synthetic.make_course(tmp_path / "course")
    archive = tmp_path / "lms.zip"
    nb = synthetic.answered(root, A, A)
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"downloads/ada_{A}.ipynb", nbformat.writes(nb))
        z.writestr(f"grace.hopper_{A}.ipynb", nbformat.writes(nb))
    instructor.collect(root, archive, A)
    for student in ("ada", "grace.hopper"):
        assert (root / "submitted" / student / A / f"{A}.ipynb").exists()
