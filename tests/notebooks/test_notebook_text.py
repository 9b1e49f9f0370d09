"""What a careful student reads: no reference implementation imported, no demo sizes left
lying around above an exercise, and an answer behind every "Check yourself" question."""
import ast
import re

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from grader.instructor import notebooks

SOLUTIONS = notebooks.notebook_paths("solutions")
ids = lambda p: p.parent.name
# Names an answer could silently take from the notebook instead of from its inputs.
SIZES = {"B", "T", "C", "head_size", "n_heads", "mask", "causal"}


def _bound(statements):
    """(assigned, deleted) names at notebook level, outside function and class bodies."""
    assigned, deleted = set(), set()
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            assigned.add(node.name)
            continue
        if isinstance(node, ast.Delete):
            deleted |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            continue
        for child in ast.walk(node):
            if isinstance(child, (ast.FunctionDef, ast.Lambda, ast.ClassDef, ast.comprehension)):
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                assigned.add(child.id)
    return assigned, deleted


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids)
def test_no_cell_imports_the_reference_implementations(path):
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            assert not re.search(r"grader\.reference|from grader import .*reference", cell.source), cell.source


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids)
def test_no_demo_size_or_mask_is_defined_above_an_exercise(path):
    live = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        if cell.metadata.get("nbgrader", {}).get("solution"):
            assert not live & SIZES, (f"{sorted(live & SIZES)} still defined above the exercise "
                                      f"{cell.metadata['nbgrader']['grade_id']}")
            continue
        # as IPython runs it: the install cell's %pip (and any magic) becomes Python first
        assigned, deleted = _bound(ast.parse(TransformerManager().transform_cell(cell.source)).body)
        live = (live | assigned) - deleted


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids)
def test_every_check_yourself_question_has_a_collapsed_answer(path):
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
    text = next(s for s in cells if "**Check yourself**" in s).split("**Check yourself**")[1]
    questions = re.findall(r"^\d+\. ", text, re.M)
    answers = re.findall(r"<details><summary>Answer</summary>\n\n(.+?)\n\n</details>", text, re.S)
    assert len(questions) >= 3 and len(answers) == len(questions)
    assert all(a.strip() for a in answers)
