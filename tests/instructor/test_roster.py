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


def test_a_student_collected_under_their_lms_id_moves_to_their_roster_id(tmp_path, capsys):
    """A Canvas download collected before the roster named frank files his work under his
    Canvas id, 1099, and grading, feedback and the status follow that stand-in. Importing a
    roster row with lms_user_id 1099 moves his submission to submitted/frank/ and takes 1099
    out of the gradebook, the status, autograded/, feedback/ and the download's record: the
    report then lists frank once, waiting for make autograde, and 1099 nowhere. A student whose
    own id is someone's LMS id is never merged."""
    import zipfile

    import nbformat
    from nbgrader.api import Gradebook

    from grader.grading import layout
    from grader.grading.status import Status
    from grader.instructor import lms, report

    A = "05_scaled_attention"
    NB = f"{A}.ipynb"
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    archive = tmp_path / "canvas.zip"
    answer = nbformat.writes(synthetic.answered(root, A, A))
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"frankfrank_1099_555_{NB}", answer)
        z.writestr(f"lovelaceada_2001_556_{NB}", answer)
    lms.collect(root, archive, A)
    assert (root / "submitted" / "1099" / A / NB).exists()
    # what make autograde and make feedback leave for the stand-in (graded here without a kernel)
    with Gradebook(layout.db_url(root)) as gb:
        gb.add_student("1099")
        gb.add_submission(A, "1099")
    (root / "autograded" / "1099" / A).mkdir(parents=True)
    Status(root).set("1099", A, {"fingerprint": "f", "status": "graded"})
    (root / "feedback" / "1099" / A).mkdir(parents=True)
    (root / "feedback" / "1099" / A / f"{A}.html").write_text("<p>1099</p>")
    capsys.readouterr()

    csv_path = tmp_path / "students.csv"
    csv_path.write_text("id,first_name,last_name,lms_user_id\nfrank,Frank,Franklin,1099\n2001,Ada,Lovelace,77\n"
                        "grace,Grace,Hopper,2001\n")  # grace's LMS id is ada's roster id
    roster.import_roster(root, csv_path)
    out = capsys.readouterr().out
    assert f"  frank was collected as 1099 (their LMS id) before the roster named them: moved {A} to submitted/frank/" in out, out
    assert "run make autograde to grade them as frank" in out
    assert (root / "submitted" / "frank" / A / NB).read_text() == answer
    assert not (root / "submitted" / "1099").exists() and not (root / "autograded" / "1099").exists()
    assert not (root / "feedback" / "1099").exists() and Status(root).data.get("1099") is None
    assert "1099" not in _students(root) and "frank" in _students(root)
    assert set(lms.collected_info(root, A)) == {"frank", "2001"}  # the download's record follows him
    assert (root / "submitted" / "2001" / A).exists() and not (root / "submitted" / "grace").exists()
    assert "collected as 2001" not in out  # a roster id is nobody's stand-in
    rows = {r.student: r for r in report.gather(root).rows}
    assert "1099" not in rows and rows["frank"].status == report.PENDING
