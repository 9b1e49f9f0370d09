"""The reference tensors in data/ are exactly what `make references` writes."""
import torch

from grader.answers import fixtures
from grader.checks.exercises import EXERCISES


def _assert_same(fresh, committed, where):
    assert type(fresh) is type(committed), where
    if isinstance(fresh, dict):
        assert list(fresh) == list(committed), where
        for key in fresh:
            _assert_same(fresh[key], committed[key], f"{where}.{key}")
    elif isinstance(fresh, torch.Tensor):
        assert fresh.dtype == committed.dtype and fresh.shape == committed.shape, where
        if fresh.is_floating_point():  # float64 results: allow only BLAS summation order
            torch.testing.assert_close(fresh, committed, rtol=1e-12, atol=1e-12, msg=where)
        else:
            assert torch.equal(fresh, committed), where
    else:
        assert fresh == committed, where


def test_references_have_not_drifted(tmp_path):
    fixtures.write_all(tmp_path)
    for key in EXERCISES:
        _assert_same(fixtures.load(key, tmp_path), fixtures.load(key), key)


def test_every_case_a_check_uses_is_stored():
    for key, ex in EXERCISES.items():
        stored = fixtures.load(key)
        assert {f.case for f in ex.focuses.values()} == set(stored)
        for case in stored.values():
            assert case["expected"].dtype == torch.float64


def test_make_references_leaves_files_with_the_same_values_untouched(tmp_path):
    """A file whose values are the same up to float64 rounding (another machine's BLAS) keeps
    its bytes and its time; a changed one is written, and so is a missing one."""
    keys = ["masked_softmax", "apply_rope"]
    written, unchanged = fixtures.write_all(tmp_path, keys)
    assert len(written) == 2 and unchanged == []
    rounded, changed = tmp_path / "masked_softmax.pt", tmp_path / "apply_rope.pt"
    cases = torch.load(rounded, weights_only=True)
    for case in cases.values():
        case["expected"] = case["expected"] * (1 + 4.4e-16)  # a last-digit difference
    torch.save(cases, rounded)
    cases = torch.load(changed, weights_only=True)
    next(iter(cases.values()))["expected"][..., 0] += 1e-6
    torch.save(cases, changed)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (rounded, changed)}
    written, unchanged = fixtures.write_all(tmp_path, keys)
    assert unchanged == [rounded] and written == [changed]
    assert (rounded.read_bytes(), rounded.stat().st_mtime_ns) == before[rounded]
    assert changed.read_bytes() != before[changed][0]
    _assert_same(fixtures.load("apply_rope", tmp_path), fixtures.load("apply_rope"), "apply_rope")


def test_make_references_names_an_unknown_exercise(tmp_path):
    import pytest

    with pytest.raises(SystemExit, match="no exercise called softmax_rowz"):
        fixtures.write_all(tmp_path, ["softmax_rowz"])
