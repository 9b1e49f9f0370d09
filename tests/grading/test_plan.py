"""What a test cell checks is derived once, at release, from the instructor's source."""
import json

import nbformat
import pytest

import grader
from grader.checks.exercises import EXERCISES
from grader.grading import plan
from grader.grading.layout import ROOT, assignments
from grader.grading.status import fingerprint

KEYS = grader.EXERCISE_KEYS
FOCUSES = {key: set(ex.focuses) for key, ex in EXERCISES.items()}


def test_plain_keyword_and_hidden_calls_are_all_read():
    source = ('"""Check things."""\n'
              'check_head(Head, focus="values")\n'
              'grader.check_masked_softmax(masked_softmax, "rows_sum_to_one")\n'
              '### BEGIN HIDDEN TESTS\n'
              'check_head(Head, "encoder")\n'
              'check_head(Head, "values", hidden=True, seed=3)\n'
              '### END HIDDEN TESTS\n')
    assert plan.derive(source, KEYS) == [
        plan.Check("head", "Head", "values"),
        plan.Check("masked_softmax", "masked_softmax", "rows_sum_to_one"),
        plan.Check("head", "Head", "encoder", hidden=True),
        plan.Check("head", "Head", "values", hidden=True, seed=3),
    ]


@pytest.mark.parametrize("source,words", [
    ("print('no check here')", "calls no check"),
    ("check_head(make_head(), 'values')", "by name"),
    ("check_head(Head, focus)", "must be a literal"),
    ("check_head(Head, 'values', device='cuda')", "grader owns device"),
    ("check_nothing(Head)", "not a check of this course"),
    ("check_head(Head, 'values'", "not valid Python"),
])
def test_a_plan_that_cannot_be_derived_says_why(source, words):
    with pytest.raises(plan.PlanError) as info:
        plan.derive(source, KEYS)
    assert words in str(info.value)


def test_an_unknown_focus_stops_the_release():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "check_head(Head, 'valeus')", metadata={"nbgrader": {"grade": True, "solution": False,
                                                             "grade_id": "t1", "points": 1}})])
    problems = plan.annotate(nb, KEYS, FOCUSES)
    assert "unknown focus 'valeus'" in problems["t1"]


@pytest.mark.parametrize("assignment", assignments())
def test_every_committed_test_cell_carries_the_plan_of_its_source(assignment):
    for path in sorted((ROOT / "solutions" / assignment).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        stored = plan.read(nb)
        for cell in nb.cells:
            if plan.is_test_cell(cell):
                grade_id = cell.metadata["nbgrader"]["grade_id"]
                assert stored[grade_id] == plan.derive(cell.source, KEYS), grade_id


def test_fingerprint_changes_with_files_inputs_and_settings():
    base = fingerprint({"a.ipynb": b"x"}, "inputs", {"device": "cpu"})
    assert base == fingerprint({"a.ipynb": b"x"}, "inputs", {"device": "cpu"})
    assert base != fingerprint({"a.ipynb": b"y"}, "inputs", {"device": "cpu"})
    assert base != fingerprint({"b.ipynb": b"x"}, "inputs", {"device": "cpu"})
    assert base != fingerprint({"a.ipynb": b"x"}, "other inputs", {"device": "cpu"})
    assert base != fingerprint({"a.ipynb": b"x"}, "inputs", {"device": "cuda"})


def test_grading_inputs_cover_code_config_and_due_date(tmp_path):
    import shutil

    from grader.grading.status import grading_inputs

    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / "01_bag_of_words", course / "solutions" / "01_bag_of_words")
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    first = grading_inputs(course, "01_bag_of_words", None)
    assert first == grading_inputs(course, "01_bag_of_words", None)
    assert first != grading_inputs(course, "01_bag_of_words", "2026-12-01 12:00:00")
    (course / "nbgrader_config.py").write_text((course / "nbgrader_config.py").read_text() + "\n# edited\n")
    assert first != grading_inputs(course, "01_bag_of_words", None)


def test_outcomes_are_typed_data():
    from grader.checks.core import evaluate
    from grader.answers.correct import CORRECT, student_from

    exercise = EXERCISES["masked_softmax"]
    ok = evaluate(exercise, CORRECT["masked_softmax"], "values")
    assert ok.passed and ok.message == "" and ok.line().startswith("\u2713 masked_softmax")
    mistake = next(m for m in exercise.mistakes if m.key == "softmax_wrong_dim")
    wrong = evaluate(exercise, student_from("masked_softmax", mistake.fn), "values", hidden=True, seed=4)
    assert not wrong.passed and wrong.seed == 4 and wrong.mistake == "softmax_wrong_dim"
    assert wrong.mistake_name == mistake.name and f"Likely mistake: {mistake.name}" in wrong.message
    assert json.loads(json.dumps(wrong.to_json()))["mistake"] == "softmax_wrong_dim"
