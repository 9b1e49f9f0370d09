"""The course gradebook's scores, read in a few set-based queries.

nbgrader's ORM computes a submission's or a notebook's score with a correlated subquery
per object and loads grades, cells and students lazily, one query each: reading a class of
10,800 submissions that way takes tens of minutes. Here one statement reads the
submissions, one the notebooks with their scores (summed in SQL with nbgrader's own
definition of a grade's score, `nbgrader.api.Grade.score`), and one, when asked for, every
graded cell: three statements, whatever the size of the class.

    read(session, assignment=None, student=None, cells=False) -> [SubmissionScores]

The late policy's pass (grader.grading.late.apply), the exports and report
(grader.instructor.report) and ``make feedback`` read the gradebook through it.
"""
import datetime
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class CellScore:
    """One graded cell of a submitted notebook, as nbgrader's Grade gives it."""
    name: str
    score: float            # nbgrader's Grade.score: the manual score over the automatic one, plus extra credit
    max_score: float
    manual: bool            # a person gave it a score
    extra_credit: float
    needs_manual_grade: bool


@dataclass
class NotebookScores:
    id: str                 # nbgrader's SubmittedNotebook id
    name: str
    score: float            # nbgrader's SubmittedNotebook.score
    penalty: Optional[float]  # its late_submission_penalty column
    needs_manual_grade: bool
    cells: list = field(default_factory=list)  # [CellScore], when read with cells=True


@dataclass
class SubmissionScores:
    id: str                 # nbgrader's SubmittedAssignment id
    assignment: str
    student: str
    timestamp: Optional[datetime.datetime]
    assignment_duedate: Optional[datetime.datetime]
    extension: Optional[datetime.timedelta]  # nbgrader's own extension column
    notebooks: list = field(default_factory=list)  # [NotebookScores], by name

    @property
    def duedate(self):
        """nbgrader's SubmittedAssignment.duedate: the assignment's, plus nbgrader's extension."""
        if self.assignment_duedate is not None and self.extension is not None:
            return self.assignment_duedate + self.extension
        return self.assignment_duedate

    @property
    def total_seconds_late(self):
        """nbgrader's SubmittedAssignment.total_seconds_late."""
        if self.timestamp is None or self.duedate is None:
            return 0
        return max(0, (self.timestamp - self.duedate).total_seconds())

    @property
    def score(self):
        return sum(nb.score for nb in self.notebooks)

    @property
    def penalty(self):
        return sum(nb.penalty or 0.0 for nb in self.notebooks)

    @property
    def needs_manual_grade(self):
        return any(nb.needs_manual_grade for nb in self.notebooks)


def _filtered(query, assignment, student):
    from nbgrader.api import Assignment, SubmittedAssignment

    if assignment is not None:
        query = query.filter(Assignment.name == assignment)
    if student is not None:
        query = query.filter(SubmittedAssignment.student_id == student)
    return query


def read(db, assignment=None, student=None, cells=False):
    """[SubmissionScores] of every submission in the gradebook (or of one assignment, one
    student, or both), ordered by assignment and student; db: a Gradebook's session."""
    from nbgrader.api import (Assignment, BaseCell, Grade, GradeCell, Notebook, SubmittedAssignment,
                              SubmittedNotebook, TaskCell)
    from sqlalchemy import func

    subs = {}
    query = db.query(SubmittedAssignment.id, Assignment.name, SubmittedAssignment.student_id,
                     SubmittedAssignment.timestamp, Assignment.duedate, SubmittedAssignment.extension)\
        .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
    for row in _filtered(query, assignment, student).order_by(Assignment.name, SubmittedAssignment.student_id):
        subs[row[0]] = SubmissionScores(*row)

    notebooks = {}
    query = db.query(SubmittedNotebook.id, SubmittedNotebook.assignment_id, Notebook.name,
                     func.coalesce(func.sum(Grade.score), 0.0), SubmittedNotebook.late_submission_penalty,
                     func.coalesce(func.max(Grade.needs_manual_grade), False))\
        .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)\
        .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)\
        .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)\
        .outerjoin(Grade, Grade.notebook_id == SubmittedNotebook.id)\
        .group_by(SubmittedNotebook.id, SubmittedNotebook.assignment_id, Notebook.name,
                  SubmittedNotebook.late_submission_penalty)
    for nb_id, sub_id, name, score, penalty, manual in _filtered(query, assignment, student).order_by(Notebook.name):
        nb = NotebookScores(nb_id, name, score, penalty, bool(manual))
        notebooks[nb_id] = nb
        if sub_id in subs:
            subs[sub_id].notebooks.append(nb)

    if cells:
        grade_cells, task_cells = GradeCell.__table__, TaskCell.__table__
        query = db.query(Grade.notebook_id, BaseCell.name, Grade.score,
                         func.coalesce(grade_cells.c.max_score, task_cells.c.max_score, 0.0),
                         Grade.manual_score, Grade.extra_credit, Grade.needs_manual_grade)\
            .join(BaseCell, BaseCell.id == Grade.cell_id)\
            .outerjoin(grade_cells, grade_cells.c.id == Grade.cell_id)\
            .outerjoin(task_cells, task_cells.c.id == Grade.cell_id)\
            .join(SubmittedNotebook, SubmittedNotebook.id == Grade.notebook_id)\
            .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)\
            .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
        for nb_id, name, score, max_score, manual, extra, needs in _filtered(query, assignment, student)\
                .order_by(Grade.notebook_id, BaseCell.name):
            if nb_id in notebooks:
                notebooks[nb_id].cells.append(CellScore(name, score, max_score, manual is not None,
                                                        extra or 0.0, bool(needs)))
    return list(subs.values())
