"""The late policy: its arithmetic, its settings, nbgrader's hook, and per-student extensions."""
import datetime
import re

import pytest
from traitlets import TraitError
from traitlets.config import Config

from grader.grading.extensions import Extension, duration, parse_extra
from grader.instructor.extensions import read_rows
from grader.grading.late import DAY, LatePolicy, days_late, late_penalty


def test_none_keeps_the_score_and_zero_takes_all_of_it():
    assert late_penalty(4.0, 10 * DAY, "none") == 0.0
    assert late_penalty(4.0, 1, "zero") == 4.0
    assert late_penalty(4.0, 0, "zero") == 0.0  # on time


@pytest.mark.parametrize("seconds, expected", [
    (0, 0.0),            # on time
    (1, 1.0),            # one second late: the first day started
    (DAY, 1.0),          # exactly one day
    (DAY + 1, 2.0),      # the second day started
    (3.5 * DAY, 4.0),
    (30 * DAY, 5.0),     # capped at 50 %
])
def test_percent_per_day_counts_started_days_and_stops_at_the_cap(seconds, expected):
    assert late_penalty(10.0, seconds, "percent_per_day", percent_per_day=10, max_percent=50) == pytest.approx(expected)


def test_the_penalty_is_a_share_of_the_points_earned_never_more():
    assert late_penalty(2.5, DAY, "percent_per_day", percent_per_day=20) == pytest.approx(0.5)
    assert late_penalty(0.0, DAY, "percent_per_day", percent_per_day=20) == 0.0
    assert late_penalty(3.0, 100 * DAY, "percent_per_day", percent_per_day=40, max_percent=100) == pytest.approx(3.0)


def test_grace_minutes_count_as_on_time_and_days_still_start_at_the_due_date():
    rule = dict(method="percent_per_day", percent_per_day=10, max_percent=50, grace_minutes=15)
    assert late_penalty(10.0, 14 * 60, **rule) == 0.0
    assert late_penalty(10.0, 16 * 60, **rule) == pytest.approx(1.0)
    assert late_penalty(10.0, DAY + 60, **rule) == pytest.approx(2.0)


def test_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="percent_per_day"):
        late_penalty(1.0, DAY, "half")


def test_policy_reads_nbgrader_config_and_feeds_nbgraders_hook():
    config = Config()
    config.LatePolicy.penalty_method = "percent_per_day"
    config.LatePolicy.percent_per_day = 25
    config.LatePolicy.max_percent = 60
    rule = LatePolicy(config=config)
    assert rule.late_submission_penalty("ada", 8.0, 2 * DAY) == pytest.approx(4.0)
    assert rule.late_submission_penalty("ada", 8.0, 5 * DAY) == pytest.approx(4.8)
    assert rule.late_submission_penalty("ada", 8.0, 0) is None  # nbgrader's "no penalty"
    assert "25% of the points earned" in rule.describe() and "at most 60%" in rule.describe()


@pytest.mark.parametrize("name, value", [("percent_per_day", -5), ("max_percent", 150), ("grace_minutes", -1)])
def test_impossible_settings_are_refused_with_the_setting_named(name, value):
    with pytest.raises(TraitError, match=name):
        LatePolicy(**{name: value})


def test_lateness_in_words():
    assert days_late(0) == 0 and days_late(1) == 1 and days_late(DAY + 1) == 2
    assert duration(DAY + 3600 + 60) == "1 day 1 hour 1 minute"
    assert duration(2 * DAY) == "2 days"


# --- per-student extensions ------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [
    ("2 days", 2 * DAY), ("36h", 36 * 3600), ("1 day 12 hours", 1.5 * DAY), ("90 minutes", 5400),
    ("1 week", 7 * DAY), ("12", 12 * 3600), ("0", 0),
])
def test_extra_time_is_read_in_words_or_hours(text, seconds):
    assert parse_extra(text) == seconds


@pytest.mark.parametrize("text", ["soon", "2 fortnights", "3 days later", ""])
def test_extra_time_that_is_not_a_duration_is_refused(text):
    with pytest.raises(ValueError, match="not an amount of time"):
        parse_extra(text)


def test_an_extension_measures_lateness_from_the_students_due_date():
    due = datetime.datetime(2025, 10, 1, 17, 0)
    extra = Extension("ada", "05", extra_seconds=2 * DAY)
    fixed = Extension("ada", "05", due=datetime.datetime(2025, 10, 2, 17, 0))
    assert extra.new_due(due) == datetime.datetime(2025, 10, 3, 17, 0)
    assert extra.seconds_late(2 * DAY + 3600, due) == 3600  # handed in 2 days 1 hour after the due date
    assert fixed.seconds_late(2 * DAY + 3600, due) == DAY + 3600
    assert fixed.seconds_late(3600, due) < 0  # on time for the student


def _extension_csv(tmp_path, text):
    path = tmp_path / "extensions.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, words", [
    ("student,extra\nada,2 days\n", "needs 'student', 'assignment'"),
    ("student,assignment,extra\nada,07_nope,2 days\n", "row 2: unknown assignment '07_nope'"),
    ("student,assignment,due,extra\nada,05_scaled_attention,2025-10-03,2 days\n", "row 2: give either"),
    ("student,assignment,extra\nada,05_scaled_attention,soon\n", "row 2: 'soon' is not an amount of time"),
    ("student,assignment,due\nada,05_scaled_attention,someday\n", "row 2: 'someday' is not a date"),
    ("student,assignment,extra\nada,05_scaled_attention,1h\nada,05_scaled_attention,2h\n", "row 3: ada / 05_scaled_attention already on row 2"),
])
def test_an_extensions_file_that_cannot_be_used_is_refused_with_the_rows_named(tmp_path, text, words):
    with pytest.raises(SystemExit, match=re.escape(words)):
        read_rows(_extension_csv(tmp_path, text), ["05_scaled_attention"])


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from support import synthetic

    return synthetic.make_course(tmp_path_factory.mktemp("late"), gradebook=True)


def _submission(root, student, late_by):
    """A submission of 05 worth 10 points, handed in ``late_by`` after the due date, written
    with nbgrader's Gradebook API (no grading)."""
    from nbgrader.api import Gradebook

    from grader.grading import layout

    due = datetime.datetime(2025, 10, 1, 17, 0)
    with Gradebook(layout.db_url(root)) as gb:
        gb.update_or_create_assignment("05_scaled_attention", duedate=due)
        gb.update_or_create_student(student)
        sub = gb.update_or_create_submission("05_scaled_attention", student, timestamp=due + late_by)
        for nb in sub.notebooks:
            for grade in nb.grades:
                grade.auto_score = grade.max_score
        gb.db.commit()


def _penalty(root, student):
    from nbgrader.api import Gradebook

    from grader.grading import layout

    with Gradebook(layout.db_url(root)) as gb:
        return gb.find_submission("05_scaled_attention", student).late_submission_penalty


def test_make_extensions_stores_them_and_the_gradebooks_penalties_follow(course, tmp_path, capsys):
    from grader.instructor.cli import import_extensions

    _submission(course, "ada", datetime.timedelta(days=2, hours=1))   # 3 started days: 30 % of 10
    _submission(course, "bo", datetime.timedelta(days=2, hours=1))
    from grader.instructor import report
    report.export(course, quiet=True)
    assert (_penalty(course, "ada"), _penalty(course, "bo")) == (pytest.approx(3.0), pytest.approx(3.0))
    import_extensions(course, _extension_csv(tmp_path, "student,assignment,extra\nada,05_scaled_attention,2 days\n"))
    out = capsys.readouterr().out
    assert "ada / 05_scaled_attention: extended to 2025-10-03 17:00 UTC (+2 days)" in out
    assert "late penalty 3 -> 1" in out  # one started day after her due date
    assert (_penalty(course, "ada"), _penalty(course, "bo")) == (pytest.approx(1.0), pytest.approx(3.0))
    import_extensions(course, _extension_csv(tmp_path, "student,assignment,extra\nada,05_scaled_attention,0\n"))
    assert "extension removed" in capsys.readouterr().out and _penalty(course, "ada") == pytest.approx(3.0)


def test_nbgraders_own_late_penalty_step_honours_an_extension(course, tmp_path):
    """What nbgrader autograde and the formgrader's Autograde button run: AssignLatePenalties
    with the course's plugin."""
    from nbformat.v4 import new_notebook
    from nbgrader.preprocessors import AssignLatePenalties

    from grader.grading import layout
    from grader.instructor.cli import import_extensions

    _submission(course, "cy", datetime.timedelta(days=1, hours=2))   # 2 started days: 20 %
    _submission(course, "dee", datetime.timedelta(days=2, hours=1))  # no extension: 3 started days, 30 %
    import_extensions(course, _extension_csv(tmp_path, "student,assignment,due\ncy,05_scaled_attention,2025-10-02 20:00:00 UTC\n"))
    with open(course / "extensions.json") as f:
        assert "cy" in f.read()
    config = layout.load_config(course)
    for student, expected in [("cy", 0.0), ("dee", 3.0)]:
        resources = {"nbgrader": {"notebook": "05_scaled_attention", "assignment": "05_scaled_attention",
                                  "student": student, "db_url": layout.db_url(course)}}
        AssignLatePenalties(config=config).preprocess(new_notebook(), resources)
        assert (_penalty(course, student) or 0.0) == pytest.approx(expected), student
