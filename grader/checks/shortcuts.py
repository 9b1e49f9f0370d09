"""Functions that would do a whole exercise.

Each exercise lists its own (``Exercise.shortcuts``, in its notebook's module of
grader/checks/exercises/). A check whose student code uses one of them scores 0 in graded
runs (the message says which function), and passes with a one-line note in JupyterLab.
Calling the course's own ``grader`` code (its reference implementations) counts as a
shortcut everywhere.

Instructors replace the lists in nbgrader_config.py, e.g.

    c.Shortcuts.forbidden = {"scaled_dot_product_attention": ["F.scaled_dot_product_attention"]}

(an exercise the table leaves out then has none). An entry is matched by its last dotted
part against the attribute names and the global functions the student's code uses
(``x.cumsum(1)``, ``torch.cumsum``, or ``from torch import cumsum`` all match "torch.cumsum").
"""


def _configurable():
    """The Shortcuts class: a traitlets Configurable, defined when first asked for. traitlets
    comes with nbgrader and the kernel, where configuration is read; the checks themselves
    import with torch alone (a bare GPU machine has no traitlets: scripts/gpu_check.py)."""
    from traitlets import Dict
    from traitlets.config import Configurable

    class Shortcuts(Configurable):
        forbidden = Dict(
            default_value=None, allow_none=True,
            help="exercise key -> functions that would do the whole exercise (last dotted part "
                 "matched); a check using one scores 0 when graded. Replaces every exercise's own "
                 "list (Exercise.shortcuts); unset, those hold").tag(config=True)

    Shortcuts.__module__, Shortcuts.__qualname__ = __name__, "Shortcuts"
    return Shortcuts


def _shortcuts_class():
    if "Shortcuts" not in globals():
        globals()["Shortcuts"] = _configurable()
    return globals()["Shortcuts"]


def __getattr__(name):  # grader.checks.shortcuts.Shortcuts, made when first read
    if name == "Shortcuts":
        return _shortcuts_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def listed(exercise, table):
    """The functions forbidden in this exercise: the instructor's table (forbidden()) where
    one is set, else the exercise's own list."""
    return tuple(exercise.shortcuts) if table is None else tuple(table.get(exercise.key, ()))


_UNSET = object()
_LOADED = _UNSET


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
    """The instructor's table (exercise key -> functions): from config when given, else from
    the course's nbgrader_config.py; None where neither sets one (see listed), or where the
    config cannot be read (without traitlets too: the exercises' own lists hold)."""
    global _LOADED
    if config is not None:
        return _table(_shortcuts_class()(config=config).forbidden)
    if _LOADED is _UNSET:
        _LOADED = None
        try:
            from pathlib import Path

            from traitlets.config.loader import PyFileConfigLoader

            root = Path(__file__).resolve().parents[2]
            if _may_set_shortcuts(root / "nbgrader_config.py"):
                loaded = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
                _LOADED = _table(_shortcuts_class()(config=loaded).forbidden)
        except Exception:  # an unreadable config keeps the exercises' own lists
            pass
    return _LOADED


def _table(value):
    return None if value is None else dict(value)
