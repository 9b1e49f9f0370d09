"""Late work: the course's policy, applied by nbgrader wherever it grades.

nbgrader_config.py chooses the policy (see the "Late work" block there):

    c.AssignLatePenalties.plugin_class = "grader.grading.late.LatePolicy"
    c.LatePolicy.penalty_method = "percent_per_day"   # or "none", "zero"
    c.LatePolicy.percent_per_day = 10    # % of the points earned, per started day late
    c.LatePolicy.max_percent = 50        # never more than this
    c.LatePolicy.grace_minutes = 15      # this late still counts as on time

``LatePolicy`` is an nbgrader ``LateSubmissionPlugin``, so ``nbgrader autograde``, the
formgrader's Autograde button and ``make autograde`` (whose worker is given the student's
extension, grader.grading.submission) use it: a graded submission's penalty is computed
there, once. It lives below grading, which imports nothing of grader.instructor
(tests/test_imports.py); grader.instructor.late adds the feedback's late notice. The arithmetic lives in ``late_penalty``, a pure function, so the export, the
feedback and ``make extensions`` can apply it to a score or a due date that changed after
nbgrader's run (a manual grade, extra credit, an extension): ``apply`` writes the penalty
that the policy gives for each notebook's current score into the gradebook.

Per-student extensions (grader.grading.extensions, written by ``make extensions CSV=...``) move a
student's due date: every lateness here (the penalty, ``apply``, the feedback's notice) is measured from
the extended due date. nbgrader's own ``total_seconds_late`` stays measured from the
assignment's due date, as nbgrader computes it.
"""
import math

from traitlets import Enum, Float, TraitError, validate

from nbgrader.plugins import LateSubmissionPlugin

from grader.grading import extensions

DAY = 86400.0
METHODS = ("none", "zero", "percent_per_day")


def late_penalty(score, seconds_late, method="none", percent_per_day=10.0, max_percent=100.0,
                 grace_minutes=0.0):
    """Points to subtract from ``score`` for work handed in ``seconds_late`` after the due date.

    - "none": nothing;
    - "zero": the whole score;
    - "percent_per_day": ``percent_per_day`` % of the score for each day or part of a day
      late, counted from the due date, at most ``max_percent`` %.
    Work at most ``grace_minutes`` late is on time. Never negative, never more than the score.
    """
    if method not in METHODS:
        raise ValueError(f"unknown late penalty method {method!r}: use one of {', '.join(METHODS)}")
    if not score or score <= 0 or not seconds_late or seconds_late <= grace_minutes * 60:
        return 0.0
    if method == "none":
        return 0.0
    if method == "zero":
        return float(score)
    days = math.ceil(seconds_late / DAY)
    percent = min(max(0.0, max_percent), max(0.0, percent_per_day) * days, 100.0)
    return float(score) * percent / 100.0


def course_root(config):
    """The course folder of an nbgrader config (where extensions.json is)."""
    from nbgrader.coursedir import CourseDirectory

    return CourseDirectory(config=config).root


def seconds_late(student, assignment, total_seconds_late, duedate, granted):
    """Seconds late from the student's due date: nbgrader's seconds late (from the
    assignment's due date), less the extension in ``granted`` ({(student, assignment):
    Extension}) if there is one."""
    ext = granted.get((student, assignment))
    return ext.seconds_late(total_seconds_late, duedate) if ext else total_seconds_late


def days_late(seconds_late):
    """Started days late (0 when on time)."""
    return math.ceil(seconds_late / DAY) if seconds_late and seconds_late > 0 else 0


class LatePolicy(LateSubmissionPlugin):
    """The course's late policy (configured in nbgrader_config.py)."""

    penalty_method = Enum(
        METHODS, default_value="none",
        help="'none': late work keeps its score; 'zero': late work scores 0; "
             "'percent_per_day': percent_per_day % of the score per started day late, "
             "at most max_percent %.").tag(config=True)
    percent_per_day = Float(10.0, help="% of the points earned lost per started day late").tag(config=True)
    max_percent = Float(100.0, help="the most a late submission can lose, in %").tag(config=True)
    grace_minutes = Float(0.0, help="work at most this many minutes late is on time").tag(config=True)

    @validate("percent_per_day", "grace_minutes")
    def _non_negative(self, proposal):
        if proposal["value"] < 0:
            raise TraitError(f"LatePolicy.{proposal['trait'].name} must be >= 0, got {proposal['value']}")
        return proposal["value"]

    @validate("max_percent")
    def _percent(self, proposal):
        if not 0 <= proposal["value"] <= 100:
            raise TraitError(f"LatePolicy.max_percent must be between 0 and 100, got {proposal['value']}")
        return proposal["value"]

    def settings(self):
        return {"method": self.penalty_method, "percent_per_day": self.percent_per_day,
                "max_percent": self.max_percent, "grace_minutes": self.grace_minutes}

    def penalty(self, score, seconds_late):
        return late_penalty(score, seconds_late, **self.settings())

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        """nbgrader's hook (AssignLatePenalties, this plugin's parent, names the assignment
        and the gradebook): None means no penalty."""
        assignment = getattr(self.parent, "assignment_id", None)
        granted = extensions.load(course_root(self.config))
        if assignment and (student_id, assignment) in granted:
            duedate = self.parent.gradebook.find_assignment(assignment).duedate  # the parent's open gradebook
            total_seconds_late = seconds_late(student_id, assignment, total_seconds_late, duedate, granted)
        penalty = self.penalty(score, total_seconds_late)
        return penalty or None

    def describe(self):
        """The policy in one sentence, for feedback and the report."""
        grace = (f"; up to {self.grace_minutes:g} minutes late counts as on time"
                 if self.grace_minutes else "")
        if self.penalty_method == "none":
            return "Late work is marked late but keeps its score" + grace + "."
        if self.penalty_method == "zero":
            return "Late work scores 0" + grace + "."
        cap = f", at most {self.max_percent:g}%" if self.max_percent < 100 else ""
        return (f"Late work loses {self.percent_per_day:g}% of the points earned for each day "
                f"or part of a day after the due date{cap}{grace}.")


def policy(config):
    """The LatePolicy that nbgrader_config.py describes."""
    return LatePolicy(config=config)


def apply(gradebook, config, assignment=None, student=None):
    """Write the policy's penalty for each submitted notebook's current score into the
    gradebook (nbgrader fixes the penalty when it autogrades; a manual grade or extra
    credit given later changes the score it applies to), for the whole class or one
    assignment, one student, or both. The gradebook is read in three statements
    (grader.grading.scores) and the changed penalties written in one.

    Returns the (student, assignment, notebook, old, new) that changed."""
    from nbgrader.api import SubmittedNotebook
    from sqlalchemy import bindparam, update

    from grader.grading import scores

    rule = policy(config)
    granted = extensions.load(course_root(config))
    changed = []
    for sub in scores.read(gradebook.db, assignment, student):
        seconds = seconds_late(sub.student, sub.assignment, sub.total_seconds_late, sub.duedate, granted)
        for nb in sub.notebooks:
            new = min(rule.penalty(nb.score, seconds), nb.score or 0.0) or None
            if (nb.penalty or 0.0) != (new or 0.0):
                changed.append((sub.student, sub.assignment, nb.name, nb.penalty, new, nb.id))
    if changed:
        table = SubmittedNotebook.__table__
        gradebook.db.execute(update(table).where(table.c.id == bindparam("nb_id"))
                             .values(late_submission_penalty=bindparam("penalty")),
                             [{"nb_id": nb_id, "penalty": new} for *_, new, nb_id in changed])
        gradebook.db.expire_all()  # objects the session holds read the new penalties again
    gradebook.db.commit()
    return [item[:5] for item in changed]
