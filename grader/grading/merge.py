"""One graded submission written into the course gradebook with a few statements.

nbgrader's own way (`Gradebook.update_or_create_submission`, then each notebook's grades
and comments through the ORM) loads and writes each row as an object, one query at a
time: about a third of a second of the grading process's CPU per submission, an hour for
a class of 10,000 however many workers grade it. Here the same rows are written into
nbgrader's tables (its SQLAlchemy tables, the same ids and defaults as its
`add_submission`) with statements whose number does not depend on the size of the class
or of the submission: a lookup, an insert or update per table, executed for all of a
submission's rows at once.

    cells = AssignmentCells.read(session, "05_scaled_attention")      # once per assignment and run
    by_hand = write_submission(session, cells, "ada", timestamp, notebooks)
    remove_submission(session, cells, "ada")

grader.grading.autograde's merge calls them inside a savepoint of its transaction.
"""
from dataclasses import dataclass, field

from grader.grading.results import CellGrade

MISSING = CellGrade(None, None, True)  # a cell nbgrader did not grade: a person does


def _tables():
    from nbgrader.api import Comment, Grade, SubmittedAssignment, SubmittedNotebook

    return (SubmittedAssignment.__table__, SubmittedNotebook.__table__, Grade.__table__,
            Comment.__table__)


@dataclass
class AssignmentCells:
    """An assignment's ids in the gradebook: what a submission's rows point to."""
    assignment_id: str
    notebooks: dict = field(default_factory=dict)   # notebook name -> notebook id
    grades: dict = field(default_factory=dict)      # notebook name -> {cell name: cell id}: grade and task cells
    comments: dict = field(default_factory=dict)    # notebook name -> {cell name: cell id}: solution and task cells

    @classmethod
    def read(cls, db, assignment):
        from nbgrader.api import Assignment, BaseCell, GradeCell, MissingEntry, Notebook, SolutionCell, TaskCell

        found = db.query(Assignment.id).filter(Assignment.name == assignment).first()
        if found is None:
            raise MissingEntry(f"No such assignment: {assignment}")
        cells = cls(found[0])
        gc, sc, tc = GradeCell.__table__, SolutionCell.__table__, TaskCell.__table__
        for name, nb_id in db.query(Notebook.name, Notebook.id).filter(Notebook.assignment_id == cells.assignment_id):
            cells.notebooks[name] = nb_id
            cells.grades[name], cells.comments[name] = {}, {}
        rows = db.query(Notebook.name, BaseCell.name, BaseCell.id, gc.c.id.isnot(None), sc.c.id.isnot(None),
                        tc.c.id.isnot(None))\
            .join(Notebook, Notebook.id == BaseCell.notebook_id)\
            .outerjoin(gc, gc.c.id == BaseCell.id).outerjoin(sc, sc.c.id == BaseCell.id)\
            .outerjoin(tc, tc.c.id == BaseCell.id)\
            .filter(Notebook.assignment_id == cells.assignment_id)
        for notebook, name, cell_id, is_grade, is_solution, is_task in rows:
            if is_grade or is_task:
                cells.grades[notebook][name] = cell_id
            if is_solution or is_task:
                cells.comments[notebook][name] = cell_id
        return cells


def _submission_id(db, cells, student):
    from sqlalchemy import select

    sa = _tables()[0]
    row = db.execute(select(sa.c.id).where(sa.c.assignment_id == cells.assignment_id,
                                           sa.c.student_id == student)).first()
    return row[0] if row else None


def write_submission(db, cells, student, timestamp, notebooks):
    """Create or update the student's submission of the assignment: its timestamp (nbgrader's
    text, or None to keep the one recorded), and for each notebook result
    (grader.grading.results.NotebookResult) its grades' automatic scores, its comments'
    automatic comments and its late penalty. Manual grades and extra credit stay. Returns
    whether a person had given the submission a score (a manual grade, extra credit)."""
    from nbgrader.api import new_uuid
    from nbgrader.utils import parse_utc
    from sqlalchemy import and_, bindparam, insert, or_, select, update

    sa, sn, grade, comment = _tables()
    stamp = parse_utc(timestamp) if timestamp else None
    sub_id = _submission_id(db, cells, student)
    if sub_id is None:
        sub_id = new_uuid()
        db.execute(insert(sa).values(id=sub_id, assignment_id=cells.assignment_id, student_id=student,
                                     timestamp=stamp, extension=None))
        existing, by_hand = {}, False
    else:
        if stamp is not None:
            db.execute(update(sa).where(sa.c.id == sub_id).values(timestamp=stamp))
        existing = dict(db.execute(select(sn.c.notebook_id, sn.c.id).where(sn.c.assignment_id == sub_id)).all())
        by_hand = db.execute(
            select(grade.c.id).join(sn, sn.c.id == grade.c.notebook_id)
            .where(sn.c.assignment_id == sub_id,
                   or_(grade.c.manual_score.isnot(None),
                       and_(grade.c.extra_credit.isnot(None), grade.c.extra_credit != 0)))
            .limit(1)).first() is not None

    new_nbs, new_grades, new_comments, grade_updates, comment_updates, penalties = [], [], [], [], [], []
    for name, nb_id in cells.notebooks.items():
        result = notebooks.get(name)
        sn_id = existing.get(nb_id)
        if sn_id is None:  # as nbgrader's add_submission: every notebook, grade and comment
            sn_id = new_uuid()
            new_nbs.append({"id": sn_id, "assignment_id": sub_id, "notebook_id": nb_id, "flagged": False,
                            "late_submission_penalty": result.late_penalty if result else None})
            for cell, cell_id in cells.grades[name].items():
                graded = result.grades.get(cell, MISSING) if result else MISSING
                new_grades.append({"id": new_uuid(), "notebook_id": sn_id, "cell_id": cell_id,
                                   "auto_score": graded.auto_score, "manual_score": None, "extra_credit": None,
                                   "needs_manual_grade": graded.needs_manual_grade})
            for cell, cell_id in cells.comments[name].items():
                new_comments.append({"id": new_uuid(), "notebook_id": sn_id, "cell_id": cell_id,
                                     "auto_comment": result.comments.get(cell) if result else None,
                                     "manual_comment": None})
            continue
        if result is None:
            continue
        penalties.append({"sn_id": sn_id, "penalty": result.late_penalty})
        for cell, cell_id in cells.grades[name].items():
            graded = result.grades.get(cell, MISSING)
            grade_updates.append({"sn_id": sn_id, "c_id": cell_id, "auto": graded.auto_score,
                                  "needs": graded.needs_manual_grade})
        for cell, cell_id in cells.comments[name].items():
            comment_updates.append({"sn_id": sn_id, "c_id": cell_id, "text": result.comments.get(cell)})

    if new_nbs:
        db.execute(insert(sn), new_nbs)
    if new_grades:
        db.execute(insert(grade), new_grades)
    if new_comments:
        db.execute(insert(comment), new_comments)
    if penalties:
        db.execute(update(sn).where(sn.c.id == bindparam("sn_id"))
                   .values(late_submission_penalty=bindparam("penalty")), penalties)
    if grade_updates:
        db.execute(update(grade).where(grade.c.notebook_id == bindparam("sn_id"), grade.c.cell_id == bindparam("c_id"))
                   .values(auto_score=bindparam("auto"), needs_manual_grade=bindparam("needs")), grade_updates)
    if comment_updates:
        db.execute(update(comment).where(comment.c.notebook_id == bindparam("sn_id"),
                                         comment.c.cell_id == bindparam("c_id"))
                   .values(auto_comment=bindparam("text")), comment_updates)
    return by_hand


def remove_submission(db, cells, student):
    """Delete the student's submission of the assignment with its notebooks, grades and
    comments (nbgrader's remove_submission), if there is one."""
    from sqlalchemy import delete, select

    sa, sn, grade, comment = _tables()
    sub_id = _submission_id(db, cells, student)
    if sub_id is None:
        return
    notebooks = select(sn.c.id).where(sn.c.assignment_id == sub_id)
    db.execute(delete(grade).where(grade.c.notebook_id.in_(notebooks)))
    db.execute(delete(comment).where(comment.c.notebook_id.in_(notebooks)))
    db.execute(delete(sn).where(sn.c.assignment_id == sub_id))
    db.execute(delete(sa).where(sa.c.id == sub_id))
