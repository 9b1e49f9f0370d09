"""A fresh student's own attempts at notebook 07 (tests/attempts_07_fresh.py), run through
every check of their exercise, as the notebook's check cells run them. Each wrong attempt must be named (a failing check names one of
its expected mistakes, or where a phrase is given, its message says it), never misleading (a named
mistake outside the expected ones) and never passing; each right one must pass everything.
The counts per exercise are printed (pytest -s) and held to the figures below."""
import collections
import functools

import pytest

from attempts_07_fresh import ATTEMPTS
from diagnosis_eval import load
from grader.checks.core import CheckError, run_check
from grader.checks.exercises import EXERCISES as CHECKS

EXERCISES = ("Block", "GPT", "generate")


@functools.lru_cache(maxsize=None)
def verdict(attempt_id):
    """named, generic, misleading, passing (a wrong attempt) or correct, misleading (a right one)."""
    attempt = next(a for a in ATTEMPTS if a["id"] == attempt_id)
    key, student = load(attempt)
    failures = []
    for focus in CHECKS[key].focuses:
        try:
            run_check(CHECKS[key], student, focus, quiet=True)
        except CheckError as err:
            failures.append((focus, err.finding, str(err)))
    if attempt.get("correct"):
        return ("correct" if not failures else "misleading"), failures
    if not failures:
        return "passing", failures
    keys = {key for _, key, _ in failures if key}
    expect = set(attempt.get("expect", ()))
    if keys - expect:
        return "misleading", failures
    phrase = attempt.get("phrase")  # where given, the message must say it (a key alone is not enough)
    if any(phrase in message for _, _, message in failures) if phrase else keys & expect:
        return "named", failures
    return "generic", failures


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: a["id"])
def test_attempt(attempt):
    got, failures = verdict(attempt["id"])
    shown = "\n".join(f"[{focus}] {key}: {message}" for focus, key, message in failures)
    if attempt.get("correct"):
        assert got == "correct", shown
    elif attempt.get("unnamed"):  # no check names its cause yet: it must still fail, honestly
        assert got == "generic", shown
    else:
        assert got == "named", shown


def test_counts():
    counts = {ex: collections.Counter() for ex in EXERCISES}
    for attempt in ATTEMPTS:
        counts[attempt["exercise"]][verdict(attempt["id"])[0]] += 1
    print("\n| exercise | named | generic | misleading | passing | correct passes |")
    for ex, c in counts.items():
        print(f"| 07 {ex} | {c['named']} | {c['generic']} | {c['misleading']} | {c['passing']} | {c['correct']} |")
    wrong = sum(c[v] for c in counts.values() for v in ("named", "generic", "misleading", "passing"))
    named = sum(c["named"] for c in counts.values())
    print(f"named: {named} of {wrong} wrong attempts ({100 * named / wrong:.0f} %)")
    assert sum(c["misleading"] + c["passing"] for c in counts.values()) == 0
    assert named / wrong >= 0.85
