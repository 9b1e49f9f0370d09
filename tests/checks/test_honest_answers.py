"""Honest answers that differ from the solution only in how the function is written
(einsum, torch.where, a hand-written softmax, float64 inside) pass every check that
grading 05 runs, visible and hidden (fresh seeds), through grader.checks.core as the grading
process runs them: what a check accepts needs no sandboxed grading of its own. Answers
that change the notebook itself (cells added, moved, duplicated, magics, line endings)
are graded whole in the synthetic class (tests/grading/test_trust.py)."""
import random

import nbformat
import pytest

from grader.checks.core import evaluate
from grader.checks.exercises import EXERCISES
from grader.grading import plan
from grader.grading.layout import ROOT
from support import synthetic

A = "05_scaled_attention"


@pytest.fixture(scope="module")
def checks():
    source = nbformat.read(ROOT / "solutions" / A / f"{A}.ipynb", as_version=4)
    return [check for cell_checks in plan.read(source).values() for check in cell_checks]


def _answer(variant):
    """The student's function, from the variant's solution cell run on the notebook's imports."""
    nb = synthetic.HONEST_ANSWERS[variant](ROOT, A, A)
    solution = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    namespace = {}
    exec(compile("import torch\nimport torch.nn.functional as F\n" + solution.source,
                 f"<{variant}>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("variant", sorted(synthetic.HONEST_ANSWERS))
def test_an_honest_answer_passes_every_graded_check(checks, variant):
    namespace = _answer(variant)
    assert {c.hidden for c in checks} == {False, True}  # visible and hidden checks
    for check in checks:
        seed = check.seed if check.seed is not None else random.SystemRandom().randrange(2**31)
        outcome = evaluate(EXERCISES[check.exercise], namespace[check.student], check.focus,
                           hidden=check.hidden, seed=seed if check.hidden else None,
                           device="cpu", graded=True)
        assert outcome.passed, outcome.message


def test_a_wrong_answer_written_the_same_way_fails(checks):
    """The same path fails the einsum answer with its softmax over the wrong dimension."""
    namespace = {}
    exec("import torch\n"
         "def scaled_dot_product_attention(q, k, v, mask=None):\n"
         "    wei = torch.einsum('bqh,bkh->bqk', q, k) / q.shape[-1] ** 0.5\n"
         "    if mask is not None:\n        wei = wei.masked_fill(mask, float('-inf'))\n"
         "    return torch.einsum('bqk,bkh->bqh', wei.softmax(-2), v)\n", namespace)
    outcomes = [evaluate(EXERCISES[c.exercise], namespace[c.student], c.focus, hidden=c.hidden,
                         seed=c.seed or 1, device="cpu", graded=True) for c in checks]
    assert not all(o.passed for o in outcomes)
    assert any("wrong dimension" in o.message for o in outcomes if not o.passed)
