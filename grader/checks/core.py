"""The check: one focus of one exercise run on the student's code.

A check takes the student's function (or nn.Module class), builds the inputs itself
(grader.checks.inputs), runs the student's code (grader.checks.calling), and then tests, in
order (grader.checks.stages): the returned type, the shape, the dtype and device, NaN/inf,
that the answer attends, the invariants of the exercise, and finally the values against a
float64 reference. The first failure raises ``CheckError`` (grader.checks.feedback) with a
short message; before raising, the output is compared with a catalogue of known mistakes
and analysed (grader.checks.naming) so the message can name the likely one
(grader.checks.explain).

run_check raises; evaluate returns the check's Outcome as data (the grading process).
"""
import sys

import torch

from grader.checks import diagnosis, shortcuts
from grader.checks.calling import student_name
from grader.checks.devices import is_cuda_fault, resolve_device
from grader.checks.case import prepare_case
from grader.checks.explain import FAILED, explain, failure_error, shortcut_message
from grader.checks.feedback import CheckError, CheckResult
from grader.checks.stages import (Shortcut, check_attends, check_invariants, check_values,
                                  checked_output)
from grader.outcome import Outcome, check_label, draw_seed

# Names other parts of the course import from here (grader.grading's channel and execute,
# the student bundle's recording, exercise modules written before the split); they live in the
# modules named.
from grader.checks.calling import RemoteError, RemoteStudent  # noqa: E402,F401
from grader.checks.calling import quiet as _quiet  # noqa: E402,F401
from grader.checks.devices import device_name  # noqa: E402,F401
from grader.checks.exercise import Exercise, Focus, Invariant  # noqa: E402,F401
from grader.checks.inputs import load_fixed as _load_fixed  # noqa: E402,F401


def run_check(exercise, student, focus="values", *, hidden=False, seed=None, device=None,
              dtype=torch.float32, fixed=None, quiet=False, graded=False, config=None, recall=None):
    """Run one focus of one exercise on the student's code; raise CheckError on failure,
    return a CheckResult on success.

    graded: a graded run, where a shortcut (grader.checks.shortcuts) fails the check; in
    JupyterLab it passes with a note. config: the traitlets config with the instructor's
    Shortcuts (default: the course's nbgrader_config.py). fixed: the visible cases to use
    instead of data/references/. recall: what the notebook's earlier checks said
    (grader.checks.recall): a mistake an earlier check of the exercise named is said in one line."""
    __tracebackhide__ = True
    try:
        return _run_check(exercise, student, focus, hidden=hidden, seed=seed, device=device, dtype=dtype,
                          fixed=fixed, quiet=quiet, graded=graded, config=config, recall=recall)
    except CheckError as err:
        if not is_cuda_fault(err):
            raise
        fault = err
    except Exception as err:
        if not (resolve_device(device).type == "cuda" and is_cuda_fault(err)):
            raise
        fault = err
    raise _on_the_cpu(exercise, student, focus, fault, hidden=hidden, seed=seed, dtype=dtype, fixed=fixed,
                      graded=graded, config=config, recall=recall) from None


def _on_the_cpu(exercise, student, focus, fault, **kw):
    """The CheckError of a check whose CUDA run ended in a device-side assert: that the kernel
    must be restarted, then what the same check says on the CPU, where the error is readable
    and the mistake can be named (CUDA cannot run anything more in this process)."""
    label = check_label(student_name(student, exercise), exercise.focuses[focus].description,
                        kw["hidden"], kw["seed"])
    said = ("on CUDA this check ended in a device-side assert (most often an index out of range: "
            "an embedding or a gather looked up past its size); CUDA runs nothing more in this "
            "kernel until it is restarted (Kernel > Restart).")
    try:
        _run_check(exercise, student, focus, device="cpu", quiet=True, **kw)
    except CheckError as err:
        on_cpu = str(err).split("\n", 1)[1:] or [""]
        return CheckError(f"{label}\n  {said}\n  The same check on the CPU:\n{on_cpu[0]}",
                          finding=err.finding, finding_name=err.finding_name, case=err.case)
    except Exception as err:  # the answer cannot run on the CPU either (a device written into it)
        return CheckError(f"{label}\n  {said}\n  On the CPU it raised {type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200] if str(err) else ''}")
    return CheckError(f"{label}\n  {said}\n  The same check passes on the CPU: restart the kernel "
                      "and run the notebook again from the top.")


def _run_check(exercise, student, focus, *, hidden, seed, device, dtype, fixed, quiet, graded, config,
               recall):
    __tracebackhide__ = True
    case = prepare_case(exercise, student, focus, hidden=hidden, seed=seed, device=device,
                        dtype=dtype, fixed=fixed)
    case.used = diagnosis.shortcut(case.exercise, case.facts(instance=False), shortcuts.forbidden(config))
    case.prefer = recall.named(case) if recall else ()
    try:
        if case.used and graded:
            raise Shortcut(detail=case.used)
        ctx = checked_output(case)
        check_attends(case, ctx)
        check_invariants(case, ctx)
        if case.focus.values:
            check_values(case, ctx)
    except FAILED as err:
        if case.dev.type == "cuda" and is_cuda_fault(err):
            raise  # nothing more runs on CUDA here: run_check asks the CPU
        failure = explain(case, err)
        raise failure_error(case, recall.said(case, failure) if recall else failure, quiet) from None
    return _passed(case, graded, quiet)


def _passed(case, graded, quiet):
    """The passed check's result, with its notes, printed with a tick unless quiet. A check
    passed with a forbidden function gets a warning mark, and its last line, marked as a
    failure, says that a graded run gives it 0: nothing printed after it hides it."""
    notes = ()
    note = diagnosis.globals_note(case.facts(instance=False)) if not graded else None
    notes += (note,) if note else ()
    note = diagnosis.passing_note(case.exercise, case.inputs, case.facts)
    notes += (note,) if note else ()
    zero = (f"scores 0 when graded: {case.used} does the whole exercise; write the computation "
            "yourself.",) if case.used else ()
    if not quiet:
        mark = "\u26a0" if case.used else "\u2713"  # passes here, but not in a graded run
        # one write, newline included: print() writes its end apart, and a kernel's output
        # thread that flushes between the two splits the line into two outputs
        sys.stdout.write(f"{mark} {case.label}" + "".join(f"\n  {note}" for note in notes)
                         + "".join(f"\n\u2717 {note}" for note in zero) + "\n")
    return CheckResult(case.label, notes + zero)


def evaluate(exercise, student, focus="values", *, hidden=False, seed=None, device=None,
             dtype=torch.float32, fixed=None, graded=False, config=None, source_uses=None, recall=None):
    """run_check as data: the check's Outcome, never an exception for the student's sake.

    source_uses: a forbidden function that the grading process found in the student's
    source (grader.grading.scan), where the kernel cannot hide it; the graded check then
    fails as a shortcut without calling the student's code. recall: one per graded notebook
    (grader.checks.recall)."""
    seed = (draw_seed() if seed is None else seed) if hidden else None
    name = student_name(student, exercise)
    label = check_label(name, exercise.focuses[focus].description, hidden, seed)
    make = lambda **kw: Outcome(exercise.name, name, focus, hidden, seed, label=label, **kw)
    if source_uses and graded:
        return make(passed=False, message=shortcut_message(label, source_uses), mistake="shortcut")
    try:
        result = run_check(exercise, student, focus, hidden=hidden, seed=seed, device=device,
                           dtype=dtype, fixed=fixed, quiet=True, graded=graded, config=config,
                           recall=recall)
    except CheckError as err:
        return make(passed=False, message=str(err), mistake=err.finding,
                    mistake_name=err.finding_name, picture=err.picture)
    return make(passed=True, notes=tuple(result.notes))
