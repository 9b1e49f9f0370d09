"""The feedback's late notice: a late submission's feedback page starts with when it was
handed in, how late (from the student's extended due date where one was granted), the
course's policy and the points it cost.

The policy itself is grading's (grader.grading.late, with the per-student extensions of
grader.grading.extensions): it is applied where nbgrader grades, so it lives below
grading. ``LatePolicy`` can still be imported from here, the name earlier versions of the course's nbgrader_config.py gave the plugin
(``c.AssignLatePenalties.plugin_class = "grader.instructor.late.LatePolicy"``).
"""
from nbformat.v4 import new_markdown_cell

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.grading.extensions import duration, find
from grader.grading.late import LatePolicy, course_root

__all__ = ["LateNotice", "LatePolicy"]


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
        ext = find(course_root(self.config), info["student"], info["assignment"])
        if ext is not None:
            seconds = ext.seconds_late(seconds, due)
            due = ext.new_due(due)
        if seconds <= 0:
            return nb, resources
        rule = LatePolicy(parent=self)
        cost = (f"It cost {penalty:g} of the {score:g} points earned in this notebook." if penalty
                else "It cost no points.")
        extended = "your extended due date" if ext is not None else "the due date"
        when = (f"Submitted {stamp:%Y-%m-%d %H:%M} UTC, {duration(seconds)} after {extended} "
                f"({due:%Y-%m-%d %H:%M} UTC).")
        text = f"**Handed in late.** {when} {rule.describe()} {cost}"
        nb.cells.insert(0, new_markdown_cell(text, metadata={"late_notice": True}))
        return nb, resources
