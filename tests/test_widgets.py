"""Drive each widget from Python, as a learner would with the mouse."""
import math

import nbformat
import pytest
import torch

from grader import notebooks
from notebook_helpers.widgets import HeadSizeExplorer, SoftmaxSharpener, entropy

SCORES = torch.tensor([2.0, 1.0, 0.5, -0.5, 0.0, -1.5])


def test_sharpening_factor_makes_the_softmax_peakier():
    w = SoftmaxSharpener(SCORES, factor=1.0)
    seen = []
    for factor in (0.0, 0.5, 1.0, 3.0, 10.0):
        w.slider.value = factor  # what moving the slider does
        assert torch.allclose(w.probs, torch.softmax(factor * SCORES.double(), -1))
        assert f"factor {factor:.1f}" in w.stats.value
        seen.append((w.entropy, w.max_prob))
    entropies, maxima = zip(*seen)
    assert entropies[0] == pytest.approx(math.log(len(SCORES)))  # factor 0: uniform
    assert all(a > b for a, b in zip(entropies, entropies[1:]))
    assert all(a < b for a, b in zip(maxima, maxima[1:]))
    assert maxima[-1] > 0.99 and int(w.probs.argmax()) == int(SCORES.argmax())


def test_head_size_explorer_shows_variance_growth_and_the_scale_fixing_it():
    w = HeadSizeExplorer()
    unscaled, scaled = {}, {}
    for hs in (4, 64, 1024):
        w.slider.value = hs
        w.scaled.value = False
        unscaled[hs] = (w.variance, w.max_prob)
        w.scaled.value = True
        scaled[hs] = (w.variance, w.max_prob)
        assert f"head_size {hs} (scaled)" in w.stats.value
    for hs in unscaled:
        assert unscaled[hs][0] == pytest.approx(hs, rel=0.2)  # variance grows like head_size
        assert scaled[hs][0] == pytest.approx(1.0, rel=0.2)  # the scale brings it back to ~1
    assert unscaled[1024][1] > 0.95 > scaled[1024][1]  # unscaled: nearly one-hot


def test_entropy_of_one_hot_and_uniform():
    assert entropy(torch.tensor([0.0, 1.0, 0.0])) == 0.0
    assert entropy(torch.full((4,), 0.25)) == pytest.approx(math.log(4))


@pytest.mark.parametrize("path", notebooks.notebook_paths("solutions"), ids=lambda p: p.parent.name)
def test_widget_cells_ran_headless_without_stderr(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            assert cell.execution_count is not None
            kinds = {(o.output_type, o.get("name")) for o in cell.outputs}
            assert ("stream", "stderr") not in kinds and not any(k[0] == "error" for k in kinds)
