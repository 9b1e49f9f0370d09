"""Fixed inputs and expected outputs for the visible checks, stored in data/references/.

`make references` (python -m grader.answers.fixtures [KEY ...]) writes them from the float64
reference implementations, and leaves a file whose values have not changed as it is (a
difference of float64 rounding, from another machine's BLAS, is no change);
tests/checks/test_fixtures.py regenerates them and fails on any drift.
Hidden checks do not use these files: they draw fresh inputs and compute the
reference live.
"""
import argparse
from pathlib import Path

import torch

from grader.checks.fixed import DATA_ENV, REFERENCES_DIR, load, references_dir  # noqa: F401

SEED = 20261121


def build(exercise):
    """{case: {"inputs": ..., "expected": ...}} for every case the exercise's checks use."""
    from grader.checks.inputs import fixed_dims

    dims = fixed_dims(exercise)
    cases = {}
    for i, case in enumerate(sorted({f.case for f in exercise.focuses.values()})):
        gen = torch.Generator().manual_seed(SEED + i)
        inputs = exercise.draw(gen, case, dims)
        cases[case] = {"inputs": inputs, "expected": exercise.reference(*inputs.values())}
    return cases


def same_values(fresh, stored, rtol=1e-12, atol=1e-12):
    """Whether two stored structures hold the same case: the same keys, types, shapes,
    dtypes, integers and other values, and floating values equal up to float64 rounding
    (another machine's BLAS may sum in another order: 4e-16 is no change)."""
    if type(fresh) is not type(stored):
        return False
    if isinstance(fresh, dict):
        return list(fresh) == list(stored) and all(same_values(fresh[k], stored[k], rtol, atol) for k in fresh)
    if isinstance(fresh, (list, tuple)):
        return len(fresh) == len(stored) and all(same_values(a, b, rtol, atol) for a, b in zip(fresh, stored))
    if isinstance(fresh, torch.Tensor):
        if fresh.dtype != stored.dtype or fresh.shape != stored.shape:
            return False
        if fresh.is_floating_point():
            return bool(torch.allclose(fresh, stored, rtol=rtol, atol=atol, equal_nan=True))
        return bool(torch.equal(fresh, stored))
    return fresh == stored


def write_all(directory=None, keys=None):
    """Write each exercise's cases (or those of keys) to directory; a file whose stored
    values are the same (same_values) is left as it is, bytes and time. Returns
    (written paths, unchanged paths)."""
    from grader.checks.exercises import EXERCISES

    directory = Path(directory or references_dir())
    directory.mkdir(parents=True, exist_ok=True)
    unknown = sorted(set(keys or ()) - set(EXERCISES))
    if unknown:
        raise SystemExit(f"no exercise called {', '.join(unknown)}; the keys are: {', '.join(EXERCISES)}")
    written, unchanged = [], []
    for key, exercise in EXERCISES.items():
        if keys and key not in keys:
            continue
        path = directory / f"{key}.pt"
        cases = build(exercise)
        if path.exists():
            try:
                stored = load(key, directory)
            except Exception:  # an unreadable file is written again
                stored = None
            if stored is not None and same_values(cases, stored):
                unchanged.append(path)
                continue
        torch.save(cases, path)
        written.append(path)
    return written, unchanged


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keys", nargs="*", help="exercise keys (default: every exercise)")
    parser.add_argument("--out", default=None, help="directory (default: data/references)")
    args = parser.parse_args(argv)
    written, unchanged = write_all(args.out, args.keys)
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} written, {len(unchanged)} unchanged (the same values, left as they were)")


if __name__ == "__main__":
    main()
