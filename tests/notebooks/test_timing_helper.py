"""notebook_helpers.timing: a variant not written yet, or failing, is left out with one line
that says which (never 'not available here' for the student's own code)."""
import torch

from notebook_helpers.timing import best_time, time_variants


def not_written(q):
    raise NotImplementedError()


def broken(q):
    return q[:, 99]  # IndexError


def test_variants_that_fail_are_left_out_with_the_reason(capsys):
    timings = time_variants({"plain": lambda q: q * 2, "yours": not_written, "your other": broken,
                             "a backend": broken}, [4, 8], lambda T: [torch.ones(2, T)],
                            yours={"yours", "your other"})
    lines = capsys.readouterr().out.splitlines()
    assert list(timings) == ["plain"] and len(timings["plain"]) == 2
    assert all(t >= 0 for t in timings["plain"])
    assert lines[0] == "yours: not written yet, so it is left out"
    assert lines[1].startswith("your other: your code raised IndexError (") and "left out" in lines[1]
    assert lines[2].startswith("a backend: not available here (")
    assert len(lines) == 3


def test_best_time_runs_the_function_and_gives_milliseconds():
    calls = []
    assert best_time(lambda x: calls.append(x), 1.0, repeat=4) >= 0
    assert calls == [1.0] * 4
