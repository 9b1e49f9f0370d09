"""An exercise defined with only what Exercise requires, none of the diagnosis' per-exercise
hooks (sizes, crops, pictures, families): its checks pass a correct answer and fail a wrong
one with a plain message, never with an error from the grader."""
import pytest
import torch

from grader.checks.core import CheckError, Exercise, Focus, run_check


def _double(a):
    return a * 2


def _draw(gen, case, d):
    return {"a": torch.randn(d["B"], d["T"], d["N"], generator=gen, dtype=torch.float64)}


@pytest.fixture
def exercise():
    ex = Exercise(name="double", call=lambda inputs: {"kind": "function", "args": [inputs["a"]], "names": ["a"]},
                  reference=_double, draw=_draw, dims={"B": (2, (2, 3)), "T": (5, (4, 6)), "N": (3, (7, 9))},
                  shape=lambda inputs: (tuple(inputs["a"].shape), "(B, T, N)"),
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
