"""The shared plotting helpers: readable labels, one colour scale for paired panels."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from notebook_helpers.plots import show_categories, show_heatmap, show_heatmaps, show_probabilities  # noqa: E402


def test_heatmap_tick_labels_show_spaces_and_line_breaks():
    ax = show_heatmap(torch.eye(4), xlabels="a b\n", ylabels=["x", " ", "y", "\t"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "\u2423", "b", "\u21b5"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "\u2423", "y", "\u21e5"]
    plt.close(ax.figure)


def test_paired_heatmaps_share_one_colour_scale():
    fig = show_heatmaps([torch.rand(5, 5), 0.3 * torch.rand(5, 5)], titles=["a", "b"])
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2
    assert len({ax.images[0].get_clim() for ax in panels}) == 1  # same vmin, vmax
    plt.close(fig)


def test_four_heatmaps_wrap_into_two_rows_with_one_colour_bar():
    chars = "the tide turned."
    fig = show_heatmaps([torch.rand(16, 16).tril() for _ in range(4)], xlabels=chars, ylabels=chars)
    panels = [ax for ax in fig.axes if ax.images]
    rows = {round(ax.get_position().y0, 2) for ax in panels}
    assert len(panels) == 4 and len(rows) == 2
    assert len(fig.axes) == 5  # four panels and one colour bar
    plt.close(fig)


def test_bar_chart_has_both_axis_labels():
    ax = show_probabilities(torch.softmax(torch.randn(6), -1))
    assert ax.get_xlabel() and ax.get_ylabel()
    plt.close(ax.figure)


def test_a_map_of_categories_has_a_legend_and_no_colour_bar():
    grid = torch.tensor([[2, 0, 0], [1, 2, 0], [2, 2, 2]])
    names = ["skipped", "computed, then masked", "used"]
    ax = show_categories(grid, names)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == names
    assert len(ax.figure.axes) == 1  # the legend names the categories: no colour bar
    image = ax.images[0]
    colours = {tuple(image.cmap(image.norm(v))) for v in range(3)}
    assert len(colours) == 3  # one flat colour per category
    plt.close(ax.figure)
