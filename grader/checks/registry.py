"""The answers as the checks receive them.

The checks never import the answers (grader/answers/: the float64 references, the
catalogued mistakes, the attention with knobs that the diagnosis turns). They ask this
registry, which the package hands them to: the course's own answers where grader.answers
is installed, and in the student bundle, which ships no answers, lookups of their outputs
stored for the visible checks' inputs (grader/checks/stored.py).
"""
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Mapping


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: its key, its name and hint as a check shows them, and the
    function that makes it (same arguments as the exercise's reference)."""
    key: str
    name: str
    hint: str
    fn: Callable


@dataclass(frozen=True)
class Answers:
    reference: Mapping[str, Callable]  # function name -> float64 reference implementation
    mistakes: Mapping[str, tuple]  # exercise key -> its catalogued Mistakes
    knobs: Mapping[str, Callable]  # the diagnosis' attention with knobs: name -> function


_provider = None
_answers = None


def provide(provider):
    """provider() -> Answers, called once, when a check first needs an answer."""
    global _provider, _answers
    _provider, _answers = provider, None


@contextmanager
def using(given):
    """Hand the checks these Answers for the time of the block (the bundle records them)."""
    global _provider, _answers
    before = _provider, _answers
    _provider, _answers = (lambda: given), given
    try:
        yield given
    finally:
        _provider, _answers = before


def answers():
    global _answers
    if _answers is None:
        if _provider is None:
            raise RuntimeError("no answers were handed to the checks (grader/__init__.py does)")
        _answers = _provider()
    return _answers


def reference(name):
    """The reference implementation called name, looked up when called."""
    def call(*args, **kwargs):
        return answers().reference[name](*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    return call


class Catalogue(Sequence):
    """An exercise's catalogued mistakes, looked up when first read."""

    def __init__(self, key):
        self.key = key

    def _items(self):
        return answers().mistakes.get(self.key, ())

    def __getitem__(self, i):
        return self._items()[i]

    def __len__(self):
        return len(self._items())

    def __repr__(self):
        return f"Catalogue({self.key!r})"


def knob(name):
    """The diagnosis' attention function called name (grader/answers/knobs.py)."""
    return answers().knobs[name]
