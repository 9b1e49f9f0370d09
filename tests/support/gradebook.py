"""Reading a graded course in tests: scores from its gradebook (nbgrader's Gradebook API),
outcomes from its one store (autograded/.status.json), points from its source notebooks."""
from support.classes import CLASS_ASSIGNMENT
from support.paths import ROOT


def db_scores(root, assignment=CLASS_ASSIGNMENT):
    """{student: total score} of one assignment, read from the course gradebook."""
    from nbgrader.api import Gradebook

    from grader.grading import layout

    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(assignment)}


def stored_outcomes(root, student, assignment):
    """{test cell: [Outcome]} of one submission, from the one store of outcomes."""
    from grader.grading.status import Status

    record = next(r for s, a, r in Status(root).records() if (s, a) == (student, assignment))
    return record.notebooks[assignment].outcomes


def cell_scores(root, student, assignment):
    """{test cell: score} of one graded submission, read from the course gradebook."""
    from nbgrader.api import Gradebook

    from grader.grading import layout
    from grader.grading.status import Status

    assert Status(root).get(student, assignment)["status"] == "graded"
    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        notebook = gb.find_submission(assignment, student).notebooks[0]
        return {grade.name: grade.score for grade in notebook.grades}


def cell_points(assignment, grade_id):
    """The points of one test cell, from the course's source notebook in solutions/."""
    import nbformat

    path = ROOT / "solutions" / assignment / f"{assignment}.ipynb"
    cell = next(c for c in nbformat.read(path, as_version=4).cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return cell.metadata["nbgrader"]["points"]
