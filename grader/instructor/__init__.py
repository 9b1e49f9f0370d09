"""The instructor's tools: the commands (cli, `python -m grader.instructor`), the notebooks'
execute/release/validate (notebooks), the student bundle (bundle), LMS downloads (lms) and
their times (submission_times), the roster, extensions and the CSV files they are read
from (roster, extensions, csvfile), the late policy (late), exports and the grade report
(report), and the nbgrader plugins the course's config names (nbgrader_plugins)."""
