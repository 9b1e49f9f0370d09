"""02 asks for a copy of 01's bag_of_words_loop: a check cell names a copy that is wrong
before the comparison cell, whose text speaks of rounding, reads its output."""

import nbformat
import pytest
import torch

from grader import check_bag_of_words_loop
from grader.checks.core import CheckError
from support.paths import ROOT

NOTEBOOK = ROOT / "notebooks" / "02_tril_matmul" / "02_tril_matmul.ipynb"


def aliasing_loop(x):
    """Writes each average into x itself, then reads it back as a token."""
    B, T, C = x.shape
    xbow = x
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(0)
    return xbow


def test_the_copy_is_checked_before_the_comparison():
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    copy = next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "bag_of_words_loop")
    compare = next(i for i, c in enumerate(cells) if "torch.allclose(xbow_loop, xbow_matmul)" in c.source)
    checks = [i for i, c in enumerate(cells) if 'check_bag_of_words_loop(bag_of_words_loop, "values")' in c.source]
    assert checks and copy < checks[0] < compare
    assert not cells[checks[0]].metadata.get("nbgrader", {}).get("grade"), "the check of the copy is not graded"


def test_an_aliasing_copy_is_named_as_writing_into_its_input():
    with pytest.raises(CheckError) as err:
        check_bag_of_words_loop(aliasing_loop, "values")
    assert "in place" in str(err.value) and "input x" in str(err.value)
    check_bag_of_words_loop(lambda x: torch.stack([x[:, : t + 1].mean(1) for t in range(x.shape[1])], 1), "values")
