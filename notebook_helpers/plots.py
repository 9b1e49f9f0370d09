"""The plotting helpers every notebook uses: heatmaps, a map of categories, bar charts."""
import math

import matplotlib.pyplot as plt
import torch

# Characters that would be invisible (or break the line) as tick labels.
VISIBLE = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}  # ␣ ↵ ⇥


def _numpy(t):
    return t.detach().cpu().float().numpy() if isinstance(t, torch.Tensor) else t


def tick_label(ch):
    """A character as a tick label: a space shows as '␣', a line break as '↵'."""
    ch = str(ch)
    return VISIBLE.get(ch, ch if ch.isprintable() else repr(ch)[1:-1])


def show_heatmap(matrix, ax=None, xlabels=None, ylabels=None, title=None, xlabel="key",
                 ylabel="query", annotate=False, cmap="viridis", vmin=0.0, vmax=None,
                 colorbar=True):
    """Draw a (rows, cols) matrix, e.g. attention weights (query rows, key columns)."""
    m = _numpy(matrix)
    if ax is None:
        _, ax = plt.subplots(figsize=(3.2 + 0.25 * m.shape[1], 2.8 + 0.2 * m.shape[0]))
    vmax = float(m.max()) if vmax is None else vmax
    image = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax)
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)), [tick_label(c) for c in xlabels])
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)), [tick_label(c) for c in ylabels])
    if annotate:
        for (i, j), val in _enumerate(m):
            ax.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if val < (vmin + vmax) / 2 else "black")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def _enumerate(m):
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            yield (i, j), m[i, j]


def show_heatmaps(matrices, titles=None, ncols=None, vmin=0.0, vmax=None, colorbar_label="weight",
                  **kwargs):
    """One heatmap per matrix (e.g. one per attention head), all on one colour scale.

    Up to three panels sit side by side; more wrap into rows of two, so that character
    labels stay readable."""
    n = len(matrices)
    ncols = ncols or (n if n <= 3 else 2)
    nrows = math.ceil(n / ncols)
    if vmax is None:  # one scale for every panel, so equal colours mean equal values
        vmax = max(float(_numpy(m).max()) for m in matrices)
    side = 2.4 + 0.16 * max(_numpy(matrices[0]).shape)  # inches per panel
    fig, axes = plt.subplots(nrows, ncols, figsize=(side * ncols + 0.9, side * nrows + 0.3),
                             squeeze=False, layout="constrained")
    for i, ax in enumerate(axes.flat):
        if i < n:
            show_heatmap(matrices[i], ax=ax, title=titles[i] if titles else None, vmin=vmin,
                         vmax=vmax, colorbar=False, **kwargs)
        else:
            ax.axis("off")
    fig.colorbar(axes.flat[0].images[0], ax=axes, shrink=0.8, label=colorbar_label)
    return fig


def show_categories(grid, names, colors=None, ax=None, title=None, xlabel="key", ylabel="query"):
    """Draw a (rows, cols) grid of whole numbers 0 .. len(names) - 1 as categories: one flat
    colour each, named in a legend (no colour bar: the numbers have no order or scale)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    g = _numpy(grid)
    colors = colors or ["#f0f0f0", "#9ecae1", "#08519c", "#fd8d3c", "#31a354"][:len(names)]
    if ax is None:
        _, ax = plt.subplots(figsize=(3.2 + 0.25 * g.shape[1], 2.8 + 0.2 * g.shape[0]))
    ax.imshow(g, cmap=ListedColormap(colors), vmin=-0.5, vmax=len(names) - 0.5, interpolation="nearest")
    ax.legend(handles=[Patch(facecolor=c, edgecolor="0.4", label=n) for c, n in zip(colors, names)],
              loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    return ax


def show_probabilities(probs, labels=None, ax=None, title=None, ylim=(0, 1), xlabel="token",
                       ylabel="probability"):
    """A bar chart of one probability distribution."""
    p = _numpy(probs)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 2.6))
    labels = [str(i) for i in range(len(p))] if labels is None else labels
    ax.bar(range(len(p)), p, color="tab:blue")
    ax.set_xticks(range(len(p)), labels)
    ax.set(ylim=ylim, xlabel=xlabel, ylabel=ylabel, title=title)
    return ax
