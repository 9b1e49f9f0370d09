"""Hidden checks against every catalogued mistake, over many seeds.

A hidden check draws fresh sizes and inputs from a seed of its own each time a notebook is
graded, so a mistake that passes it for one seed in a few hundred gets the hidden points now
and then: a wrong grade that no single run shows. The test suite tries 25 random seeds per
run across all exercises (tests/checks/test_exercises.py); this sweep tries many per
exercise and says, for each, how many mistakes passed or failed without being named.

    make hidden-sweep                                       # every exercise, 200 seeds each
    make hidden-sweep SWEEP_ARGS="--seeds 1000 generate"

Mistakes that the visible check does not tell from the right answer on this machine's CPU
(a mask left on the CPU, which only a GPU shows) are listed and left out. Exit status 1 when
a mistake passed or was not named."""
import argparse
import contextlib
import io
import random
import sys
import time
from dataclasses import dataclass, field

import torch

import grader
from grader.answers.correct import CORRECT, student_from
from grader.checks.exercises import EXERCISES

FOCUS = "values"  # every exercise's check of the reference's values, the one that names mistakes


@dataclass
class Sweep:
    key: str
    seeds: int
    mistakes: list  # the keys tried
    same_on_cpu: list  # the keys left out: the visible check passes them on the CPU
    passed: list = field(default_factory=list)  # (mistake key, seed)
    unnamed: list = field(default_factory=list)  # (mistake key, seed, what the check said first)
    seconds: float = 0.0


def _check(key, answer, seed=None):
    """The check's error, or None when it passes (its printed line swallowed)."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            getattr(grader, f"check_{key}")(answer, FOCUS, hidden=seed is not None, seed=seed)
        except grader.CheckError as err:
            return err
    return None


def sweep(key, seeds, mistakes=None):
    """Every mistake of the exercise (or `mistakes`: Mistake-like objects with .key and .fn)
    against the hidden check with each seed; the right answer must pass each seed too."""
    start = time.perf_counter()
    tried, same = [], []
    for mistake in EXERCISES[key].mistakes if mistakes is None else mistakes:
        answer = student_from(key, mistake.fn)
        (same if _check(key, answer) is None else tried).append((mistake.key, answer))
    result = Sweep(key, len(seeds), [k for k, _ in tried], [k for k, _ in same])
    for seed in seeds:
        error = _check(key, CORRECT[key], seed)
        if error is not None:
            raise SystemExit(f"{key}: the right answer fails the hidden check with seed {seed}:\n{error}")
        for name, answer in tried:
            error = _check(key, answer, seed)
            if error is None:
                result.passed.append((name, seed))
            elif "Likely mistake" not in str(error):
                said = str(error).splitlines()[1:2] or [""]  # the line under the check's label
                result.unnamed.append((name, seed, said[0].strip()))
    result.seconds = time.perf_counter() - start
    return result


def table(results):
    rows = [("exercise", "seeds", "mistakes", "passed", "not named", "left out (same on the CPU)", "s")]
    rows += [(r.key, str(r.seeds), str(len(r.mistakes)), str(len(r.passed)), str(len(r.unnamed)),
              ", ".join(r.same_on_cpu) or "-", f"{r.seconds:.0f}") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exercises", nargs="*", help="exercise keys (default: all)")
    parser.add_argument("--seeds", type=int, default=200, help="hidden seeds per exercise (default 200)")
    parser.add_argument("--start", type=int, default=0, help="seeds the list of hidden seeds (default 0)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.exercises) - set(EXERCISES))
    if unknown:
        parser.error(f"no such exercise: {', '.join(unknown)} (known: {', '.join(sorted(EXERCISES))})")
    rng = random.Random(args.start)
    results = []
    for key in args.exercises or sorted(EXERCISES):
        seeds = [rng.randrange(2**31 - 1) for _ in range(args.seeds)]
        results.append(sweep(key, seeds))
        print(f"{key}: {len(results[-1].passed)} passed, {len(results[-1].unnamed)} not named "
              f"({results[-1].seconds:.0f} s)", flush=True)
    print(table(results))
    for r in results:
        for name, seed in r.passed:
            print(f"PASSED  {r.key} {name} with seed {seed}")
        for name, seed, line in r.unnamed:
            print(f"NOT NAMED  {r.key} {name} with seed {seed}: {line}")
    return 1 if any(r.passed or r.unnamed for r in results) else 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # the checks' tensors are tiny: a second thread only costs (11 min against 9 here)
    sys.exit(main())
