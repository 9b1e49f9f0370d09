"""Fixed inputs and expected outputs for the visible checks, stored in data/references/.

`make references` (python -m grader.answers.fixtures) writes them from the float64 reference
implementations; tests/test_fixtures.py regenerates them and fails on any drift.
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


def write_all(directory=None):
    from grader.checks.exercises import EXERCISES

    directory = Path(directory or references_dir())
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for key, exercise in EXERCISES.items():
        path = directory / f"{key}.pt"
        torch.save(build(exercise), path)
        written.append(path)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="directory (default: data/references)")
    args = parser.parse_args(argv)
    for path in write_all(args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
