"""Collecting LMS downloads: the namings of Canvas, Moodle and Blackboard, resubmissions,
late files, the roster, and the count of what was skipped and why."""
import datetime
import zipfile

import nbformat
import pytest

from grader.instructor import lms, submission_times
from support import synthetic

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
    # the LMS gives no time: lateness is unknown (no fixed penalty), and the summary says what to do
    # nbgrader needs a time (its formgrader fails on an empty timestamp.txt): the due date, on time
    assert kept.time == DUE and result.collected["777"][0].time == DUE
    assert kept.time_status == "unknown" and kept.time_source.startswith(lms.UNKNOWN) and "LATE" in kept.time_source
    assert "LATE" not in result.collected["777"][0].time_source
    assert any("2 submission(s) without a submission time" in w and "TIMES=" in w for w in result.warnings)


def test_the_one_notebook_handed_in_under_another_name_is_collected_under_the_notebooks():
    """An assignment of one notebook: a student's only file, renamed by them and suffixed by the
    LMS on a resubmission, is collected as that notebook and said so; a student who handed in
    two names, one of them right, keeps both as they are (autograde grades the right one)."""
    names = [f"zoezoe_103_300_Scaled attention - final (2).ipynb", f"zoezoe_103_200_Scaled attention - final.ipynb",
             f"adaada_101_100_{NB}", "adaada_101_101_scratch.ipynb"]
    result = lms.plan(names, [NB], lms.Roster([]), _settings(), due=DUE)
    (zoe,) = result.collected["103"]
    assert zoe.notebook == NB and zoe.renamed_from == "Scaled attention - final.ipynb"
    assert zoe.path == "zoezoe_103_300_Scaled attention - final (2).ipynb"  # the resubmission
    assert sorted(f.notebook for f in result.collected["101"]) == [NB, "scratch.ipynb"]
    assert not any(f.renamed_from for f in result.collected["101"])
    assert "[handed in as 'Scaled attention - final.ipynb', the assignment's only notebook" in result.summary()
    several = lms.plan(names[:2] + ["zoezoe_103_400_draft.ipynb"], [NB, "other.ipynb"], lms.Roster([]),
                       _settings(), due=DUE)
    assert not any(f.renamed_from for f in several.collected["103"])  # two notebooks asked for: which?


def test_work_without_a_time_counts_as_on_time_only_when_configured():
    names = [f"lovelaceada_LATE_12345_300_{NB}"]
    result = lms.plan(names, [NB], lms.Roster([]), _settings(unknown_time="on_time"), due=DUE)
    (kept,) = result.collected["12345"]
    assert kept.time == DUE and kept.time_status == "on_time" and "counted as on time" in kept.time_source
    assert not result.unknown and not result.warnings


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
    assert off.collected["ada"][0].time == DUE and off.collected["ada"][0].time_status == "unknown"
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


# --- names in the zip: UTF-8 with or without the flag, legacy code pages, non-ASCII names ----

ZOE = "Zoë Ångström"  # composed characters (NFC)


class _RawName(zipfile.ZipInfo):
    """A zip entry whose name is written as these bytes, without the UTF-8 flag (what Linux
    `zip` and old Windows tools write)."""

    def __init__(self, raw):
        super().__init__(raw.decode("cp437"))
        self.raw = raw

    def _encodeFilenameFlags(self):
        return self.raw, self.flag_bits & ~lms.UTF8_FLAG


def _zip(path, files, how):
    """files: {name: text}; how: 'flagged' (Python's zipfile), 'unflagged' (UTF-8 bytes, no
    flag), 'cp437' (a legacy code page, no flag), 'zip' (Linux's zip command)."""
    if how == "zip":
        import shutil
        import subprocess

        command = shutil.which("zip")
        if not command:
            pytest.skip("the zip command is not installed")
        src = path.parent / f"{path.stem}_files"
        for name, text in files.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        subprocess.run([command, "-q", "-r", str(path), "."], cwd=src, check=True, env={"LANG": "C.UTF-8"})
        return path
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            if how == "flagged":
                z.writestr(name, text)
            else:
                z.writestr(_RawName(name.encode("utf-8" if how == "unflagged" else "cp437")), text)
    return path


@pytest.mark.parametrize("how", ["flagged", "unflagged", "zip", "cp437"])
def test_entry_names_are_read_as_written_whether_or_not_the_zip_flags_utf8(tmp_path, how):
    files = {f"{ZOE}_4242_assignsubmission_file/{NB}": "a", f"zoë_{NB}": "b", f"Älva_{NB}": "c",
             f"Übung 5_müller_attempt_2025-10-03-17-45-12_{NB}": "d"}
    archive = _zip(tmp_path / "download.zip", files, how)
    with zipfile.ZipFile(archive) as z:
        entries, clashes = lms.members(z)
        assert set(entries) == set(files) and not clashes
        assert {name: z.read(info).decode() for name, info in entries.items()} == files
        flags = {info.flag_bits & lms.UTF8_FLAG for info in z.infolist()}
    assert flags == ({lms.UTF8_FLAG} if how == "flagged" else {0})  # the case each way stands for


def test_decomposed_names_from_a_mac_are_composed():
    info = zipfile.ZipInfo(f"zoe\u0308_{NB}")  # "zoë" as macOS writes it: e + combining diaeresis
    info.flag_bits |= lms.UTF8_FLAG
    assert lms.member_name(info) == f"zoë_{NB}"


def test_non_ascii_names_are_students_not_unknown_files():
    names = [f"{ZOE}_4242_assignsubmission_file/{NB}", f"zoë_{NB}", f"Älva_{NB}",
             f"Übung 5_müller_attempt_2025-10-03-17-45-12_{NB}"]
    result = lms.plan(names, [NB], lms.Roster([]), _settings(), due=DUE)
    assert not result.skipped
    assert set(result.collected) == {"zoe_angstrom", "zoë", "Älva", "müller"}
    roster = lms.Roster([{"id": "zoe", "first_name": "Zoe", "last_name": "Angstrom", "lms_user_id": ""}])
    matched = lms.plan(names[:1], [NB], roster, _settings(), due=DUE)
    assert list(matched.collected) == ["zoe"]  # the roster spells the name without accents


@pytest.mark.parametrize("how", ["unflagged", "zip"])
def test_an_unflagged_moodle_download_collects_every_student(course, tmp_path, how, capsys):
    nb = nbformat.writes(synthetic.answered(course, A, A))
    files = {f"{ZOE}_4242_assignsubmission_file/{NB}": nb, f"José Núñez_4243_assignsubmission_file/{NB}": nb,
             f"José Núñez_4243_assignsubmission_onlinetext_onlinetext.html": "<p>hi</p>"}
    result = lms.collect(course, _zip(tmp_path / "moodle.zip", files, how), A)
    out = capsys.readouterr().out
    assert set(result.collected) == {"zoe_angstrom", "jose_nunez"}
    assert (course / "submitted" / "zoe_angstrom" / A / NB).read_text() == nb
    assert result.skipped == [(f"José Núñez_4243_assignsubmission_onlinetext_onlinetext.html",
                               "Moodle onlinetext entry, not a file submission")]
    assert f"<- {ZOE}_4242_assignsubmission_file/{NB}" in out and "SKIPPED José Núñez_4243" in out


# --- submission times exported beside the zip -------------------------------------------------

MOODLE_WORKSHEET = ('"Identifier","Full name","Email address","Status","Grade","Maximum Grade",'
                    '"Grade can be changed","Last modified (submission)","Last modified (grade)","Feedback comments"\n'
                    '"Participant 4242","Zoë Ångström",zoe@example.org,"Submitted for grading",,10.00,Yes,'
                    '"Thursday, 2 October 2025, 7:30 PM",-,\n'
                    '"Participant 4243","José Núñez",jose@example.org,"Submitted for grading",,10.00,Yes,'
                    '"Wednesday, 1 October 2025, 6:59 PM",-,\n'
                    '"Participant 4250","Nobody Here",n@example.org,"No submission",,10.00,Yes,-,-,\n')


def test_moodles_grading_worksheet_gives_each_participant_their_time(tmp_path):
    path = tmp_path / "worksheet.csv"
    path.write_text(MOODLE_WORKSHEET)
    times = submission_times.read(path, tz="Europe/Berlin")  # Moodle writes the downloader's zone
    assert [(r.lms_id, r.name, r.time) for r in times.rows] == [
        ("4242", ZOE, datetime.datetime(2025, 10, 2, 17, 30)),      # CEST = UTC+2
        ("4243", "José Núñez", datetime.datetime(2025, 10, 1, 16, 59))]
    names = [f"{ZOE}_4242_assignsubmission_file/{NB}", f"José Núñez_4243_assignsubmission_file/{NB}"]
    result = lms.plan(names, [NB], lms.Roster([]), _settings(), DUE, times=times)
    zoe, jose = result.collected["zoe_angstrom"][0], result.collected["jose_nunez"][0]
    assert zoe.time == datetime.datetime(2025, 10, 2, 17, 30) and zoe.time_source == "worksheet.csv, row 2"
    assert jose.time == datetime.datetime(2025, 10, 1, 16, 59)  # a minute before the due date
    assert not result.unknown and not result.warnings


def test_a_csv_of_student_and_time_dates_canvas_files_and_names_what_it_cannot_use(tmp_path):
    path = tmp_path / "times.csv"
    path.write_text("user_id,submitted_at\n12345,2025-10-03T18:00:00Z\n555,2025-10-02T10:00:00+02:00\n")
    times = submission_times.read(path)
    names = [f"lovelaceada_LATE_12345_300_{NB}", f"hopper_LATE_777_400_{NB}"]
    result = lms.plan(names, [NB], lms.Roster([]), _settings(), DUE, times=times)
    assert result.collected["12345"][0].time == datetime.datetime(2025, 10, 3, 18, 0)
    assert result.collected["777"][0].time_status == "unknown"  # the file has no row for 777
    assert any("times.csv, row 3: '555' matches no collected file" in w for w in result.warnings)
    assert any("1 submission(s) without a submission time" in w for w in result.warnings)


def test_times_match_the_roster_id_or_the_name_too(tmp_path):
    path = tmp_path / "times.csv"
    path.write_text("student,submitted\nada,2025-10-01 18:00\n")
    roster = lms.Roster([{"id": "ada", "first_name": "Ada", "last_name": "Lovelace", "lms_user_id": "12345"}])
    result = lms.plan([f"lovelaceada_12345_300_{NB}"], [NB], roster, _settings(), DUE,
                      times=submission_times.read(path))
    assert result.collected["ada"][0].time == datetime.datetime(2025, 10, 1, 18, 0)


@pytest.mark.parametrize("text, words", [
    ("name,grade\nada,3\n", "not a file of submission times"),
    ("student,submitted_at\nada,yesterday\n", "row 2: 'yesterday' is not a time"),
])
def test_a_times_file_that_cannot_be_used_is_refused_before_anything_is_collected(course, tmp_path, text, words):
    times = tmp_path / "times.csv"
    times.write_text(text)
    archive = _zip(tmp_path / "d.zip", {f"nobody_{NB}": "{}"}, "flagged")
    with pytest.raises(SystemExit, match=words):
        lms.collect(course, archive, A, times_path=times)
    assert not (course / "submitted" / "nobody").exists()


def test_the_info_zip_unicode_path_field_names_an_entry_written_in_a_legacy_code_page(tmp_path):
    import struct
    import zlib

    raw = f"zoë_{NB}".encode("cp1252")  # neither UTF-8 nor meant as cp437
    info = _RawName(raw)
    info.extra = struct.pack("<HHB", lms.UNICODE_PATH_FIELD, 5 + len(f"zoë_{NB}".encode()), 1) + \
        struct.pack("<L", zlib.crc32(raw)) + f"zoë_{NB}".encode()
    with zipfile.ZipFile(tmp_path / "d.zip", "w") as z:
        z.writestr(info, "a")
    with zipfile.ZipFile(tmp_path / "d.zip") as z:
        assert list(lms.members(z)[0]) == [f"zoë_{NB}"]


def test_two_entries_that_decode_to_one_name_are_both_accounted_for(course, tmp_path):
    archive = tmp_path / "twice.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"zoë_{NB}", "{}")                          # flagged UTF-8
        z.writestr(_RawName(f"zoë_{NB}".encode()), "{}")       # the same name, unflagged
    result = lms.collect(course, archive, A)
    assert list(result.collected) == ["zoë"]
    assert result.skipped == [(f"zoë_{NB}", "a second entry with the same name in the zip (the first was used)")]


def test_make_collect_passes_the_times_file(course, tmp_path, capsys):
    from grader.instructor import cli as instructor

    archive = _zip(tmp_path / "d.zip", {f"ada_{NB}": "{}"}, "flagged")
    times = tmp_path / "times.csv"
    times.write_text("student,submitted_at\nada,2025-10-01T12:00:00Z\n")
    instructor.main(["collect", "--zip", str(archive), "--times", str(times), "--root", str(course)])
    out = capsys.readouterr().out
    assert "collected ada / 05_scaled_attention.ipynb, submitted 2025-10-01 12:00 UTC (times.csv, row 2)" in out
    assert (course / "downloaded" / A / "archive" / "times.csv").exists()  # kept beside the zip
