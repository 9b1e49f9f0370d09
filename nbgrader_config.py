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

# How students hand in (README: "The course server"; grader/instructor/exchange.py).
# The local route (both left empty): one account releases, submits and collects; students
# are simulated with `nbgrader submit --student=ID` (self-study, the LMS route, the tests).
# The exchange is exchange/ in the course (git-ignored), private to that account.
# The course server: every student has an account whose login name is their student id, in
# the Unix group COURSE_GROUP, and submits into the shared exchange SERVER_EXCHANGE, which
# `make setup-exchange` builds (outside the course folder). Collect then takes a submission
# only from the account of the student it names; otherwise only from the collecting account.
SERVER_EXCHANGE = ""  # e.g. "/srv/nbgrader/self-attention"
COURSE_GROUP = ""  # e.g. "self-attention"
if bool(SERVER_EXCHANGE) != bool(COURSE_GROUP):
    raise ValueError("nbgrader_config.py: the course server needs both SERVER_EXCHANGE and COURSE_GROUP")
c.Exchange.root = SERVER_EXCHANGE or os.path.join(ROOT, "exchange")
c.CourseExchange.group = COURSE_GROUP
c.ExchangeCollect.check_owner = bool(SERVER_EXCHANGE)
# Collect refuses (and lists) a submission that is not its student's; release never makes
# the exchange world-writable (nbgrader's own release sets it to 0777).
c.ExchangeFactory.collect = "grader.instructor.exchange.OwnedCollect"
c.ExchangeFactory.release_assignment = "grader.instructor.exchange.KeptRelease"
# The local exchange is created on first use (nbgrader itself only creates it on the first
# release): while it is missing the formgrader hides Release/Collect and the Assignment
# List cannot list courses. Not on the self-study route (`make lab` sets COURSE_SELF_STUDY),
# which has no exchange.
if not SERVER_EXCHANGE and not os.path.isdir(c.Exchange.root) and not os.environ.get("COURSE_SELF_STUDY"):
    try:
        os.makedirs(c.Exchange.root, mode=0o700, exist_ok=True)
        os.chmod(c.Exchange.root, 0o700)
    except OSError:
        pass  # a read-only course copy: nbgrader then reports the missing exchange itself

# A new gradebook learns nbgrader's schema version in this process, not from an `alembic`
# process of its own (grader/instructor/nbgrader_plugins.py: about 6 s less for every new gradebook).
from grader.instructor.nbgrader_plugins import read_schema_version_in_process  # noqa: E402

read_schema_version_in_process()

# The release drops the widget state that the executed sources carry in their metadata.
from nbgrader.converters import GenerateAssignment  # noqa: E402

c.GenerateAssignment.preprocessors = [
    *GenerateAssignment.class_traits()["preprocessors"].default(),  # nbgrader's own list
    "grader.instructor.nbgrader_plugins.ClearWidgetState",
]

c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE: replace the next line with your solution.\nraise NotImplementedError()",
    "markdown": "YOUR ANSWER HERE",
}

# A deleted test cell is put back from the source and graded, not left as a silent 0.
c.OverwriteCells.add_missing_cells = True

# Grading (grader/grading/execute.py): every cell but the test cells runs once in a fresh
# kernel; the test cells' checks run outside it, from the plan `make release` stored in
# the source. Every entry point (make autograde, nbgrader autograde, the formgrader)
# goes through this preprocessor. Time limits: each cell 60 s, each call of the student's
# code by a check 20 s, the whole notebook 180 s, so a hanging submission costs one
# notebook budget, not 60 s times the number of cells.
c.Execute.timeout = 60
c.GradingExecute.notebook_budget = 180
c.GradingExecute.call_timeout = 20
# The given cells after the last solution or test cell (demonstrations) are not run when
# grading: they cannot change a grade. True runs them as well.
c.GradingExecute.run_after_last_graded = False
# Each notebook runs in a kernel with a sandbox of its own (grader/isolation): its own user,
# mount, pid and network namespaces, read-only course files and Python environment, no
# grading material, limits on memory, CPU, processes and files. Where the OS has no user
# namespaces grading stops with the reason; set "python3" here only if you accept grading
# without isolation.
c.GradingExecute.kernel_name = "attention-grading"
# A copied solution or test cell is graded once, not a crash (grader/grading/sanitize.py).
# Tampering is shown, not punished: FlagTampering records which test, locked or graded
# cells the student changed (grader/grading/tamper.py) before nbgrader restores them.
c.Autograde.sanitize_preprocessors = [
    "grader.grading.tamper.FlagTampering",
    "nbgrader.preprocessors.ClearOutput",
    "grader.grading.sanitize.DropDuplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.Autograde.autograde_preprocessors = [
    "grader.grading.execute.GradingExecute",
    "grader.grading.sanitize.NoActiveContent",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "grader.grading.flags.SaveFlags",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Feedback never shows hidden tests, neither their source nor their lines in tracebacks.
# A late submission's feedback starts with when it came in, the policy and what it cost.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "grader.instructor.late.LateNotice",
    "grader.instructor.nbgrader_plugins.HideHiddenTracebacks",
    "nbgrader.preprocessors.ClearHiddenTests",
    "grader.grading.sanitize.NoActiveContent",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Nothing a student hands in runs in a reader's browser (grader/grading/sanitize.py): the
# autograded notebook is sanitised when it is graded (above), and every page nbgrader renders
# from a notebook (the formgrader's view of a submission, feedback) goes through nbconvert's
# HTMLExporter, which sanitises again, with bleach, whatever it is given: scripts, event
# handlers, `javascript:` links, frames, SVG, JavaScript and widget outputs, images from
# other sites. Text, PNG/JPEG images and the checks' messages and pictures stay.
c.HTMLExporter.preprocessors = ["grader.grading.sanitize.NoActiveContent"]
c.HTMLExporter.sanitize_html = True

# Late work (grader/grading/late.py), applied by `nbgrader autograde`, the formgrader and `make export`:
# "none" (marked late, no penalty), "zero", or "percent_per_day": percent_per_day % of the
# points earned for each day or part of a day after the due date, at most max_percent %.
# Due dates: `.venv/bin/nbgrader db assignment add 05_scaled_attention --duedate="2025-11-07 17:00:00 Europe/Berlin"`
# or the formgrader's Manage Assignments page.
c.AssignLatePenalties.plugin_class = "grader.grading.late.LatePolicy"
c.LatePolicy.penalty_method = "percent_per_day"
c.LatePolicy.percent_per_day = 10
c.LatePolicy.max_percent = 50
c.LatePolicy.grace_minutes = 0

# LMS downloads (`make collect ZIP=... ASSIGNMENT=... TIMES=...`, grader/instructor/lms.py): Canvas, Moodle
# and Blackboard file names, or <student_id>_<notebook>.ipynb. Times in Blackboard's file names,
# in a times file without an offset (Moodle's grading worksheet) and zip entry times (when
# zip_times is True) are read in this time zone.
c.LmsCollect.timezone = "UTC"
c.LmsCollect.zip_times = False
# A submission whose time nothing gives: "unknown" (no penalty, listed as lateness unknown)
# or "on_time" (counted as on time, no notice).
c.LmsCollect.unknown_time = "unknown"

# The grade report (`make export`, grader/instructor/report.py): who is listed as struggling, and the
# Canvas gradebook column of each assignment in grades_canvas.csv (default: its name).
c.GradeReport.struggling_percent = 50
# c.GradeReport.canvas_columns = {"05_scaled_attention": "Scaled attention (4567)"}

# Plain `nbgrader zip_collect` (the make targets use grader/instructor/lms.py instead): files named
# <student_id>_<notebook>.ipynb, e.g. ada_05_scaled_attention.ipynb.
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = r"(?:.*/)?(?P<student_id>[A-Za-z0-9.-]+)_(?P<file_id>\d\d_[A-Za-z0-9_]+\.ipynb)$"

# Functions that would do a whole exercise (each exercise's shortcuts in its module of
# grader/checks/exercises/; this table replaces them all): a check whose code uses one
# scores 0 when graded, and passes with a note in JupyterLab. E.g.
# c.Shortcuts.forbidden = {"scaled_dot_product_attention": ["F.scaled_dot_product_attention"]}
