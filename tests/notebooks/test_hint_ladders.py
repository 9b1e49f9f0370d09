"""Every exercise has a ladder of three collapsed hints, right after its prompt: the idea,
then the shapes and the functions that help, then the tricky step in words. (That no hint
holds the answer's code is tests/notebooks/test_no_answers_handed_out.py's: it reads the hints as
part of the notebook.)"""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNGS = ("Hint 1: the idea", "Hint 2: shapes and functions", "Hint 3: the tricky step")
DETAILS = re.compile(r"<details(?P<attrs>[^>]*)>\s*<summary>(?P<summary>.*?)</summary>(?P<body>.*?)</details>", re.S)
CHECKED = re.compile(r"check_\w+\(\s*(\w+)")


def exercises(path):
    """(index of the solution cell, its grade_id) of every exercise: a solution cell whose
    code the notebook's graded test cells check."""
    cells = nbformat.read(path, as_version=4).cells
    checked = {name for c in cells if c.metadata.get("nbgrader", {}).get("grade")
               for name in CHECKED.findall(c.source)}
    return cells, [(i, c.metadata["nbgrader"]["grade_id"]) for i, c in enumerate(cells)
                   if c.metadata.get("nbgrader", {}).get("solution") and not c.metadata["nbgrader"].get("grade")
                   and c.metadata["nbgrader"]["grade_id"] in checked]


SOLUTIONS = sorted((ROOT / "solutions").glob("*/*.ipynb"))


def test_every_notebook_has_exercises():
    assert SOLUTIONS and all(exercises(p)[1] for p in SOLUTIONS)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name)
def test_each_exercise_has_three_collapsed_rungs_right_after_its_prompt(path):
    cells, found = exercises(path)
    for index, grade_id in found:
        hints = cells[index - 1]
        assert hints.cell_type == "markdown", f"{grade_id}: the cell before the exercise is not its hints"
        blocks = list(DETAILS.finditer(hints.source))
        assert [b["summary"].strip() for b in blocks] == list(RUNGS), f"{grade_id}: {[b['summary'] for b in blocks]}"
        assert all("open" not in b["attrs"] for b in blocks), f"{grade_id}: a hint is shown open"
        assert all(len(b["body"].split()) >= 12 for b in blocks), f"{grade_id}: a rung says almost nothing"
        assert not DETAILS.sub("", hints.source).strip(), f"{grade_id}: the hints cell holds more than the hints"
        prompt = next(c for c in reversed(cells[:index - 1]) if c.cell_type == "markdown")
        assert re.search(r"^## Part \w \(\d+ points?\)", prompt.source, re.M), f"{grade_id}: no prompt above the hints"


def test_the_release_keeps_the_hints():
    for path in SOLUTIONS:
        release = ROOT / "notebooks" / path.parent.name / path.name
        cells, found = exercises(path)
        released = [c.source for c in nbformat.read(release, as_version=4).cells]
        for index, grade_id in found:
            assert cells[index - 1].source in released, f"{path.parent.name} {grade_id}"
