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

# The release drops the widget state that the executed sources carry in their metadata.
from nbgrader.converters import GenerateAssignment  # noqa: E402

c.GenerateAssignment.preprocessors = [
    *GenerateAssignment.class_traits()["preprocessors"].default(),  # nbgrader's own list
    "grader.nbgrader_plugins.ClearWidgetState",
]

c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE: replace the next line with your solution.\nraise NotImplementedError()",
    "markdown": "YOUR ANSWER HERE",
}

# A deleted test cell is put back from the source and graded, not left as a silent 0.
c.OverwriteCells.add_missing_cells = True

# Time limits: each cell 60 s, the whole notebook 180 s (grader/nbgrader_plugins.py), so
# a hanging submission costs one notebook budget, not 60 s times the number of cells.
c.Execute.timeout = 60
c.BudgetedExecute.notebook_budget = 180
c.Autograde.autograde_preprocessors = [
    "grader.nbgrader_plugins.BudgetedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Feedback never shows hidden tests, neither their source nor their lines in tracebacks.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "grader.nbgrader_plugins.HideHiddenTracebacks",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# LMS downloads (`make collect ZIP=...`): files named <student_id>_<notebook>.ipynb,
# e.g. ada_05_scaled_attention.ipynb; a folder prefix inside the zip is ignored.
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = r"(?:.*/)?(?P<student_id>[A-Za-z0-9.-]+)_(?P<file_id>\d\d_[A-Za-z0-9_]+\.ipynb)$"
