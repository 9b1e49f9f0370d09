"""Collecting LMS downloads: the namings of Canvas, Moodle and Blackboard, resubmissions,
late files, the roster, and the count of what was skipped and why."""
import datetime
import zipfile

import nbformat
import pytest

from grader import lms, synthetic

A = "05_scaled_attention"
NB = f"{A}.ipynb"
DUE = datetime.datetime(2025, 10, 1, 17, 0, 0)


def _parse(path, tz="UTC"):
    return lms.parse(path, [NB], tz)


@pytest.mark.parametrize("path, lms_name, lms_id, name", [
    (f"lovelaceada_12345_678901_{NB}", "canvas", "12345", "lovelaceada"),
    (f"lovelaceada_LATE_12345_678901_{NB}", "canvas", "12345", "lovelaceada"),
    (f"lovelaceada_late_12345_678901_{NB}", "canvas", "12345", "lovelaceada"),
    (f"LATE_12345_678901_{NB}", "canvas", "12345", ""),                      # anonymous grading
    (f"Ada Lovelace_4242_assignsubmission_file/{NB}", "moodle", "4242", "Ada Lovelace"),
    (f"Ada Lovelace_4242_assignsubmission_file_/{NB}", "moodle", "4242", "Ada Lovelace"),
    (f"Ada Lovelace_4242_assignsubmission_file_{NB}", "moodle", "4242", "Ada Lovelace"),
    (f"Homework 5_alovelace_attempt_2025-10-03-17-45-12_{NB}", "blackboard", "alovelace", ""),
    (f"ada_{NB}", "plain", "ada", ""),
    (f"grace_hopper_{NB}", "plain", "grace_hopper", ""),                     # an id with an underscore
    (f"downloads/grace.hopper_{NB}", "plain", "grace.hopper", ""),
    (f"12345_{NB}", "plain", "12345", ""),
])
def test_each_lms_naming_gives_the_student_and_the_notebook(path, lms_name, lms_id, name):
    found, reason = _parse(path)
    assert reason is None
    assert (found.lms, found.lms_id, found.name, found.notebook) == (lms_name, lms_id, name, NB)


def test_canvas_late_flag_and_resubmission_suffix():
    first, _ = _parse(f"lovelaceada_12345_678901_{NB}")
    again, _ = _parse(f"lovelaceada_LATE_12345_678950_{A}-2.ipynb")
    assert (first.late, first.version, first.file_id) == (False, 0, 678901)
    assert (again.late, again.version, again.file_id, again.notebook) == (True, 2, 678950, NB)


def test_blackboard_time_comes_from_the_file_name_in_the_configured_zone():
    found, _ = _parse(f"HW5_alovelace_attempt_2025-10-03-17-45-12_{NB}", tz="Europe/Berlin")
    assert found.time == datetime.datetime(2025, 10, 3, 15, 45, 12)  # CEST is UTC+2
    assert found.time_source == "Blackboard file name"


@pytest.mark.parametrize("path, words", [
    ("HW5_alovelace_attempt_2025-10-03-17-45-12.txt", "receipt"),
    ("lovelaceada_12345_678901_report.pdf", "not a notebook (.pdf)"),
    ("Ada Lovelace_4242_assignsubmission_onlinetext_onlinetext.html", "onlinetext"),
    (f"__MACOSX/._ada_{NB}", "operating system"),
    ("homework.ipynb", "matches no LMS naming"),
    (f"=cmd_{NB}", "matches no LMS naming"),
])
def test_what_is_not_a_submission_says_why(path, words):
    found, reason = _parse(path)
    assert found is None and words in reason


def _settings(**kw):
    return lms.LmsCollect(**kw)


def test_the_latest_resubmission_wins_and_the_others_are_listed_as_skipped():
    names = [f"lovelaceada_12345_100_{NB}", f"lovelaceada_LATE_12345_300_{A}-2.ipynb",
             f"lovelaceada_12345_200_{A}-1.ipynb", f"hopper_777_400_{NB}", "notes.txt"]
    result = lms.plan(names, [NB], lms.Roster([]), _settings(), due=DUE)
    assert result.n_collected == 2 and len(result.skipped) == 3
    (kept,) = result.collected["12345"]
    assert kept.path == f"lovelaceada_LATE_12345_300_{A}-2.ipynb" and kept.late
    reasons = dict(result.skipped)
    assert "earlier version" in reasons[f"lovelaceada_12345_100_{NB}"]
    assert "earlier version" in reasons[f"lovelaceada_12345_200_{A}-1.ipynb"]
    assert "not a notebook" in reasons["notes.txt"]
    # the LMS gives no time: a late file is dated just after the due date, others at it
    assert kept.time == DUE + datetime.timedelta(seconds=1)
    assert result.collected["777"][0].time == DUE


def test_ids_go_through_the_roster_by_lms_id_then_by_name():
    roster = lms.Roster([
        {"id": "ada", "first_name": "Ada", "last_name": "Lovelace", "lms_user_id": "12345"},
        {"id": "grace", "first_name": "Grace", "last_name": "Hopper", "lms_user_id": None},
    ])
    names = [f"lovelaceada_12345_100_{NB}", f"Grace Hopper_88_assignsubmission_file/{NB}",
             f"turingalan_999_500_{NB}"]
    result = lms.plan(names, [NB], roster, _settings(), due=DUE)
    assert set(result.collected) == {"ada", "grace", "999"}
    assert any("not on the roster" in w for w in result.warnings)


def test_two_lms_users_never_share_one_student_id():
    names = [f"Jo Smith_11_assignsubmission_file/{NB}", f"Jo Smith_12_assignsubmission_file/{NB}"]
    result = lms.plan(names, [NB], lms.Roster([]), _settings(), due=DUE)
    assert list(result.collected) == ["jo_smith"]
    assert "would get the student id" in result.skipped[0][1]


def test_zip_entry_times_only_when_asked():
    names = [f"ada_{NB}"]
    times = {names[0]: datetime.datetime(2025, 10, 2, 12, 0)}
    off = lms.plan(names, [NB], lms.Roster([]), _settings(), DUE, times)
    on = lms.plan(names, [NB], lms.Roster([]), _settings(zip_times=True), DUE, times)
    assert off.collected["ada"][0].time == DUE
    assert on.collected["ada"][0].time == datetime.datetime(2025, 10, 2, 12, 0)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return synthetic.make_course(tmp_path_factory.mktemp("lms"))


def test_collect_writes_nbgraders_layout_and_reports_every_file(course, tmp_path, capsys):
    nb = nbformat.writes(synthetic.answered(course, A, A))
    archive = tmp_path / "canvas.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"lovelaceada_LATE_12345_300_{A}-1.ipynb", nb)
        z.writestr(f"lovelaceada_12345_200_{NB}", "{}")
        z.writestr(f"Homework 5_grace_attempt_2025-10-03-17-45-12_{NB}", nb)
        z.writestr("Homework 5_grace_attempt_2025-10-03-17-45-12.txt", "Name: Grace Hopper (grace)")
        z.writestr("browndan_104_9004_report.pdf", b"%PDF")
    result = lms.collect(course, archive, A)
    out = capsys.readouterr().out
    assert "collected 2 file(s) for 2 student(s), skipped 3 file(s)" in out
    assert out.count("SKIPPED") == 3 and "report.pdf: not a notebook" in out
    folder = course / "submitted" / "12345" / A
    assert (folder / NB).read_text() == nb                     # the resubmission, not the older file
    assert (folder / "submission_secret.txt").read_text()      # release_feedback needs both
    assert (folder / "timestamp.txt").exists()
    assert (course / "submitted" / "grace" / A / "timestamp.txt").read_text().startswith("2025-10-03 17:45:12")
    assert (course / "downloaded" / A / "archive" / "canvas.zip").exists()  # the download is kept
    assert lms.collected_info(course, A)["12345"][0]["late"] is True
    assert result.n_collected == 2


@pytest.mark.parametrize("content, words", [(b"not a zip", "is not a zip archive")])
def test_a_file_that_is_not_a_zip_is_refused_with_a_reason(course, tmp_path, content, words):
    bad = tmp_path / "download.zip"
    bad.write_bytes(content)
    with pytest.raises(SystemExit, match=words):
        lms.collect(course, bad, A)
    with pytest.raises(SystemExit, match="unknown assignment"):
        lms.collect(course, bad, "07_nope")


def test_the_assignment_is_found_from_the_notebook_names(course, tmp_path):
    archive = tmp_path / "moodle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"Ada Lovelace_4242_assignsubmission_file/{NB}", "{}")
        z.writestr("Ada Lovelace_4242_assignsubmission_onlinetext_onlinetext.html", "<p>hi</p>")
    assert lms.guess_assignment(course, archive) == A
    with zipfile.ZipFile(archive, "a") as z:
        z.writestr("Bo Li_77_assignsubmission_file/04_single_head.ipynb", "{}")
    with pytest.raises(SystemExit, match="several assignments"):
        lms.guess_assignment(course, archive)
