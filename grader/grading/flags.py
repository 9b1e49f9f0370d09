"""Flags for the instructor, recorded where nbgrader keeps what a grader reads.

grader.grading.execute collects what a submission should be looked at for (tampered cells
from grader.grading.tamper, ways of hiding from grader.grading.scan) into
``resources["grading_flags"]`` and ``<notebook>.grading.json``. SaveFlags, configured after
nbgrader's SaveAutoGrades, writes them into the auto comment of the notebook's first
solution cell, which the formgrader shows beside the student's answer; ``make autograde``
carries the same comment into the course gradebook, and grades.csv and the report read
the flags from the status file.
"""
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.grading.scan import Flag

HEADING = "Flagged for review (graded as usual):"


def comment_text(flags):
    """The comment that lists the flags, or "" when there are none."""
    if not flags:
        return ""
    return "\n".join([HEADING, *(f"- {Flag(**f).text() if isinstance(f, dict) else f.text()}"
                                 for f in flags)])


def with_flags(comment, flags):
    """An auto comment with the flags' text in front (nbgrader's own comment kept after it)."""
    text = comment_text(flags)
    if not text:
        return comment
    return text + (f"\n\n{comment}" if comment else "")


class SaveFlags(NbGraderPreprocessor):
    """Write the grading flags into the gradebook's comment of the first solution cell."""

    def preprocess(self, nb, resources):
        from grader.grading.execute import FLAGS_KEY

        flags = resources.get(FLAGS_KEY) or []
        first = next((c for c in nb.cells if utils.is_solution(c)), None)
        info = resources.get("nbgrader", {})
        if not flags or first is None or "db_url" not in info:
            return nb, resources
        with Gradebook(info["db_url"]) as gb:
            try:
                comment = gb.find_comment(first.metadata["nbgrader"]["grade_id"], info["notebook"],
                                          info["assignment"], info["student"])
            except MissingEntry:
                return nb, resources
            comment.auto_comment = with_flags(comment.auto_comment, flags)
            gb.db.commit()
        return nb, resources
