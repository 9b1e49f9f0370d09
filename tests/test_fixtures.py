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
