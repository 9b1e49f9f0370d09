"""What a learner sees when a check fails in a real kernel: the check's message, in a
few lines, with none of the grader's own code and nothing on stderr; the cell fails."""
import re

import nbformat
import pytest
from nbclient import NotebookClient

from grader.checks import calling

ANSI = re.compile(r"\x1b\[[0-9;]*m")

SETUP = '''import torch
from grader import check_masked_softmax, check_running_average_weights

def masked_softmax(scores, mask):
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=0)  # wrong dim

def masked_softmax_right(scores, mask):
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)

def running_average_weights(T):
    return undefined_name
'''
CELLS = {
    "wrong_dim": 'check_masked_softmax(masked_softmax, "rows_sum_to_one")',
    "student_code_raises": "check_running_average_weights(running_average_weights)",
    "passes": 'check_masked_softmax(masked_softmax_right, "rows_sum_to_one")',
}


@pytest.fixture(scope="module")
def outputs():
    """Each check cell's outputs, all run in one real kernel."""
    cells = [nbformat.v4.new_code_cell(SETUP)] + [nbformat.v4.new_code_cell(s) for s in CELLS.values()]
    nb = nbformat.v4.new_notebook(cells=cells)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True).execute()
    assert nb.cells[0].outputs == [], nb.cells[0].outputs
    return dict(zip(CELLS, (cell.outputs for cell in nb.cells[1:])))


@pytest.mark.parametrize("name, expected", [
    ("wrong_dim", "Likely mistake: softmax over the batch dimension"),
    ("student_code_raises", "your code raised NameError: name 'undefined_name' is not defined"),
])
def test_failing_check_shows_only_its_message(outputs, name, expected):
    assert [o.output_type for o in outputs[name]] == ["error"], outputs[name]  # no stderr, no prints
    error = outputs[name][0]
    assert error.ename == "CheckError"
    lines = [ANSI.sub("", line) for line in error.traceback]
    message = error.evalue.splitlines()
    assert lines == [f"CheckError: {message[0]}", *message[1:]]
    assert expected in "\n".join(lines)
    assert 2 <= len(lines) <= 5, lines
    shown = "\n".join(error.traceback)
    assert calling.PACKAGE_DIR not in shown and "grader/" not in shown and "File " not in shown


def test_passing_check_prints_one_line(outputs):
    assert [(o.output_type, o.get("name")) for o in outputs["passes"]] == [("stream", "stdout")]
    assert outputs["passes"][0].text.startswith("\u2713 masked_softmax_right")
    assert outputs["passes"][0].text.count("\n") == 1
