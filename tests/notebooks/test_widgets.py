"""Drive each widget from Python, as a learner would with the mouse."""
import html
import math

import nbformat
import pytest
import torch

from grader.instructor import notebooks
from notebook_helpers.text import Vocabulary
from notebook_helpers.widgets import HeadSizeExplorer, SoftmaxSharpener, TextGenerator, entropy

SCORES = torch.tensor([2.0, 1.0, 0.5, -0.5, 0.0, -1.5])


class CycleModel(torch.nn.Module):
    """A bigram model that strongly prefers the next character of "abcde" after each one,
    and refuses a context longer than block_size, like a GPT."""

    def __init__(self, vocab, block_size):
        super().__init__()
        V = len(vocab)
        table = torch.zeros(V, V)
        for ch, nxt in zip("abcde", "bcdea"):
            table[vocab.stoi[ch], vocab.stoi[nxt]] = 4.0
        table[vocab.stoi[" "], vocab.stoi["a"]] = 4.0
        self.table, self.block_size = table, block_size

    def forward(self, idx):
        assert idx.shape[1] <= self.block_size, "context longer than block_size"
        return self.table[idx]  # (B, T, V)


def _generator(prompt="ab", temperature=1.0, length=30):
    from grader.answers.correct import generate  # a student's correct generate
    vocab = Vocabulary("abcde xyz")
    return TextGenerator(CycleModel(vocab, block_size=4), vocab, generate, block_size=4,
                         prompt=prompt, temperature=temperature, length=length), vocab


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


def test_head_size_explorer_numbers_do_not_depend_on_the_path_of_the_slider():
    """q and k are drawn a block of head sizes at a time as the slider first reaches them:
    straight to 1024 or through every size, the numbers are the same."""
    straight, stepwise = HeadSizeExplorer(), HeadSizeExplorer()
    assert straight._drawn == 16  # the start draws only what head_size 16 shows
    straight.slider.value = 1024
    for hs in reversed(HeadSizeExplorer.SIZES):
        stepwise.slider.value = hs
    for hs in HeadSizeExplorer.SIZES:
        stepwise.slider.value = hs
    assert torch.equal(straight.q, stepwise.q) and torch.equal(straight.k, stepwise.k)
    assert straight.summary() == stepwise.summary()


def test_entropy_of_one_hot_and_uniform():
    assert entropy(torch.tensor([0.0, 1.0, 0.0])) == 0.0
    assert entropy(torch.full((4,), 0.25)) == pytest.approx(math.log(4))


@pytest.mark.parametrize("path", notebooks.notebook_paths("solutions"), ids=lambda p: p.parent.name)
def test_widget_cells_ran_headless_without_stderr(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.get("outputs", [])):
            assert cell.execution_count is not None
            kinds = {(o.output_type, o.get("name")) for o in cell.outputs}
            assert ("stream", "stderr") not in kinds and not any(k[0] == "error" for k in kinds)


def test_widgets_carry_a_still_image_of_their_chart():
    """Besides the live widget, the output holds a PNG of the chart, for readers without a kernel."""
    for w in (SoftmaxSharpener(SCORES, factor=2.0), HeadSizeExplorer()):
        bundle = w._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert bundle["image/png"].startswith(b"\x89PNG")


def _title(w):
    import matplotlib.pyplot as plt

    fig = w.figure()
    title = fig.axes[0].get_title()
    plt.close(fig)
    return title


def test_chart_titles_show_the_widget_state():
    w = SoftmaxSharpener(SCORES, factor=1.0)
    w.slider.value = 3.5
    assert "3.5" in _title(w)
    w = HeadSizeExplorer()
    w.slider.value, w.scaled.value = 64, True
    assert "head_size 64" in _title(w) and "unscaled" not in _title(w) and "scaled" in _title(w)
    w.scaled.value = False
    assert "unscaled" in _title(w)


def test_head_size_readout_moves_smoothly():
    """The largest-probability readout is an average over many queries: as head_size grows it
    climbs steadily without the scale, and stays nearly flat with it."""
    w = HeadSizeExplorer()
    readouts = {}
    for scaled in (False, True):
        w.scaled.value = scaled
        readouts[scaled] = []
        for hs in w.SIZES:
            w.slider.value = hs
            readouts[scaled].append(w.max_prob)
            assert w.max_prob == pytest.approx(float(w.probs[0]))  # the readout is the first bar
    unscaled, scaled = readouts[False], readouts[True]
    assert all(a < b for a, b in zip(unscaled, unscaled[1:]))
    assert max(scaled) - min(scaled) < 0.1


@pytest.mark.parametrize("path", notebooks.notebook_paths("solutions"), ids=lambda p: p.parent.name)
def test_widget_cells_keep_a_still_image_in_the_committed_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.get("outputs", [])):
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), cell.source
def test_text_generator_chart_is_what_generate_draws_at_the_temperature():
    """The chart's bars are the shares of the next character in the draws of the given
    generate: close to the model's softmax(logits / temperature), sharper when colder."""
    w, vocab = _generator()
    logits = w.model.table[vocab.stoi["b"]].double()  # after the prompt "ab"
    seen = []
    for temperature in (3.0, 1.0, 0.5, 0.1):
        w.slider.value = temperature  # what moving the slider does
        expected = torch.softmax(logits / temperature, -1)
        # 400 draws: each share is within a few standard deviations (at most 0.025) of its probability
        assert torch.allclose(w.probs, expected, atol=0.08), (temperature, w.probs, expected)
        assert float(w.probs.sum()) == pytest.approx(1.0)
        assert f"temperature {temperature:.2f}" in w.stats.value and f"over {w.DRAWS} draws" in w.stats.value
        assert w.text.startswith("ab") and len(w.text) == 2 + w.length
        seen.append(w.entropy)
    assert seen[0] > seen[1] > seen[2] >= seen[3]  # colder: sharper (at 0.5 and 0.1 nearly every draw is "c")
    assert w.probs.argmax() == vocab.stoi["c"]


def test_text_generator_chart_follows_a_wrong_generate():
    """The chart shows what generate does, not what it should do: a generate that ignores
    the temperature draws the same shares at every temperature."""
    from grader.answers.correct import generate

    def no_temperature(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
        return generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=generator)

    vocab = Vocabulary("abcde xyz")
    w = TextGenerator(CycleModel(vocab, block_size=4), vocab, no_temperature, block_size=4, prompt="ab", length=8)
    shares = []
    for temperature in (3.0, 0.1):
        w.slider.value = temperature
        shares.append(w.probs.clone())
    assert torch.equal(shares[0], shares[1])


def test_text_generator_cold_text_follows_the_model_and_hot_text_does_not():
    w, _ = _generator(prompt="ab", temperature=0.05)
    assert w.text == "ab" + ("cdeab" * 10)[:30]  # (almost) greedy: the model's cycle, the context cropped
    first = w.text
    w.slider.value = 2.5
    assert w.text != first
    w.slider.value = 0.05
    assert w.text == first  # the seed is fixed: same settings, same text


def test_text_generator_bad_prompts_explain_and_keep_the_text():
    w, _ = _generator(prompt="abcdeabcde")  # longer than block_size: cropped, no error
    before = w.text
    assert before.startswith("abcdeabcde") and "Cannot" not in w.stats.value
    w.prompt.value = "aQ"  # Q is not in the vocabulary
    shown = html.unescape(w.stats.value)
    assert "Cannot use this prompt: characters not in the vocabulary: ['Q']" in shown
    assert w.text == before
    w.prompt.value = ""
    assert "type at least one character" in w.stats.value and w.text == before
    w.prompt.value = "e"
    assert w.text.startswith("e") and "Cannot" not in w.stats.value


def test_text_generator_says_one_line_until_the_exercises_are_done_and_its_image_holds_the_text():
    from grader.answers.correct import generate
    from notebook_helpers.text import Vocabulary

    vocab = Vocabulary("abcde xyz")

    class NotWritten(torch.nn.Module):
        def forward(self, idx):
            raise NotImplementedError()

    waiting = TextGenerator(NotWritten(), vocab, generate, block_size=4, prompt="ab", length=8)
    assert waiting.message == "The text appears here once Block, GPT and generate are written."
    assert waiting.probs is None and waiting.png()[:4] == b"\x89PNG"

    def broken(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
        return idx[:, 99]

    failing = TextGenerator(CycleModel(vocab, block_size=4), vocab, broken, block_size=4, prompt="ab", length=8)
    assert failing.message.startswith("No text: your code raised IndexError")
    working = TextGenerator(CycleModel(vocab, block_size=4), vocab, generate, block_size=4, prompt="ab", length=8)
    assert working.message == "" and len(working.text) == 10
    assert working.png() != TextGenerator(CycleModel(vocab, block_size=4), vocab, generate, block_size=4,
                                          prompt="ba", length=8).png()  # the text is in the image
