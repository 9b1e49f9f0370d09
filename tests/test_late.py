"""The late policy: its arithmetic, its settings, and nbgrader's hook."""
import pytest
from traitlets import TraitError
from traitlets.config import Config

from grader.late import DAY, LatePolicy, days_late, late_penalty, lateness


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
    assert lateness(DAY + 3600 + 60) == "1 day 1 hour 1 minute"
    assert lateness(2 * DAY) == "2 days"
