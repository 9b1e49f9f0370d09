"""The stages of a check, in order: the output (type, shape, dtype, device, finite), then
that the answer attends (no trivial baseline, nothing random, reads what attention reads),
the focus's invariants, and the values. Each stage raises what it found as a Wrong, with
the output it looked at; grader.checks.explain turns it into the learner's message."""
from grader.checks import diagnosis, stored
from grader.checks.calling import Mutated, StudentError, call_student
from grader.checks.case import Context
from grader.checks.compare import close, to_cpu64
from grader.checks.devices import cpu
from grader.checks.feedback import CheckError
from grader.checks.output import check_tensor


class Wrong(Exception):
    """A stage of the check found the answer wrong: the output it looked at and what it saw."""

    def __init__(self, out=None, detail=None):
        super().__init__(type(self).__name__)
        self.out, self.detail = out, detail


class Shortcut(Wrong):
    """detail: the function that does the whole exercise (a graded run gives no points)."""


class WrongOutput(Wrong):
    """out: what the student's code returned; detail: check_tensor's CheckError."""


class Baseline(Wrong):
    """detail: the trivial baseline the output is (diagnosis.trivial)."""


class NoAttention(Wrong):
    """detail: how the output shows no attention (no_attention): a message, or (message,
    finding key) where it names a mistake instead."""


class Broken(Wrong):
    """detail: an invariant's message, or (message, finding key) where it names the mistake."""


class BrokenRun(Wrong):
    """detail: the CheckError of running the student's code on an invariant's own inputs."""


class ValuesDiffer(Wrong):
    """The values differ from the reference."""


def checked_output(case):
    """The student's output on the case's inputs, of the right type, shape, dtype and device
    and finite, as the Context the invariants see."""
    try:
        out = call_student(case.exercise, case.student, case.inputs)
    except Mutated as mutated:
        mutated.first = True  # on the check's own inputs: its output can still be compared
        raise
    try:
        out = check_tensor(case.exercise, out, case.inputs, case.shape_info)
    except CheckError as err:
        raise WrongOutput(out, err) from None
    return Context(case.exercise, case.student, case.inputs, to_cpu64(out), case.tol, case.facts)


def check_attends(case, ctx):
    """The output is no trivial baseline and shows that the answer attends."""
    baseline = diagnosis.trivial(case.exercise, cpu(case.inputs64), ctx.out, ctx.close)
    if baseline:
        raise Baseline(ctx.out, baseline)
    ignored = no_attention(case.exercise, ctx)
    if ignored:
        raise NoAttention(ctx.out, ignored)


def check_invariants(case, ctx):
    """Each invariant of the focus holds (one the student bundle cannot judge is skipped)."""
    for inv in case.focus.invariants:
        try:
            problem = inv.fn(ctx)
        except stored.NotShipped:  # the student bundle cannot judge this one: say nothing
            problem = None
        except CheckError as err:  # a run on changed inputs went wrong (NaN, a shape)
            raise BrokenRun(ctx.out, err) from None
        if problem:
            raise Broken(ctx.out, problem)


def check_values(case, ctx):
    """The output matches the reference within the check's tolerance."""
    # the test of torch.testing.assert_close (out is finite here); its first call
    # imports torch.distributed, about 1 s of CPU in a notebook's first values check
    if not close(ctx.out, case.reference(), case.tol):
        raise ValuesDiffer(ctx.out)


def unwritten(exercise, ctx, again):
    """(message, "unwritten") when only some entries change from call to call: entries of a
    torch.empty buffer that the code never fills hold whatever the memory held. Along the
    first dim where the entries that changed make one unbroken span short of the whole dim;
    else along the dim where their span is the shortest part of it, gaps and all (memory can
    hold the same leftovers at some entries in both calls: a tail t = 36..40 never written
    once changed everywhere but at t = 38)."""
    import torch

    same = torch.isclose(again, ctx.out, rtol=ctx.tol["rtol"], atol=ctx.tol["atol"])
    if not same.any():
        return None  # everything changes: random weights, not a hole
    names = exercise.shape(ctx.inputs)[1]  # each dimension by name
    where = (~same).nonzero()
    spans = []  # (has gaps, share of the dim, dim, first, last)
    for d in range(ctx.out.dim()):
        idx = where[:, d].unique()
        first, last = int(idx.min()), int(idx.max())
        size = ctx.out.shape[d]
        if last - first + 1 < size:
            spans.append((len(idx) != last - first + 1, (last - first + 1) / size, d, first, last))
    if not spans:
        return None
    unbroken = [span for span in spans if not span[0]]
    _, _, d, first, last = unbroken[0] if unbroken else min(spans)
    name = names[d] if d < len(names) else f"dim {d}"
    span = diagnosis.at_indices(name, first if first == last else f"{first}..{last}")
    return (f"your output at {span} changes from call to call on the same inputs, the rest "
            f"does not: those entries are never written.\n  torch.empty leaves whatever the memory "
            f"held: make sure your loops fill every one, up to "
            f"{diagnosis.at_indices(name, ctx.out.shape[d] - 1)}.",
            "unwritten")


def no_attention(exercise, ctx):
    """How the output shows that the answer does no attention, or None: it differs from
    call to call on the same inputs (random weights), or the exercise's own test says so."""
    try:
        if exercise.repeatable:
            again = ctx.run(ctx.inputs)
            if not ctx.close(again, ctx.out):
                return unwritten(exercise, ctx, again) or \
                    "changes from call to call on the same inputs (random weights?)"
        return exercise.attends(ctx) if exercise.attends else None
    except (CheckError, StudentError, Mutated, stored.NotShipped):
        return None  # the checks that follow say what is wrong
