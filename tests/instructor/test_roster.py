"""The roster: nbgrader's own import, Canvas' gradebook export as a roster, and clear refusals."""
import pytest

from grader.instructor import roster
from support import synthetic


@pytest.fixture
def course(tmp_path):
    return synthetic.make_course(tmp_path / "course")


def _students(root):
    from nbgrader.api import Gradebook

    from grader.grading import layout

    with Gradebook(layout.db_url(root)) as gb:
        return {s.id: (s.first_name, s.last_name, s.email, s.lms_user_id) for s in gb.students}


def test_import_goes_through_nbgrader_and_keeps_lms_ids(course, capsys):
    csv_path = course / "students.csv"
    csv_path.write_text("id,first_name,last_name,email,lms_user_id,section,sis_login_id,phone\n"
                        "ada,Ada,Lovelace,ada@example.org,101,A,alovelace,555\n"
                        "grace_hopper,Grace,Hopper,,102,B,,\n")
    roster.import_roster(course, csv_path)
    out = capsys.readouterr().out
    assert "2 student(s) imported" in out and "ignoring column(s) nbgrader does not store: phone" in out
    assert _students(course) == {"ada": ("Ada", "Lovelace", "ada@example.org", "101"),
                                 "grace_hopper": ("Grace", "Hopper", None, "102")}
    # Canvas' columns, which nbgrader's gradebook has no field for, are kept in the course's roster file
    assert roster.load_store(course)["students"] == {
        "ada": {"section": "A", "sis_login_id": "alovelace", "sis_user_id": ""},
        "grace_hopper": {"section": "B", "sis_login_id": "", "sis_user_id": ""}}


def test_a_canvas_gradebook_export_is_a_roster(course):
    csv_path = course / "canvas_export.csv"
    csv_path.write_text('"Student","ID","SIS User ID","SIS Login ID","Section","Quiz (1)"\n'
                        '"    Points Possible","","","","","10"\n'
                        '"Lovelace, Ada","101","S1","ada","A","9"\n'
                        '"Hopper, Grace","102","","","A",""\n'
                        '"Student, Test","999","","","A",""\n')
    roster.import_roster(course, csv_path)
    assert _students(course) == {"ada": ("Ada", "Lovelace", None, "101"),
                                 "102": ("Grace", "Hopper", None, "102")}
    store = roster.load_store(course)
    assert store["students"]["ada"] == {"section": "A", "sis_login_id": "ada", "sis_user_id": "S1"}
    assert store["canvas_columns"] == ["Quiz (1)"]  # so grades_canvas.csv can name columns as Canvas does


@pytest.mark.parametrize("text, words", [
    ("name,email\nAda,ada@example.org\n", "needs an 'id' column"),
    ("id,first_name\nada,Ada\nada,Ada\n", "already on row 2"),
    ("id,first_name\n,Ada\n", "cannot be a folder name"),
    ("id,first_name\n../etc,Ada\n", "cannot be a folder name"),
    ("id,first_name\n", "no students"),
])
def test_a_roster_that_cannot_be_used_is_refused_and_nothing_imported(course, text, words):
    csv_path = course / "bad.csv"
    csv_path.write_text(text)
    with pytest.raises(SystemExit, match=words):
        roster.import_roster(course, csv_path)
    assert not (course / "gradebook.db").exists()  # refused before the gradebook is touched
    assert roster.load_store(course) is None
