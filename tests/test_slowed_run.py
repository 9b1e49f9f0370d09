"""scripts/slowed_run.py, `make test-slowed`: the command runs in a group of its own beside the
load's, with the weights that slow it by the factor, and both groups are gone afterwards. The
load itself is not started here (it would take both cores from the rest of the suite)."""
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
def test_the_command_runs_in_its_own_group_weighted_against_the_load():
    groups = slowed.Groups(1.7)
    try:
        assert (groups.command / "cpu.shares").read_text().strip() == "1024"
        assert (groups.load / "cpu.shares").read_text().strip() == str(round(1024 * 0.7))
        shown = subprocess.run(["cat", "/proc/self/cgroup"], preexec_fn=groups.enter(groups.command),
                               capture_output=True, text=True, check=True).stdout
        line = next(l for l in shown.splitlines() if "cpu" in l.split(":")[1].split(","))
        assert line.endswith(f"/{groups.base.name}/command"), line
    finally:
        groups.close()
    assert not groups.base.exists()
