"""scripts/slowed_run.py, `make test-slowed`: the command runs in a group of its own whose CPU
time is capped at 1 / FACTOR of the machine's, and the group is gone afterwards, with whatever
groups the command left in it. Nothing is slowed here (the cap would starve what runs in it)."""
import os
import subprocess

import pytest

from support.paths import script

slowed = script("slowed_run")


def test_a_factor_of_one_or_less_is_refused():
    with pytest.raises(SystemExit) as stopped:
        slowed.main(["--factor", "1", "--", "true"])
    assert stopped.value.code == 2


def test_without_root_it_says_why_and_runs_nothing(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(slowed.os, "geteuid", lambda: 1000)
    assert slowed.main(["--", "touch", str(tmp_path / "ran")]) == 2
    assert "slowed_run: cannot slow this machine: needs root" in capsys.readouterr().err
    assert not (tmp_path / "ran").exists()


@pytest.mark.skipif(bool(slowed._unavailable()), reason=f"scripts/slowed_run.py: {slowed._unavailable()}")
def test_the_command_runs_in_a_group_capped_at_the_factor_and_the_group_goes_with_its_leftovers():
    group = slowed.Capped(1.7)
    try:
        cores = min(len(os.sched_getaffinity(0)) / 1.7, slowed._enclosing_cap(group.folder.parent))
        quota = int((group.folder / "cpu.cfs_quota_us").read_text())
        period = int((group.folder / "cpu.cfs_period_us").read_text())
        assert quota == int(cores * period)  # at most an enclosing group's cap (make test-slowed FACTOR=2.5)
        shown = subprocess.run(["cat", "/proc/self/cgroup"], preexec_fn=group.enter(),
                               capture_output=True, text=True, check=True).stdout
        line = next(l for l in shown.splitlines() if "cpu" in l.split(":")[1].split(","))
        assert line.endswith(f"/{group.folder.name}"), line
        (group.folder / "attention-sandbox-left" / "inner").mkdir(parents=True)  # a killed grading's
        assert set(group.stat()) >= {"nr_periods", "nr_throttled"}
    finally:
        assert group.close()
    assert not group.folder.exists()


@pytest.mark.skipif(bool(slowed._unavailable()), reason=f"scripts/slowed_run.py: {slowed._unavailable()}")
def test_a_group_whose_processes_outlive_the_command_stays_until_they_end():
    group = slowed.Capped(1.7)
    left = subprocess.Popen(["sleep", "60"], preexec_fn=group.enter())
    try:
        assert not group.close(wait=0.2) and group.folder.is_dir()
    finally:
        left.kill()
        left.wait()
    assert group.close() and not group.folder.exists()
