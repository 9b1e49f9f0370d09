"""tests/support/machine.py, the figures `make test` ends with: the machine's busy CPU seconds
count what a process spends, and the stalls are seconds, one per kind the kernel counts."""
import time

import pytest

from support import machine


@pytest.mark.skipif(machine.busy_cpu_seconds() is None, reason="no /proc/stat here")
def test_the_busy_seconds_count_what_a_process_spends():
    start_busy, start_stalls = machine.busy_cpu_seconds(), machine.stall_seconds()
    spent = time.process_time()
    while time.process_time() - spent < 0.5:  # half a CPU second, however long that takes here
        pass
    busy, stalls = machine.since(start_busy, start_stalls)
    assert busy >= 0.5 - 0.05  # the whole machine's: this process's half second and whatever else ran
    assert set(stalls) == set(start_stalls) <= set(machine.STALLS)
    assert all(seconds >= 0 for seconds in stalls.values())


def test_without_a_first_reading_nothing_is_made_up(monkeypatch):
    monkeypatch.setattr(machine, "busy_cpu_seconds", lambda: 12.0)
    assert machine.since(None, {})[0] is None
    assert machine.since(10.0, {})[0] == 2.0
