"""An exercise defined with only what Exercise requires, none of the diagnosis' per-exercise
hooks (sizes, crops, pictures, families): its checks pass a correct answer and fail a wrong
one with a plain message, never with an error from the grader. The course's exercises,
each with one of its hooks taken away, do the same."""
import dataclasses

import pytest
import torch

from grader.answers.correct import CORRECT, student_from
from grader.checks.core import CheckError, run_check
from grader.checks.diagnosis import PLAIN, Diagnosis
from grader.checks.exercise import Exercise, Focus
from grader.checks.exercises import EXERCISES


def _double(a):
    return a * 2


def _draw(gen, case, d):
    return {"a": torch.randn(d["B"], d["T"], d["N"], generator=gen, dtype=torch.float64)}


@pytest.fixture
def exercise():
    ex = Exercise(name="double", call=lambda inputs: {"kind": "function", "args": [inputs["a"]], "names": ["a"]},
                  reference=_double, draw=_draw, dims={"B": (2, (2, 3)), "T": (5, (4, 6)), "N": (3, (7, 9))},
                  shape=lambda inputs: (tuple(inputs["a"].shape), ("B", "T", "N")),
                  focuses={"values": Focus("doubles its input", values=True)}, key="double_not_in_the_course")
    ex.mistakes = ()
    return ex


@pytest.fixture
def fixed(exercise):
    inputs = _draw(torch.Generator().manual_seed(0), "main", {"B": 2, "T": 5, "N": 3})
    return {"main": {"inputs": inputs, "expected": _double(inputs["a"])}}


def test_a_correct_answer_passes_visible_and_hidden_checks(exercise, fixed, capsys):
    run_check(exercise, lambda a: a + a, "values", fixed=fixed)
    run_check(exercise, lambda a: a + a, "values", hidden=True, seed=3)
    lines = capsys.readouterr().out.splitlines()
    assert [line.startswith("\u2713 ") for line in lines] == [True, True], lines


def test_wrong_values_get_the_plain_message_without_a_picture(exercise, fixed):
    with pytest.raises(CheckError, match="values differ from the reference") as caught:
        run_check(exercise, lambda a: a * 3, "values", fixed=fixed)
    assert caught.value.case is None and caught.value.picture is None


def test_a_wrong_shape_is_named_with_the_exercise_s_own_sizes(exercise, fixed):
    with pytest.raises(CheckError, match=r"returned shape \(2, 1, 3\); expected \(2, 5, 3\) = \(B, T, N\)"):
        run_check(exercise, lambda a: a[:, :1], "values", fixed=fixed)


def test_an_error_in_the_student_s_code_is_explained(exercise, fixed):
    def broken(a):
        return a @ torch.ones(4, 4, dtype=a.dtype)

    with pytest.raises(CheckError) as caught:
        run_check(exercise, broken, "values", fixed=fixed)
    assert "your code raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (10x3 and 4x4)" \
        in str(caught.value)


def test_sizes_alone_name_the_sizes_in_an_error_and_draw_no_picture(exercise, fixed):
    sized = dataclasses.replace(exercise, diagnosis=Diagnosis(
        sizes=lambda i: dict(zip(("B", "T", "N"), i["a"].shape))))

    def broken(a):
        return a @ torch.ones(4, 4, dtype=a.dtype)

    with pytest.raises(CheckError, match=r"Likely mistake: a matmul of \(10 = B\u00b7T, 3 = N\) by \(4"):
        run_check(sized, broken, "values", fixed=fixed)
    with pytest.raises(CheckError, match="values differ from the reference") as caught:
        run_check(sized, lambda a: a * 3, "values", fixed=fixed)
    assert caught.value.case is None and caught.value.picture is None  # no crop: no picture


def _without(key, hook):
    ex = EXERCISES[key]
    return dataclasses.replace(ex, diagnosis=dataclasses.replace(ex.diagnosis, **{hook: getattr(PLAIN, hook)}))


def _hooks_set():
    return [pytest.param(key, f.name, id=f"{key}-{f.name}") for key, ex in EXERCISES.items()
            for f in dataclasses.fields(Diagnosis) if getattr(ex.diagnosis, f.name) != getattr(PLAIN, f.name)]


@pytest.mark.parametrize("key,hook", _hooks_set())
def test_a_course_exercise_without_one_hook_still_checks(key, hook):
    ex = _without(key, hook)
    run_check(ex, CORRECT[key], "values", quiet=True)
    mistake = ex.mistakes[0]
    with pytest.raises(CheckError) as caught:
        run_check(ex, student_from(key, mistake.fn), "values", quiet=True)
    first, *rest = str(caught.value).splitlines()
    assert first.endswith(f": {ex.focuses['values'].description}") and rest, str(caught.value)


def test_every_hook_is_set_by_some_exercise_of_the_course():
    assert {p.values[1] for p in _hooks_set()} == {f.name for f in dataclasses.fields(Diagnosis)}


def test_without_its_task_a_trivial_answer_is_told_to_see_the_exercise_text():
    ex = _without("causal_weights", "task")
    with pytest.raises(CheckError, match=r"your output equals zeros: .*\n  The task: see the exercise text\."):
        run_check(ex, lambda scores: torch.zeros_like(scores), "values", quiet=True)
    with pytest.raises(CheckError, match=r"The task: softmax the scores over the keys, the future removed\."):
        run_check(EXERCISES["causal_weights"], lambda scores: torch.zeros_like(scores), "values", quiet=True)


def test_without_its_crop_a_values_check_shows_no_picture():
    wrong = lambda scores: torch.softmax(scores, -1)  # the future not masked
    with pytest.raises(CheckError) as caught:
        run_check(EXERCISES["causal_weights"], wrong, "values", quiet=True)
    assert caught.value.case is not None
    with pytest.raises(CheckError) as caught:
        run_check(_without("causal_weights", "crop"), wrong, "values", quiet=True)
    assert caught.value.case is None and caught.value.picture is None
