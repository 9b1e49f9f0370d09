"""A NameError (nothing defined under the student's name, or a name inside their code) is
raised by no catalogued mistake: the check reports it without running the catalogue, which
on a blank notebook would cost every check a run of each mistake."""
import dataclasses

import pytest

import grader  # noqa: F401 (hands the course's answers to the checks)
from grader.checks import registry
from grader.checks.core import evaluate
from grader.checks.exercises import EXERCISES

KEY = "scaled_dot_product_attention"


def _counting_answers(calls):
    given = registry.answers()

    def counted(mistake):
        def fn(*args):
            calls.append(mistake.key)
            return mistake.fn(*args)
        return dataclasses.replace(mistake, fn=fn)

    mistakes = {**given.mistakes, KEY: tuple(counted(m) for m in given.mistakes[KEY])}
    return dataclasses.replace(given, mistakes=mistakes)


@pytest.mark.parametrize("raised, runs_catalogue", [
    (NameError("name 'wei' is not defined"), False),
    (RuntimeError("The size of tensor a (7) must match the size of tensor b (5)"), True),
])
def test_a_name_error_is_reported_without_running_the_catalogue(raised, runs_catalogue):
    def scaled_dot_product_attention(q, k, v, mask=None):
        raise raised

    calls = []
    with registry.using(_counting_answers(calls)):
        outcome = evaluate(EXERCISES[KEY], scaled_dot_product_attention, "values")
    assert not outcome.passed and type(raised).__name__ in outcome.message
    assert bool(calls) == runs_catalogue, calls
