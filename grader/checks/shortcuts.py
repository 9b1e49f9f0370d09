"""Functions that would do a whole exercise, per exercise.

A check whose student code uses one of them scores 0 in graded runs (the message says
which function), and passes with a one-line note in JupyterLab. Calling the course's own
``grader`` code (its reference implementations) counts as a shortcut everywhere.

Instructors change the lists in nbgrader_config.py, e.g.

    c.Shortcuts.forbidden = {"scaled_dot_product_attention": ["F.scaled_dot_product_attention"]}

An entry is matched by its last dotted part against the attribute names and the global
functions the student's code uses (``x.cumsum(1)``, ``torch.cumsum``, or
``from torch import cumsum`` all match "torch.cumsum").
"""
from traitlets import Dict
from traitlets.config import Configurable

DEFAULTS = {
    "bag_of_words_loop": ["torch.cumsum", "torch.tril"],
    "bag_of_words_matmul": ["torch.cumsum"],
    "head": ["F.scaled_dot_product_attention", "nn.MultiheadAttention",
             "F.multi_head_attention_forward"],
    "scaled_dot_product_attention": ["F.scaled_dot_product_attention", "nn.MultiheadAttention",
                                     "F.multi_head_attention_forward"],
    "multi_head_attention": ["nn.MultiheadAttention", "F.multi_head_attention_forward"],
    "batched_multi_head_attention": ["nn.MultiheadAttention", "F.multi_head_attention_forward"],
    # 07's given attention is PyTorch's own; the block exercise is its norms and residuals
    "block": ["nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer"],
    "gpt": ["nn.TransformerEncoder", "nn.TransformerDecoder", "nn.Transformer"],
    "online_softmax": ["torch.softmax", "F.softmax", "torch.logsumexp"],
    "tiled_attention": ["F.scaled_dot_product_attention"],
    "cached_attention": ["F.scaled_dot_product_attention", "nn.MultiheadAttention",
                         "F.multi_head_attention_forward"],
}


class Shortcuts(Configurable):
    forbidden = Dict(
        default_value=DEFAULTS,
        help="exercise key -> functions that would do the whole exercise (last dotted part "
             "matched); a check using one scores 0 when graded").tag(config=True)


_LOADED = None


def _may_set_shortcuts(path):
    """Whether the config file could change Shortcuts: its code (comments aside) names
    Shortcuts or loads another config. Running the course's config imports nbgrader (about
    2 s of CPU), which a notebook's first check need not pay when the defaults hold."""
    import tokenize

    if not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            words = [tok.string for tok in tokenize.tokenize(f.readline)
                     if tok.type in (tokenize.NAME, tokenize.STRING)]
    except (OSError, SyntaxError, tokenize.TokenError, UnicodeDecodeError):
        return True  # let the config loader report (or survive) what is wrong
    return any("Shortcuts" in w or "subconfig" in w for w in words)


def forbidden(config=None):
    """The lists in force: from config when given, else from the course's nbgrader_config.py."""
    global _LOADED
    if config is not None:
        return dict(Shortcuts(config=config).forbidden)
    if _LOADED is None:
        _LOADED = dict(DEFAULTS)
        try:
            from pathlib import Path

            from traitlets.config.loader import PyFileConfigLoader

            root = Path(__file__).resolve().parents[2]
            if _may_set_shortcuts(root / "nbgrader_config.py"):
                loaded = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
                _LOADED = dict(Shortcuts(config=loaded).forbidden)
        except Exception:  # an unreadable config keeps the defaults
            pass
    return _LOADED
