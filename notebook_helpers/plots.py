"""One heatmap helper and one bar-chart helper, used by every notebook."""
import matplotlib.pyplot as plt
import torch


def _numpy(t):
    return t.detach().cpu().float().numpy() if isinstance(t, torch.Tensor) else t


def show_heatmap(matrix, ax=None, xlabels=None, ylabels=None, title=None, xlabel="key",
                 ylabel="query", annotate=False, cmap="viridis", vmin=0.0, vmax=None):
    """Draw a (rows, cols) matrix, e.g. attention weights (query rows, key columns)."""
    m = _numpy(matrix)
    if ax is None:
        _, ax = plt.subplots(figsize=(3.2 + 0.25 * m.shape[1], 2.8 + 0.2 * m.shape[0]))
    image = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax)
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)), [repr(c)[1:-1] for c in xlabels])
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)), [repr(c)[1:-1] for c in ylabels])
    if annotate:
        for (i, j), val in _enumerate(m):
            ax.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if val < (vmax or m.max()) / 2 else "black")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def _enumerate(m):
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            yield (i, j), m[i, j]


def show_heatmaps(matrices, titles=None, **kwargs):
    """One heatmap per matrix, side by side (e.g. one per attention head)."""
    n = len(matrices)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.4), squeeze=False)
    for i, (ax, m) in enumerate(zip(axes[0], matrices)):
        show_heatmap(m, ax=ax, title=titles[i] if titles else None, **kwargs)
    fig.tight_layout()
    return fig


def show_probabilities(probs, labels=None, ax=None, title=None, ylim=(0, 1)):
    """A bar chart of one probability distribution."""
    p = _numpy(probs)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 2.6))
    labels = [str(i) for i in range(len(p))] if labels is None else labels
    ax.bar(range(len(p)), p, color="tab:blue")
    ax.set_xticks(range(len(p)), labels)
    ax.set(ylim=ylim, ylabel="probability", title=title)
    return ax
