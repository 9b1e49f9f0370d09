"""scripts/hidden_sweep.py: every catalogued mistake against the hidden checks over many
seeds (make hidden-sweep). Here with a few seeds, and with planted answers that must show up
in its table."""
from types import SimpleNamespace

import pytest
import torch

from grader.checks import inputs
from grader.checks.exercises import EXERCISES
from support.paths import script

hidden_sweep = script("hidden_sweep")


def _drawn_T(key, seed):
    ex = EXERCISES[key]
    return inputs.draw_dims(ex, torch.Generator().manual_seed(seed))["T"]


def test_a_mistake_that_passes_and_one_that_is_not_named_are_reported_with_their_seeds():
    key = "masked_softmax"
    visible_T = inputs.fixed_dims(EXERCISES[key])["T"]
    reference = EXERCISES[key].reference

    def wrong_at_the_visible_size(scores, mask):  # right wherever the hidden draw picks another T
        out = reference(scores, mask)
        return out.flip(-1) if scores.shape[-1] == visible_T else out

    planted = [SimpleNamespace(key="wrong_at_the_visible_size", fn=wrong_at_the_visible_size),
               SimpleNamespace(key="returns_none", fn=lambda *args: None),
               *EXERCISES[key].mistakes]
    seeds = list(range(8))
    result = hidden_sweep.sweep(key, seeds, mistakes=planted)
    expected = [s for s in seeds if _drawn_T(key, s) != visible_T]
    assert 0 < len(expected) < len(seeds)  # seeds of both kinds
    assert result.passed == [("wrong_at_the_visible_size", s) for s in expected]
    # where the draw picks the visible size it fails, but as no catalogued mistake
    assert [(name, seed) for name, seed, _ in result.unnamed] == [
        (name, s) for s in seeds for name in ("wrong_at_the_visible_size", "returns_none")
        if name == "returns_none" or s not in expected]
    assert all("returned None" in line for name, _, line in result.unnamed if name == "returns_none")
    assert result.mistakes == ["wrong_at_the_visible_size", "returns_none", *(m.key for m in EXERCISES[key].mistakes)]
    assert not result.same_on_cpu


def test_a_mistake_only_a_gpu_shows_is_left_out_on_the_cpu():
    keys = [key for key, ex in EXERCISES.items() if any(m.key == "mask_wrong_device" for m in ex.mistakes)]
    assert keys
    for key in keys:
        result = hidden_sweep.sweep(key, [])
        assert result.same_on_cpu == ["mask_wrong_device"], key
        assert len(result.mistakes) == len(EXERCISES[key].mistakes) - 1


def test_the_catalogue_passes_a_short_sweep_and_the_table_says_so(capsys):
    assert hidden_sweep.main(["--seeds", "2", "generate", "masked_softmax"]) == 0
    out = capsys.readouterr().out
    header, *rows = out[out.index("exercise"):].splitlines()
    assert header.split()[:5] == ["exercise", "seeds", "mistakes", "passed", "not"]
    assert [row.split()[:2] for row in rows] == [["generate", "2"], ["masked_softmax", "2"]]
    assert all(row.split()[3:5] == ["0", "0"] for row in rows)


def test_an_unknown_exercise_is_refused_with_the_known_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        hidden_sweep.main(["genrate"])
    assert exit_info.value.code == 2
    assert "no such exercise: genrate" in capsys.readouterr().err
