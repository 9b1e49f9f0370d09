"""Helpers the notebooks share: text data, plots, widgets and an optimizer. Small and flat on purpose."""
from notebook_helpers.optim import AdamW
from notebook_helpers.plots import show_categories, show_heatmap, show_heatmaps, show_probabilities
from notebook_helpers.text import Vocabulary, get_batch, load_corpus

__all__ = ["AdamW", "Vocabulary", "get_batch", "load_corpus", "show_categories", "show_heatmap", "show_heatmaps",
           "show_probabilities"]
