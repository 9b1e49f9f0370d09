"""Late work: the course's policy, applied by nbgrader wherever it grades.

nbgrader_config.py chooses the policy (see the "Late work" block there):

    c.AssignLatePenalties.plugin_class = "grader.instructor.late.LatePolicy"
    c.LatePolicy.penalty_method = "percent_per_day"   # or "none", "zero"
    c.LatePolicy.percent_per_day = 10    # % of the points earned, per started day late
    c.LatePolicy.max_percent = 50        # never more than this
    c.LatePolicy.grace_minutes = 15      # this late still counts as on time

``LatePolicy`` is an nbgrader ``LateSubmissionPlugin``, so ``nbgrader autograde``, the
formgrader's Autograde button and ``make autograde`` (whose worker is given the student's
extension, grader.grading.submission) use it: a graded submission's penalty is computed
there, once. The arithmetic lives in ``late_penalty``, a pure function, so the export, the
feedback and ``make extensions`` can apply it to a score or a due date that changed after
nbgrader's run (a manual grade, extra credit, an extension): ``apply`` writes the penalty
that the policy gives for each notebook's current score into the gradebook.

Per-student extensions (grader.instructor.extensions, ``make extensions CSV=...``) move a student's due
date: every lateness here (the penalty, ``apply``, the feedback's notice) is measured from
the extended due date. nbgrader's own ``total_seconds_late`` stays measured from the
assignment's due date, as nbgrader computes it.
"""
import math

from nbformat.v4 import new_markdown_cell
from traitlets import Enum, Float, TraitError, validate

from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.instructor import extensions

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
    credit given later changes the score it applies to).

    Returns the (student, assignment, notebook, old, new) that changed."""
    rule = policy(config)
    granted = extensions.load(course_root(config))
    changed = []
    for a in gradebook.assignments:
        if assignment and a.name != assignment:
            continue
        for sub in gradebook.assignment_submissions(a.name):
            if student and sub.student.id != student:
                continue
            seconds = seconds_late(sub.student.id, a.name, sub.total_seconds_late, sub.duedate, granted)
            for nb in sub.notebooks:
                new = min(rule.penalty(nb.score, seconds), nb.score or 0.0) or None
                old = nb.late_submission_penalty
                if (old or 0.0) != (new or 0.0):
                    nb.late_submission_penalty = new
                    changed.append((sub.student.id, a.name, nb.name, old, new))
    gradebook.db.commit()
    return changed


def lateness(seconds):
    """'2 days 3 hours' style text for a number of seconds late."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [(days, "day"), (hours, "hour"), (minutes, "minute")]
    text = " ".join(f"{n} {unit}{'s' * (n != 1)}" for n, unit in parts if n)
    return text or f"{seconds} second{'s' * (seconds != 1)}"


class LateNotice(NbGraderPreprocessor):
    """Feedback: a note at the top of a late submission's feedback with when it was handed
    in, how late, the course's policy and the points it cost (nbgrader_config.py puts it
    after GetGrades in GenerateFeedback.preprocessors)."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry

        info = resources["nbgrader"]
        try:
            with Gradebook(info["db_url"]) as gb:
                sub = gb.find_submission(info["assignment"], info["student"])
                seconds, stamp, due = sub.total_seconds_late, sub.timestamp, sub.duedate
                notebook = gb.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
                penalty, score = notebook.late_submission_penalty or 0.0, notebook.score
        except MissingEntry:
            return nb, resources
        ext = extensions.find(course_root(self.config), info["student"], info["assignment"])
        if ext is not None:
            seconds = ext.seconds_late(seconds, due)
            due = ext.new_due(due)
        if seconds <= 0:
            return nb, resources
        rule = LatePolicy(parent=self)
        cost = (f"It cost {penalty:g} of the {score:g} points earned in this notebook." if penalty
                else "It cost no points.")
        extended = "your extended due date" if ext is not None else "the due date"
        when = (f"Submitted {stamp:%Y-%m-%d %H:%M} UTC, {lateness(seconds)} after {extended} "
                f"({due:%Y-%m-%d %H:%M} UTC).")
        text = f"**Handed in late.** {when} {rule.describe()} {cost}"
        nb.cells.insert(0, new_markdown_cell(text, metadata={"late_notice": True}))
        return nb, resources
