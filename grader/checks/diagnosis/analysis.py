"""analyse: what explains a check's output (or its error), asking each family in turn."""
import torch

from grader.checks.diagnosis.errors import error_finding
from grader.checks.diagnosis.facts import globals_finding, module_finding
from grader.checks.diagnosis.findings import Finding
from grader.checks.diagnosis.shapes import _sizes_text, sizes
from grader.checks.diagnosis.values import (_fit_scale, _matches, _say_number, layout_finding,
                                            nonfinite_finding, ratio_finding, shape_finding, slice_finding,
                                            unfilled_finding, unwritten_finding)
from grader.checks.diagnosis.variants import _variants, forward


def analyse(exercise, inp, *, actual=None, expected=None, close=None, tol=None, facts=None,
            names=None, error=None):
    """A Finding that explains this output (or this error), or None.

    inp: the check's inputs (float64); actual: the student's output (float64, CPU) or
    None; expected: the reference output (float64, CPU); error: (type name, message);
    facts: grader.checks.student_call.code_facts of the student's code, or None."""
    hooks, key = exercise.diagnosis, exercise.key
    sz = sizes(exercise, inp)
    if sz is None:
        return None  # an exercise that does not say its sizes gets its plain message
    if error is not None:
        return error_finding(error[0], error[1], sz, facts, hooks, names=names,
                             none_inputs=[k for k, v in inp.items() if v is None])
    finding = module_finding(facts) if (facts or {}).get("module", {}).get("shared_modules") else None
    if finding:
        return finding
    finding = globals_finding(facts, sz, hooks=hooks)
    if finding or actual is None:
        return finding
    if not torch.isfinite(actual).all():
        return (expected is not None and unwritten_finding(actual, expected, close, names)) or \
            nonfinite_finding(actual, names, hooks)
    if expected is not None and _matches(actual, expected, close):
        return None  # right values: whatever failed, the values say nothing about it
    if hooks.analysis:
        return hooks.analysis(inp, actual, expected)
    if expected is not None and actual.shape != expected.shape:
        return slice_finding(actual, expected, close, names) or shape_finding(actual.shape, expected, names, sz, hooks)
    if hooks.first_finding and expected is not None:
        finding = hooks.first_finding(inp, actual, expected, close)
        if finding:
            return finding
    for finding, knobs in _variants(hooks, inp, sz):
        try:
            guess = forward(key, inp, **knobs)
        except Exception:
            continue
        if expected is not None and _matches(expected, guess, close):
            continue  # the same as the right answer on these inputs: says nothing
        if _matches(actual, guess, close):
            return finding
    if expected is None:
        return None
    finding = layout_finding(actual, expected, close, names) or unfilled_finding(
        actual, expected, close, names) or ratio_finding(actual, expected, close, tol or {"atol": 1e-5}, names, sz)
    if finding:
        return finding
    if hooks.given_code:  # their modules are built from given code (C // n_heads, buffers): its
        return None       # patterns say nothing about the part the student wrote
    thrown = sorted((facts or {}).get("discarded", ()))
    if thrown:
        return Finding("not_assigned", f"the result of {thrown[0]}(...) is thrown away",
                       f"{thrown[0]} returns a new tensor and leaves its input as it was: assign it "
                       f"(wei = wei.{thrown[0]}(...)).")
    if hooks.scale:  # a scale that explains the output says more than the operators used
        f = _fit_scale(key, inp, actual, close)
        if f is not None:
            want = hooks.scale.fitted
            return Finding("scale", f"scores scaled by {_say_number(f, sz)}",
                           f"use {want}, computed from the inputs; here {_sizes_text(sz, ('T', 'C', 'head_size', 'n_heads'))}.")
    if "//" in (facts or {}).get("operators", ()):
        return Finding("floor_division", "floor division //",
                       "a // b rounds down to a whole number; divide with / for averages.")
    return None
