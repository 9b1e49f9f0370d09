"""A head built with bias=True, graded by `make autograde` (its command, in a sandboxed
kernel): the feedback page names the mistake with the lines JupyterLab shows."""
import html
import subprocess
import sys

import nbformat
import pytest

from grader.instructor import cli as instructor
from support import synthetic
from grader.checks.core import evaluate
from grader.checks.exercises import EXERCISES

pytestmark = pytest.mark.xdist_group("feedback_channel")
A = "04_single_head"


@pytest.mark.usefixtures("commands_share_the_template")
def test_a_biased_head_is_named_in_the_feedback_as_in_jupyterlab(tmp_path):
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    biased = lambda gid, src: src.replace(", bias=False)", ")") if "class Head" in src else src
    nb = synthetic.answered(root, A, A, edit=biased)
    folder = root / "submitted" / "ada" / A
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{A}.ipynb")

    out = subprocess.run([sys.executable, "-m", "grader.grading.autograde", "--root", str(root),
                          "--jobs", "1", "--assignment", A], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0 and "1 graded" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "Warning" not in out.stderr, out.stderr[-3000:]  # an instructor's run prints no noise
    instructor.feedback(root)
    page = html.unescape((root / "feedback" / "ada" / A / f"{A}.html").read_text())

    namespace = {}
    code = synthetic._solution_code(root, A, A)["Head"]
    exec("import torch\nfrom torch import nn\n" + biased("", code), namespace)
    lab = evaluate(EXERCISES["head"], namespace["Head"], "values")  # what JupyterLab says
    assert not lab.passed and lab.mistake == "bias"
    lines = [line.strip() for line in lab.message.splitlines()[1:]]
    assert len(lines) >= 3 and lines[0].startswith("parameters do not match")
    for line in lines:
        assert line in page, line
    # each mistake named once: the first failing cell says it whole, the later ones in a line
    assert page.count(lines[0]) == 1
    assert 'the same mistake as in the check "returns (B, T, head_size)" above: layers with a bias' in page
