"""08's cache demo generates past block_size and compares the logits of every step, so a
CachedSelfAttention whose cache is cropped wrongly shows it there, not only in the checks."""
import contextlib
import io
import re

import matplotlib
import nbformat
import pytest

from support.paths import ROOT

matplotlib.use("Agg")

SOURCE = ROOT / "solutions" / "08_attention_at_scale" / "08_attention_at_scale.ipynb"
CROP = "self.k_cache, self.v_cache = k[:, :, -self.block_size:], v[:, :, -self.block_size:]"
BUGS = {
    "not cropped": "self.k_cache, self.v_cache = k, v",
    "oldest kept": "self.k_cache, self.v_cache = k[:, :, :self.block_size], v[:, :, :self.block_size]",
}


def _cell(cells, text):
    return next(c.source for c in cells if c.cell_type == "code" and text in c.source)


def run_demo(crop_line=CROP):
    """The demo's printed lines, with the notebook's CachedSelfAttention cropping by crop_line."""
    cells = nbformat.read(SOURCE, as_version=4).cells
    module = _cell(cells, "class CachedSelfAttention")
    assert CROP in module
    demo = _cell(cells, "lm = CachedLM(").split("\nsteps =")[0]
    space, out = {}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in (_cell(cells, "import torch"), module.replace(CROP, crop_line),
                       _cell(cells, "class CachedLM"), demo):
            exec(source, space)
    return out.getvalue()


def _says(printed, start):
    return re.search(rf"^{re.escape(start)}.*: (True|False)$", printed, re.M).group(1)


def test_the_notebook_module_gives_the_same_logits_and_text():
    printed = run_demo()
    assert _says(printed, "the same 256 tokens") == "True"
    assert _says(printed, "the same next-token logits") == "True"


@pytest.mark.parametrize("bug", BUGS)
def test_a_wrong_crop_shows_in_the_demo(bug):
    assert _says(run_demo(BUGS[bug]), "the same next-token logits") == "False"
