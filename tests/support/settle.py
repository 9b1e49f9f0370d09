"""A class graded as its instructor grades it on a busy machine: run, then run again where the
machine starved a notebook. A notebook whose sandbox waited for a CPU most of the time it
was not charged needs attention ("the machine was too busy"), and the next run grades it on
its wall-clock ceiling (grader.grading.execute). On a quiet machine the first run grades
everything; on a loaded one (a second suite at once, a CPU quota) the rerun does: the
scores the tests assert are the same either way."""
from pathlib import Path

from grader.grading.status import Status

# {course folder: [(student, assignment, reason)] its first run left to the second}, for the
# tests of a class graded by grade_settled in this process
STARVED = {}


def starved(root):
    """[(student, assignment, reason)] of the submissions the last run left to a later run
    because the machine starved them."""
    return [(student, assignment, record.reason)
            for student, assignment, record in Status(root).records() if record.starved]


def grade_settled(root, make_grading):
    """Grade the class (make_grading(): a grader.grading.autograde.Grading), then once more
    for the students whose notebooks the machine starved (kept in STARVED); the first run's
    summary."""
    summary = make_grading().run(progress=False)
    left = STARVED[Path(root)] = starved(root)
    if left:
        make_grading().run(students=sorted({s for s, _, _ in left}), progress=False)
    return summary
