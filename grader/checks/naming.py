"""Naming the likely mistake behind a wrong output (or an error): first the catalogue of
known wrong answers (grader/answers/mistakes.py, through the registry), run on the check's
inputs; then what grader.checks.diagnosis infers from the data."""
import re

import torch

from grader.checks import devices, diagnosis
from grader.checks.calling import RemoteError, error_type, quiet
from grader.checks.compare import close, to_cpu64


def diagnose(exercise, inputs64, actual=None, error=None, tol=None, *, facts=None,
             expected=None, names=None, analyse=True, prefer=()):
    """The catalogued mistake that reproduces this output (or this exception), if any;
    else, with analyse, what grader.checks.diagnosis infers from the output, the expected output
    and the facts about the student's code (a Finding), or None. prefer: the keys of mistakes
    an earlier check of the exercise named, tried first: where two mistakes give the same
    output on this check's inputs, the one already shown to be the student's is named."""
    # a NameError (the student's object, or a name inside it, not defined) is raised by no
    # catalogued mistake: running the catalogue to match it would only cost time
    unmatchable = actual is None and error is not None and error_type(error) == "NameError"
    mistakes = sorted(exercise.mistakes, key=lambda m: m.key not in prefer) if prefer else exercise.mistakes
    cpu = devices.cpu(inputs64)
    # on a GPU, each mistake is first tried on the CPU: one that raises there (an index past a
    # table) is matched by that error, never run on CUDA, where it would be a device-side
    # assert that ends the process's CUDA (grader.checks.devices.is_cuda_fault)
    first = cpu if any(isinstance(v, torch.Tensor) and v.device.type == "cuda" for v in inputs64.values()) else None
    for mistake in () if unmatchable else mistakes:
        try:
            with quiet():
                if first is not None:
                    mistake.fn(*first.values())
                guess = mistake.fn(*inputs64.values())
        except Exception as err:  # a variant that raises is matched by its error
            if error is not None and _same_error(err, error):
                return mistake
            continue
        if actual is None or not isinstance(guess, torch.Tensor):
            continue
        guess = to_cpu64(guess)
        if isinstance(expected, torch.Tensor) and guess.shape == expected.shape and close(guess, expected, tol):
            continue  # right on these inputs: a match would name a mistake the output does not show
        if close(actual, guess, tol) or close(actual.nan_to_num(0.0), guess.nan_to_num(0.0), tol):
            return diagnosis.refine(mistake, facts)
    if not analyse:
        return None
    try:
        err = None if error is None else (error_type(error), str(error))
        with quiet():
            return diagnosis.analyse(exercise, cpu, actual=actual, expected=expected,
                                     close=lambda a, b: close(a, b, tol), tol=tol, facts=facts,
                                     names=names, error=err)
    except Exception:  # an analysis that fails leaves the message as it is
        return None


def _same_error(a, b):
    """Same exception type, and the same sizes in the message (the wording may differ)."""
    numbers = lambda e: sorted(re.findall(r"\d+", str(e)))
    name = lambda e: e.type_name if isinstance(e, RemoteError) else type(e).__name__
    return name(a) == name(b) and numbers(a) == numbers(b)


def finding_key(found):
    """The named mistake itself (CheckError keeps its key and name), or None."""
    return found if getattr(found, "key", None) else None
