"""Explaining a failure: every way a check fails (a stage's Wrong, an error of the student's
code, parameters that do not fit, inputs changed in place, a CheckError on the way) becomes
one Failure (the message, the mistake it names, the smallest failing case), then the
CheckError the learner reads."""
from dataclasses import dataclass
from typing import Optional

import torch

from grader.checks import diagnosis
from grader.checks.calling import (GRADING_ERRORS, Mutated, ParameterError, RemoteError, StudentError,
                                   describe_exception)
from grader.checks.compare import close, largest_difference, safe_cpu64, to_cpu64
from grader.checks.feedback import CheckError, named
from grader.checks.naming import diagnose, finding_key
from grader.checks.smallest import in_kernel, picture_case, show_png
from grader.checks.stages import (Baseline, Broken, BrokenRun, NoAttention, Shortcut, ValuesDiffer,
                                  WrongOutput)


@dataclass
class Failure:
    """What went wrong, before the check's label: the message, the mistake it names (a key,
    or a Mistake / Finding whose key and name are kept) and the smallest failing case."""
    message: str
    finding: object = None
    finding_name: Optional[str] = None
    case: Optional[dict] = None


def explain(case, err):
    """The Failure for any way the check failed."""
    return next(fn for kind, fn in _EXPLAINERS if isinstance(err, kind))(case, err)


def failure_error(case, failure, quiet):
    """The CheckError of a Failure: the check's label, then the explanation; in a notebook, a
    values check's smallest failing case is shown as a picture."""
    error = CheckError(f"{case.label}\n  {failure.message}", finding=failure.finding,
                       case=failure.case, finding_name=failure.finding_name)
    if not quiet and error.case is not None and in_kernel():
        show_png(error.picture)
    return error


def shortcut_message(label, used):
    """What a graded check says when the student's code uses a function that does the whole
    exercise (found by the in-kernel watch, or in the source by the grading process)."""
    return f"{label}\n  {shortcut_text(used)}"


def shortcut_text(used):
    return (f"uses {used}, which does the whole exercise: a graded run gives this "
            "check no points.\n  Write the computation out yourself.")


def _picture(case, out):
    """The smallest failing case of a values check, as data (drawn when asked for), else None."""
    if not case.focus.values:
        return None
    return picture_case(case.exercise, case.key, case.student, case.inputs64, case.dev, case.dtype,
                        case.tol, out, case.reference(), case.name)


def _as_named(detail):
    """A stage's own (message, finding key), kept as it is."""
    return Failure(detail[0], detail[1])


def _explain_shortcut(case, err):
    return Failure(shortcut_text(err.detail), "shortcut")


def _explain_wrong_output(case, err):
    out = err.out
    if (isinstance(out, torch.Tensor) and not (out.is_floating_point() or out.is_complex())
            and err.detail.finding == "dtype"):  # its values as float would say the wrong thing
        found = diagnosis.Finding("integer_division", f"{out.dtype} values: a division rounds down to 0",
                                  "make the tensor float (torch.ones(...) without a dtype is float32) "
                                  "and divide with /, not //.")
    else:
        found = case.explain(safe_cpu64(out))
    return Failure(f"{err.detail}{named(found)}", finding_key(found) or err.detail.finding,
                   err.detail.finding_name)


def _explain_baseline(case, err):
    found = diagnose(case.exercise, case.inputs64_dev, err.out, tol=case.tol, analyse=False)
    if found:  # an honest mistake that happens to equal a baseline: named, not called a skip
        return Failure(diagnosis.mistaken_message(err.detail) + named(found), finding_key(found))
    return Failure(diagnosis.trivial_message(case.exercise, err.detail), "trivial")


def _explain_no_attention(case, err):
    if isinstance(err.detail, tuple):  # (message, finding): not a missing attention, a named mistake
        return _as_named(err.detail)
    found = diagnose(case.exercise, case.inputs64_dev, err.out, tol=case.tol, analyse=False)
    if found:  # a named mistake explains the output: say it, without calling it no attention
        return Failure(diagnosis.mistaken_message(err.detail, equals=False) + named(found), finding_key(found))
    return Failure(diagnosis.no_attention_message(case.exercise, err.detail), "trivial")


def _explain_broken(case, err):
    if isinstance(err.detail, tuple):  # (message, finding): the invariant names the mistake itself
        return _as_named(err.detail)
    found = case.explain(err.out)
    return Failure(err.detail + named(found), finding_key(found), case=_picture(case, err.out))


def _explain_broken_run(case, err):
    run = err.detail
    found = case.explain(err.out) if run.finding is None else None  # what the check's own output shows
    if found is None and run.finding is None and "NaN/inf" in str(run) \
            and close(err.out, case.reference(), case.tol):
        found = diagnosis.overflow_finding(case.exercise)
    if found is None:
        return _explain_check_error(case, run)
    return Failure(f"{run}{named(found)}", finding_key(found))


def _explain_values(case, err):
    found = case.explain(err.out)
    return Failure(f"values differ from the reference: "
                   f"{largest_difference(err.out, case.reference())}{named(found)}",
                   finding_key(found), case=_picture(case, err.out))


def _explain_mutation(case, err):
    right = None
    if err.first and isinstance(err.out, torch.Tensor) and tuple(err.out.shape) == tuple(case.shape_info[0]):
        right = close(to_cpu64(err.out), case.reference(), case.tol)
    return Failure(diagnosis.mutation_message(case.name, err.changed, case.facts(), right), "input_mutation")


def _explain_student_error(case, err):
    # a call that ran out of time or sent no readable answer says nothing about sizes
    plain = isinstance(err.err, RemoteError) and err.err.type_name in GRADING_ERRORS
    found = None if plain else case.explain(error=err.err)
    return Failure(f"{describe_exception(err.err)}{named(found)}", finding_key(found))


def _explain_parameters(case, err):
    found = diagnosis.parameter_finding(err.fields.get("expected") or {}, err.fields.get("yours") or {},
                                        case.facts(), case.used)
    if found is not None and found.key == "bias":  # the message asks about it already
        return Failure(str(err), found)
    text = "\n".join(str(err).splitlines()[:3])
    return Failure(f"{text}{named(found)}", finding_key(found))


def _explain_check_error(case, err):
    """A CheckError raised on the way (a call the exercise refuses, a run on other inputs)."""
    return Failure(str(err), err.finding, err.finding_name, err.case)


_EXPLAINERS = (  # the first kind the failure is decides its explanation
    (Shortcut, _explain_shortcut), (WrongOutput, _explain_wrong_output),
    (Baseline, _explain_baseline), (NoAttention, _explain_no_attention),
    (Broken, _explain_broken), (BrokenRun, _explain_broken_run), (ValuesDiffer, _explain_values),
    (Mutated, _explain_mutation), (StudentError, _explain_student_error),
    (ParameterError, _explain_parameters), (CheckError, _explain_check_error),
)
FAILED = tuple(kind for kind, _ in _EXPLAINERS)
