"""LMS downloads name each file with the LMS's part first (who, which attempt, when) and the
student's own file name after it: a student who names their file like a classmate's entry, or
with an earlier attempt's time, must stay the one who handed it in, at the time the LMS
wrote. Before, three names did otherwise (each a real upload the LMS keeps as named):

- Moodle, a file (or folder) in Ada's submission named like Bob's Moodle entry, with a
  resubmission number: collected as Bob's, replacing his own;
- Blackboard, a file named `x_<username>_attempt_<earlier time>_<notebook>`: dated at the
  earlier time (late work on time), or collected as that user's;
- Canvas, a file named like a Moodle entry with a classmate's Canvas user id: collected as
  that classmate's (the Moodle naming was tried first)."""
import datetime

import pytest

from grader.instructor import lms

NB = "05_scaled_attention.ipynb"
DUE = datetime.datetime(2025, 10, 5, 17, 0)


def _settings():
    return lms.LmsCollect()


ROSTER = lms.Roster([
    {"id": "ada", "first_name": "Ada", "last_name": "Lovelace", "lms_user_id": "12345"},
    {"id": "bob", "first_name": "Bob", "last_name": "Smith", "lms_user_id": "67890"},
])


def _who(names):
    """{student: (the path collected, its time)} for a download of these names."""
    result = lms.plan(names, [NB], ROSTER, _settings(), due=DUE)
    return {student: [(f.path, f.time) for f in found] for student, found in result.collected.items()}


@pytest.mark.parametrize("ada", [
    f"Ada Lovelace_4242_assignsubmission_file/Bob Smith_4343_assignsubmission_file_05_scaled_attention-9.ipynb",
    f"Ada Lovelace_4242_assignsubmission_file/Bob Smith_4343_assignsubmission_file/{NB}",
])
def test_a_moodle_file_named_like_a_classmates_entry_stays_the_students(ada):
    bob = f"Bob Smith_4343_assignsubmission_file/{NB}"
    own = f"Ada Lovelace_4242_assignsubmission_file/{NB}"
    got = _who([bob, ada, own])
    assert [path for path, _ in got["bob"]] == [bob], got


def test_a_blackboard_file_named_with_an_earlier_attempt_keeps_the_lms_time():
    late = "Homework 5_ada_attempt_2025-10-09-17-45-12_x_ada_attempt_2025-10-01-00-00-00_05_scaled_attention.ipynb"
    found, _ = lms.parse(late, [NB])
    assert (found.lms_id, found.time) == ("ada", datetime.datetime(2025, 10, 9, 17, 45, 12))
    other = "Homework 5_ada_attempt_2025-10-09-17-45-12_x_bob_attempt_2025-10-01-00-00-00_05_scaled_attention-9.ipynb"
    assert lms.parse(other, [NB])[0].lms_id == "ada"


def test_a_canvas_file_named_like_a_moodle_entry_stays_the_students():
    ada = "lovelaceada_12345_678901_x_67890_assignsubmission_file_05_scaled_attention-9.ipynb"
    bob = f"smithbob_67890_678902_{NB}"
    got = _who([ada, bob, f"hopperg_55555_678903_{NB}"])
    assert [path for path, _ in got["bob"]] == [bob], got
    found, _ = lms.parse(ada, [NB], lms=lms.entry_lms(ada, "canvas"))
    assert (found.lms, found.lms_id) == ("canvas", "12345")


def test_each_lms_reads_its_own_names_as_before():
    assert lms.zip_lms([f"lovelaceada_12345_1_{NB}", f"smithbob_67890_2_{NB}"]) == "canvas"
    assert lms.zip_lms([f"Ada Lovelace_4242_assignsubmission_file/{NB}"]) == "moodle"
    assert lms.zip_lms([f"HW_ada_attempt_2025-10-03-17-45-12_{NB}"]) == "blackboard"
    assert lms.entry_lms(f"lovelaceada_12345_1_{NB}", "canvas") is None  # one naming: read as before
    found, _ = lms.parse(f"download/Ada Lovelace_4242_assignsubmission_file/{NB}", [NB])
    assert (found.lms, found.lms_id, found.notebook) == ("moodle", "4242", NB)  # a folder around the download
