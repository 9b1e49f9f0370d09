"""make feedback's pages are nbgrader's own: made in batches (several students in one
throwaway course folder, with a gradebook holding only them) on a real Dask scheduler
and worker, they equal, byte for byte, what nbgrader's generate_feedback writes for each
student in the course itself; only what changed is made again; a page that cannot be
made is named with its reason and the others are kept.

The class is built without grading (tests/support/big_class.py): four seeds (full marks,
partial, late, a manual grade) and three copies of them.
"""
import json
import os

import pytest

from support import big_class

A = "05_scaled_attention"
COPIES = 3
STUDENTS = ["seed_full", "seed_late", "seed_manual", "seed_partial",
            *[big_class.student_name(i) for i in range(COPIES)]]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root, _seeds = big_class.small_course(tmp_path_factory.mktemp("feedback") / "course", [A], COPIES)
    return root


def _page(root, student):
    path = root / "feedback" / student / A / f"{A}.html"
    return path.read_text() if path.exists() else None


def _nbgraders_pages(root, students):
    """{student: page} as nbgrader's own API makes it in the course (one call per student),
    the course's pages put back afterwards."""
    import shutil

    from grader.grading import layout

    kept = root / "feedback.kept"
    os.rename(root / "feedback", kept)
    try:
        api = layout.nbgrader_api(layout.load_config(root))
        pages = {}
        for student in students:
            outcome = api.generate_feedback(A, student)
            assert outcome["success"], outcome.get("error")
            pages[student] = _page(root, student)
    finally:
        shutil.rmtree(root / "feedback", ignore_errors=True)
        os.rename(kept, root / "feedback")
    return pages


def test_pages_made_in_batches_on_a_dask_cluster_are_nbgraders_own(course, monkeypatch):
    from distributed import LocalCluster

    from grader.instructor import feedback

    monkeypatch.setattr(feedback, "BATCH", 3)  # 7 submissions: batches of 3, 3 and 1
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        summary = feedback.generate(course, A, scheduler=cluster.scheduler_address, progress=False)
    assert summary == {"written": len(STUDENTS), "unchanged": 0, "failed": {}, "withdrawn": []}
    ours = {student: _page(course, student) for student in STUDENTS}
    assert "late" in ours["seed_late"].lower() and "late" not in ours["seed_full"].lower().split("<body")[1]
    assert ours == _nbgraders_pages(course, STUDENTS)
    # nothing changed: nothing is made, here or on a cluster
    assert feedback.generate(course, A, progress=False) == {"written": 0, "unchanged": len(STUDENTS), "failed": {}, "withdrawn": []}


def _unknown_cell(text):
    """The notebook with a graded cell the gradebook does not know."""
    nb = json.loads(text)
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade"))
    cell["metadata"]["nbgrader"]["grade_id"] = "not_in_the_gradebook"
    return json.dumps(nb)


def test_a_page_that_cannot_be_made_is_named_with_its_own_reason_and_the_others_are_kept(course):
    """Two students' autograded notebooks unreadable in two ways, in one batch: each page
    fails with nbgrader's reason for that student, the batch's other pages are written,
    and the next run tries the failed ones again."""
    from grader.instructor import feedback

    feedback.generate(course, A, progress=False)  # every page made (nothing to do after the test above)
    broken = {big_class.student_name(0): (lambda nb: "{ this is not a notebook", "NotJSONError"),
              big_class.student_name(1): (_unknown_cell, "MissingEntry")}
    fine = big_class.student_name(2)
    kept = {}
    for student, (spoil, _why) in broken.items():
        path = course / "autograded" / student / A / f"{A}.ipynb"
        kept[path] = path.read_bytes()
        path.unlink()  # a hard link to the seed's file: the seed keeps its own
        path.write_text(spoil(kept[path].decode()))
    try:
        for student in (*broken, fine):
            (course / "feedback" / student / A / f"{A}.html").unlink(missing_ok=True)
        summary = feedback.generate(course, A, progress=False)
        assert summary["written"] == 1 and summary["unchanged"] == len(STUDENTS) - 3, summary
        assert sorted(summary["failed"]) == sorted((student, A) for student in broken)
        for student, (_spoil, why) in broken.items():
            assert why in summary["failed"][(student, A)], (student, summary["failed"])
        assert _page(course, fine) is not None and all(_page(course, student) is None for student in broken)
    finally:
        for path, data in kept.items():
            path.unlink()
            path.write_bytes(data)
    again = feedback.generate(course, A, progress=False)
    assert again["written"] == 2 and not again["failed"] and all(_page(course, s) is not None for s in broken)


def test_pages_of_a_submission_no_longer_graded_are_withdrawn_before_release(tmp_path, capsys):
    """A submission regraded into "needs attention" (make autograde then leaves it no grades and
    no autograded notebook) and a student taken out of the gradebook (nbgrader db student
    remove): their pages are withdrawn from feedback/, and from the exchange where they had
    been released, and named; the other pages stay, released as before."""
    import shutil

    from nbgrader.api import Gradebook

    from grader.grading import layout
    from grader.instructor import cli, feedback

    root, _seeds = big_class.small_course(tmp_path / "course", [A], 1)
    students = ["seed_full", "seed_late", "seed_manual", "seed_partial", big_class.student_name(0)]
    for student in students:  # what nbgrader's submit leaves beside each submission, and feedback copies
        secret = root / "autograded" / student / A / "submission_secret.txt"
        if not secret.exists():
            secret.write_text(f"secret of {student}")
    assert feedback.generate(root, A, progress=False)["written"] == len(students)
    cli.release_feedback(root, A)
    assert f"{A}: released {len(students)} feedback page(s)" in capsys.readouterr().out
    released = root / "exchange" / "self-attention" / "feedback"
    names = {s: feedback._released_names(root / "feedback" / s / A) for s in students}
    assert sorted(p.name for p in released.glob("*.html")) == sorted(n for ns in names.values() for n in ns)
    attention, gone = "seed_partial", big_class.student_name(0)
    with Gradebook(layout.db_url(root), "self-attention") as gb:
        gb.remove_submission(A, attention)  # what make autograde leaves of a submission needing attention
        gb.remove_student(gone)
    shutil.rmtree(root / "autograded" / attention / A)

    cli.release_feedback(root, A)
    out = capsys.readouterr().out
    assert f"  WITHDRAWN {attention} / {A}: {feedback.NOT_GRADED}" in out, out
    assert f"  WITHDRAWN {gone} / {A}: {feedback.NOT_A_STUDENT}" in out, out
    assert f"{A}: released {len(students) - 2} feedback page(s)" in out, out
    assert _page(root, attention) is None and not (root / "feedback" / gone).exists()
    kept = [s for s in students if s not in (attention, gone)]
    assert sorted(p.name for p in released.glob("*.html")) == sorted(n for s in kept for n in names[s])
    assert feedback.generate(root, A, progress=False) == {"written": 0, "unchanged": len(kept), "failed": {},
                                                          "withdrawn": []}
