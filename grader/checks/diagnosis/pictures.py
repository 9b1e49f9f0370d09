"""The smallest failing case, as a picture: cutting the inputs, and drawing expected | yours."""
from grader.checks.diagnosis.shapes import sizes


class NoPicture(LookupError):
    """The exercise does not say how to cut its inputs: its checks show no picture."""


def crop(exercise, inp, L):
    """The check's inputs cut to the first L time steps (Diagnosis.crop)."""
    hook = exercise.diagnosis.crop
    if hook is None:
        raise NoPicture(exercise.key)
    return hook(inp, L)


def time_steps(exercise, inp):
    if exercise.diagnosis.picture == "ids":  # sampled ids are not cut shorter: the picture shows them whole
        return 0
    if exercise.diagnosis.crop is None or exercise.diagnosis.sizes is None:
        raise NoPicture(exercise.key)
    return sizes(exercise, inp)["T"]


AXES = {"weights": ("key", "query"), "output": ("feature", "token"), "ids": ("position", "sequence")}


def picture(expected, actual, title, kind="output"):
    """PNG bytes: expected | yours | difference heatmaps of one 2-D slice."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    expected, actual = expected.detach().cpu().double(), actual.detach().cpu().double()
    diff = actual - expected
    lo = float(min(expected.min(), actual.min()))
    hi = float(max(expected.max(), actual.max()))
    span = float(diff.abs().max()) or 1.0
    fig = Figure(figsize=(8.4, 2.8), dpi=80)
    FigureCanvasAgg(fig)
    xlabel, ylabel = AXES[kind]
    panels = [("expected", expected, "viridis", lo, hi), ("yours", actual, "viridis", lo, hi),
              ("yours \u2212 expected", diff, "RdBu_r", -span, span)]
    for i, (name, data, cmap, vmin, vmax) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        im = ax.imshow(data.numpy(), cmap=cmap, vmin=vmin, vmax=vmax,
                       interpolation="nearest", aspect="auto")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        if i == 0:
            ax.set_ylabel(ylabel, fontsize=9)
        rows, cols = data.shape
        ax.set_xticks(range(0, cols, max(1, cols // 8)))
        ax.set_yticks(range(0, rows, max(1, rows // 8)))
        ax.tick_params(labelsize=7)
        if rows * cols <= 36 and cols <= 8:  # few cells: write the numbers in
            for r in range(rows):
                for c in range(cols):
                    v = float(data[r, c])
                    shade = (v - vmin) / ((vmax - vmin) or 1.0)
                    ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if (shade < 0.5 if cmap == "viridis" else abs(shade - 0.5) > 0.3) else "black")
        if i in (1, 2):
            fig.colorbar(im, ax=ax, fraction=0.05, pad=0.03).ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def slice_2d(key, expected, actual):
    """(expected 2-D, actual 2-D, where) of the batch element that differs most."""
    if expected.dim() == 2:
        return expected, actual, ""
    err = (actual - expected).abs().reshape(expected.shape[0], -1).amax(1)
    b = int(err.argmax())
    expected, actual, where = expected[b], actual[b], f"batch {b}, "
    if expected.dim() == 3:  # (n_heads, T, head_size): the head that differs most
        h = int((actual - expected).abs().reshape(expected.shape[0], -1).amax(1).argmax())
        expected, actual, where = expected[h], actual[h], f"{where}head {h}, "
    return expected, actual, where


def picture_kind(exercise):
    return exercise.diagnosis.picture
