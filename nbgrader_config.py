"""nbgrader configuration: the repository root is the course directory.

solutions/<assignment>/<notebook>.ipynb are the instructor sources; `make release`
writes the student versions to notebooks/<assignment>/.
"""
import os

ROOT = os.path.dirname(os.path.abspath(__file__))

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = "self-attention"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"

# Local exchange inside the course (git-ignored), so release/fetch/submit/collect work
# without a system-wide /srv/nbgrader.
c.Exchange.root = os.path.join(ROOT, "exchange")
c.CollectApp.check_owner = False

c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE: replace the next line with your solution.\nraise NotImplementedError()",
    "markdown": "YOUR ANSWER HERE",
}

# A deleted test cell is put back from the source and graded, not left as a silent 0.
c.OverwriteCells.add_missing_cells = True
# Per-cell limit; the whole notebook also has a budget (see grader/autograde.py).
c.Execute.timeout = 60

# Feedback never shows hidden tests.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
