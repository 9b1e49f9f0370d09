"""Widgets for the notebooks. Each keeps its state in plain attributes (probs, entropy,
...) so tests can drive the slider from Python and read what the chart shows."""
import io
import html
import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import Image, display

from notebook_helpers.plots import show_probabilities


def entropy(probs):
    """Shannon entropy in nats; 0 * log 0 counts as 0."""
    p = probs[probs > 0]
    return float(-(p * p.log()).sum())


def _png_of(fig):
    """A figure as PNG bytes; the figure is closed."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


class _ChartWidget:
    """A row of controls, a line of numbers, and a chart redrawn on every change."""

    def __init__(self, controls):
        self.stats = widgets.HTML()
        self.plot = widgets.Output()
        self.widget = widgets.VBox([widgets.HBox(controls), self.stats, self.plot])
        for control in controls:
            control.observe(lambda change: self.update(), names="value")
        self.update()

    def figure(self):
        """The chart for the current state, as a new matplotlib figure."""
        fig, ax = plt.subplots(figsize=(5.5, 2.6))
        self.draw(ax)
        fig.tight_layout()
        return fig

    def update(self):
        self.refresh()
        self.stats.value = self.summary()
        # drawn once per change: the live chart shows these bytes, and png() gives them again
        # for the still image beside the widget (TextGenerator's still image, which adds the
        # generated text, is drawn on its own)
        self._chart = _png_of(self.figure())
        with self.plot:
            self.plot.clear_output(wait=True)
            display(Image(data=self._chart, format="png"))

    def png(self):
        """The current chart as PNG bytes."""
        return self._chart

    def _repr_mimebundle_(self, **kwargs):
        # The live widget, plus a still image of its current chart in the same output:
        # JupyterLab draws the widget, and a saved notebook read without a kernel (or a
        # page rendered from it) shows the image.
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["image/png"] = self.png()
        return bundle


class SoftmaxSharpener(_ChartWidget):
    """softmax(factor * scores) for a fixed score vector, with a slider for the factor."""

    def __init__(self, scores, labels=None, factor=1.0, max_factor=10.0):
        self.scores = torch.as_tensor(scores, dtype=torch.float64)  # (n,)
        self.labels = labels
        self.slider = widgets.FloatSlider(value=factor, min=0.0, max=max_factor, step=0.1,
                                          description="factor", continuous_update=True)
        super().__init__([self.slider])

    @property
    def factor(self):
        return self.slider.value

    def refresh(self):
        self.probs = torch.softmax(self.factor * self.scores, dim=-1)  # (n,)
        self.entropy = entropy(self.probs)
        self.max_prob = float(self.probs.max())

    def summary(self):
        return (f"factor {self.factor:.1f} &nbsp;·&nbsp; entropy {self.entropy:.3f} nats "
                f"(uniform: {math.log(len(self.scores)):.3f}) &nbsp;·&nbsp; "
                f"largest probability {self.max_prob:.3f}")

    def draw(self, ax):
        show_probabilities(self.probs, self.labels, ax=ax,
                           title=f"softmax({self.factor:.1f} \u00d7 scores)")


class HeadSizeExplorer(_ChartWidget):
    """Variance of q . k for unit-Gaussian q, k, and how peaked the softmax of a query's
    scores over T keys gets, as head_size grows, with and without the 1/sqrt(head_size)
    scale. The peakedness is averaged over many queries, so it moves smoothly."""

    SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

    def __init__(self, T=8, n_samples=4000, n_queries=500, seed=0):
        self._gen = torch.Generator().manual_seed(seed)
        max_size = self.SIZES[-1]
        self.T = T
        # filled a block of head sizes at a time, as the slider first reaches them (_draw)
        self.q = torch.empty(n_samples, max_size, dtype=torch.float64)  # (n_samples, max_size)
        self.k = torch.empty(n_samples, max_size, dtype=torch.float64)  # (n_samples, max_size)
        self._drawn = 0  # columns of q and k filled so far
        self.row_q = self.q[:n_queries]  # (n_queries, max_size): one query per row ...
        self.row_k = self.k[: n_queries * T].view(n_queries, T, max_size)  # ... and its T keys
        self.slider = widgets.SelectionSlider(options=self.SIZES, value=16, description="head_size")
        self.scaled = widgets.Checkbox(value=False, description="scale by head_size ** -0.5")
        super().__init__([self.slider, self.scaled])

    @property
    def head_size(self):
        return self.slider.value

    def _draw(self, hs):
        """Fill q and k up to column hs, one block of SIZES at a time and in order, so that the
        numbers do not depend on the order the slider visited the sizes in (most readers never
        go near 1024, whose 2 x 4000 x 1024 numbers took most of the widget's start-up)."""
        while self._drawn < hs:
            lo, hi = self._drawn, next(s for s in self.SIZES if s > self._drawn)
            for t in (self.q, self.k):
                t[:, lo:hi] = torch.randn(t.shape[0], hi - lo, generator=self._gen, dtype=torch.float64)
            self._drawn = hi

    def refresh(self):
        hs = self.head_size
        self._draw(hs)
        factor = hs**-0.5 if self.scaled.value else 1.0
        self.variance = float(((self.q[:, :hs] * self.k[:, :hs]).sum(-1) * factor).var())
        scores = (self.row_k[..., :hs] @ self.row_q[:, :hs, None]).squeeze(-1) * factor  # (n_queries, T)
        ranked = torch.softmax(scores, dim=-1).sort(dim=-1, descending=True).values  # (n_queries, T)
        self.probs = ranked.mean(0)  # (T,) mean probability of the best, 2nd best, ... key
        self.max_prob = float(self.probs[0])  # mean over the queries of their largest probability

    def summary(self):
        scale = "scaled" if self.scaled.value else "unscaled"
        return (f"head_size {self.head_size} ({scale}) &nbsp;\u00b7&nbsp; variance of q\u00b7k "
                f"{self.variance:.2f} &nbsp;\u00b7&nbsp; largest probability, averaged over "
                f"{len(self.row_q)} queries: {self.max_prob:.3f}")

    def draw(self, ax):
        scale = "scaled" if self.scaled.value else "unscaled"
        ranks = [f"#{i + 1}" for i in range(self.T)]
        show_probabilities(self.probs, ranks, ax=ax, xlabel="key, ranked by its probability",
                           ylabel="mean probability",
                           title=f"head_size {self.head_size}, {scale} "
                                 f"(mean of {len(self.row_q)} queries)")


class TextGenerator(_ChartWidget):
    """Text from a model, continued from a prompt you type, with a temperature slider.
    The chart shows which character generate picks next after the prompt, and how often,
    out of DRAWS draws at that temperature (the sharpening of notebook 03 with factor
    1 / temperature, as your generate applies it). The same seed gives the same text and
    the same draws for the same settings.

    generate(model, idx, max_new_tokens, block_size, temperature=..., generator=...) is
    the function that samples (yours, in notebook 07)."""

    TOP = 12  # characters shown in the chart
    DRAWS = 400  # next characters drawn for the chart

    def __init__(self, model, vocab, generate, block_size, prompt="The ", temperature=1.0,
                 length=160, seed=0):
        self.model, self.vocab, self.generate = model, vocab, generate
        self.block_size, self.length, self.seed = block_size, length, seed
        self.text, self.message, self.probs = "", "", None
        label = {"description_width": "initial"}  # the whole label, never "temperat…"
        self.prompt = widgets.Text(value=prompt, description="prompt", continuous_update=False, style=label)
        self.slider = widgets.FloatSlider(value=temperature, min=0.05, max=3.0, step=0.05,
                                          description="temperature", continuous_update=False, style=label)
        super().__init__([self.prompt, self.slider])

    @property
    def temperature(self):
        return self.slider.value

    def refresh(self):
        """Sample again; a prompt the model cannot read leaves the last text in place."""
        prompt = self.prompt.value
        try:
            if not prompt:
                raise ValueError("type at least one character")
            ids = torch.tensor([self.vocab.encode(prompt)])  # (1, T)
        except ValueError as err:
            self.message = f"Cannot use this prompt: {err}. The text below is from the last valid prompt."
            return
        self.message = ""
        self.model.eval()
        try:
            with torch.no_grad():
                gen = torch.Generator().manual_seed(self.seed)
                out = self.generate(self.model, ids, self.length, self.block_size,
                                    temperature=self.temperature, generator=gen)  # (1, T + length)
                same_prompt = ids.expand(self.DRAWS, -1)  # (DRAWS, T): the prompt, once per draw
                draws = self.generate(self.model, same_prompt, 1, self.block_size, temperature=self.temperature,
                                      generator=torch.Generator().manual_seed(self.seed + 1))[:, -1]  # (DRAWS,)
            counts = torch.bincount(draws.long(), minlength=len(self.vocab)).double()  # (vocab_size,)
            probs = counts / counts.sum()  # (vocab_size,) the share of the draws each character got
            text = self.vocab.decode(out[0].tolist())
        except NotImplementedError:  # one line, not a traceback, until the exercises are done
            self.message, self.probs = "The text appears here once Block, GPT and generate are written.", None
            return
        except Exception as err:
            first = (str(err).splitlines() or [""])[0][:120]
            self.message, self.probs = f"No text: your code raised {type(err).__name__}: {first}", None
            return
        self.probs, self.text = probs, text
        self.entropy = entropy(self.probs)

    def summary(self):
        note = f"<b>{html.escape(self.message)}</b><br>" if self.message else ""
        if self.probs is None:
            return note
        return (f"{note}temperature {self.temperature:.2f} (factor {1 / self.temperature:.2f}) "
                f"&nbsp;·&nbsp; next character over {self.DRAWS} draws: entropy {self.entropy:.2f} nats, "
                f"largest share {float(self.probs.max()):.2f}"
                f"<pre style='white-space: pre-wrap'>{html.escape(self.text)}</pre>")

    def png(self):
        """The chart with the generated text below it: what a notebook read without a kernel
        shows in place of the widget."""
        import textwrap

        fig = self.figure()
        fig.set_size_inches(5.5, 4.4)
        fig.subplots_adjust(bottom=0.45)
        shown = self.message or self.text
        lines = textwrap.wrap(shown.replace("\n", " "), 80)[:8]
        fig.text(0.02, 0.02, "\n".join(lines).replace("$", r"\$"), fontsize=7, family="monospace",
                 va="bottom")
        return _png_of(fig)

    def draw(self, ax):
        if self.probs is None:
            ax.set_axis_off()
            return
        top = torch.topk(self.probs, min(self.TOP, len(self.probs)))
        labels = [repr(self.vocab.decode([i]))[1:-1] or " " for i in top.indices.tolist()]
        show_probabilities(top.values, labels, ax=ax, ylabel="share of the draws",
                           title=f"next character in {self.DRAWS} draws, temperature {self.temperature:.2f}")
        ax.set_xlabel("character")
