"""Checks for the exercises of the self-attention course.

Each ``check_*`` function takes your function (or nn.Module class), runs it on inputs
it chooses itself, and either prints one line starting with a tick or raises
``CheckError`` naming what went wrong and, where it recognises it, the likely mistake.

    check_masked_softmax(masked_softmax, "rows_sum_to_one")
    check_masked_softmax(masked_softmax, "values", hidden=True)   # fresh shapes and seed

``focus`` picks what to check (see ``FOCUSES``); ``hidden=True`` draws new shapes and a
new seed; ``device`` (or the GRADER_DEVICE environment variable) runs on a GPU.
"""
import torch

from grader.core import CheckError, run_check
from grader.exercises import EXERCISES

__all__ = ["CheckError", "FOCUSES"] + [f"check_{k}" for k in EXERCISES]

FOCUSES = {key: tuple(ex.focuses) for key, ex in EXERCISES.items()}


def _make_check(key):
    exercise = EXERCISES[key]

    def check(student, focus="values", *, hidden=False, seed=None, device=None,
              dtype=torch.float32):
        __tracebackhide__ = True
        run_check(exercise, student, focus, hidden=hidden, seed=seed, device=device, dtype=dtype)

    check.__name__ = check.__qualname__ = f"check_{key}"
    check.__doc__ = (f"Check {exercise.name}. focus: one of {', '.join(exercise.focuses)}. "
                     "hidden=True draws fresh shapes and a fresh seed.")
    return check


for _key in EXERCISES:
    globals()[f"check_{_key}"] = _make_check(_key)
del _key
