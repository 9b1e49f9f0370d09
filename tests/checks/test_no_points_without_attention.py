"""No points without attention: every answer in tests/support/baselines.py, checked as a graded run
checks it (each test cell's plan, stored in the source notebook, visible and hidden checks,
graded=True), earns at most a tenth of the points of its part."""
import json

import nbformat
import pytest
import torch

from support.baselines import BASELINES
from grader.checks.core import evaluate
from grader.checks.exercises import EXERCISES
from support.paths import ROOT

SOLUTIONS = ROOT / "solutions"


def _plans():
    """{exercise key: [(points, [plan entries])]} of every graded test cell of the course."""
    out = {}
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            plan = cell.metadata.get("grading_plan")
            if meta.get("grade") and plan:
                out.setdefault(plan[0]["exercise"], []).append((meta["points"], plan))
    return out


PLANS = _plans()


def points(student, cells):
    """The points the student earns: a test cell's points when every check in it passes."""
    earned, failures = 0, []
    for pts, plan in cells:
        outcomes = [evaluate(EXERCISES[c["exercise"]], student, c["focus"], hidden=c["hidden"],
                             seed=7 if c["hidden"] else None, graded=True) for c in plan]
        if all(o.passed for o in outcomes):
            earned += pts
        else:
            failures += [o.message for o in outcomes if not o.passed]
    return earned, failures


CASES = [(key, name) for key, answers in BASELINES.items() for name in answers]


def test_every_exercise_has_baselines_and_plans():
    assert set(BASELINES) == set(EXERCISES) == set(PLANS)


@pytest.mark.parametrize("key,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_an_answer_without_attention_earns_at_most_a_tenth(key, name):
    torch.manual_seed(0)
    total = sum(p for p, _ in PLANS[key])
    earned, failures = points(BASELINES[key][name], PLANS[key])
    assert earned <= total / 10, f"{name} earns {earned}/{total}: " + json.dumps(failures[:2])
