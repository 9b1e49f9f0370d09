"""Checks for the exercises of the self-attention course.

Each ``check_*`` function takes your function (or nn.Module class), runs it on inputs
it chooses itself, and either prints one line starting with a tick or raises
``CheckError`` naming what went wrong and, where it recognises it, the likely mistake.

    check_masked_softmax(masked_softmax, "rows_sum_to_one")
    check_masked_softmax(masked_softmax, "values", hidden=True)   # fresh shapes and seed

``focus`` picks what to check (see ``FOCUSES``); ``hidden=True`` draws new shapes and a
new seed; ``device`` (or the GRADER_DEVICE environment variable) runs on a GPU.

The checks import torch when first used, so the instructor tools in this package
(grader.autograde, grader.instructor.notebooks, ...) start without it.
"""
import os

from grader.checks import registry
from grader.checks.exercise_keys import EXERCISE_KEYS

__all__ = ["CheckError", "FOCUSES"] + [f"check_{k}" for k in EXERCISE_KEYS]


def _answers():
    """The course's answers (grader/answers/); the student bundle ships none, and its checks
    use the answers' outputs stored for the visible checks (grader/checks/stored.py)."""
    if not os.path.isdir(os.path.join(os.path.dirname(__file__), "answers")):
        from grader.checks.stored import stored_answers
        return stored_answers()
    from grader.answers import course_answers
    return course_answers()


registry.provide(_answers)


_RECALL = []  # the kernel's memory of what its checks said (grader.checks.recall), made when first needed


def _kernel_recall():
    """The kernel's Recall inside a notebook's kernel (each mistake named once), else None:
    other callers (scripts, tests) get every check's whole message."""
    from grader.checks.smallest import in_kernel

    if not in_kernel():
        return None
    if not _RECALL:
        from grader.checks.recall import Recall
        _RECALL.append(Recall())
    return _RECALL[0]


def _make_check(key):
    import torch

    from grader.checks.core import run_check
    from grader.checks.exercises import EXERCISES

    exercise = EXERCISES[key]

    def check(student, focus="values", *, hidden=False, seed=None, device=None,
              dtype=torch.float32):
        __tracebackhide__ = True
        run_check(exercise, student, focus, hidden=hidden, seed=seed, device=device, dtype=dtype,
                  recall=_kernel_recall())

    check.__name__ = check.__qualname__ = f"check_{key}"
    check.__doc__ = (f"Check {exercise.name}. focus: one of {', '.join(exercise.focuses)}. "
                     "hidden=True draws fresh shapes and a fresh seed.")
    return check


def __getattr__(name):
    if name.startswith("check_") and name[len("check_"):] in EXERCISE_KEYS:
        check = _make_check(name[len("check_"):])
    elif name == "CheckError":
        from grader.checks.feedback import CheckError as check
    elif name == "FOCUSES":
        from grader.checks.exercises import EXERCISES
        check = {key: tuple(ex.focuses) for key, ex in EXERCISES.items()}
    else:
        raise AttributeError(f"module 'grader' has no attribute {name!r}")
    globals()[name] = check
    return check


def __dir__():
    return sorted(__all__)
