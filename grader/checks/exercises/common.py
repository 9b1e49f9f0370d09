"""What the exercises share: invariants, drawing and calling helpers, the ways sizes are read."""
import torch

from grader.checks import diagnosis
from grader.checks.devices import to_device
from grader.checks.devices import tolerance as _tolerance
from grader.checks.exercise import Invariant


# what grader.checks.student_call's held_report gives, in its order: the numbers a module holds
# besides its parameters, those in tensors of n_heads and of n_kv_heads heads, the tensors held
HELD = ("held", "with n_heads", "with n_kv_heads", "tensors")


def held(ctx, inputs, n_kv_heads):
    """What the student's module holds besides its parameters after it has been fed inputs (a
    cut of the check's, fed as the check feeds them), as {name: number} of HELD; n_kv_heads: the
    key/value heads its cache should keep (n_heads where every head has its own)."""
    report = {"n_heads": int(ctx.inputs["n_heads"]), "n_kv_heads": int(n_kv_heads)}
    return dict(zip(HELD, (int(v) for v in ctx.run_raw({**inputs, "report": report}).tolist())))


def core_tolerance(inputs):
    """The check's tolerance for these inputs (their device and floating dtype)."""
    t = next(v for v in inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point())
    return _tolerance(t.device, t.dtype)


_NOISE_SEED = 1234


def noise_like(t):
    gen = torch.Generator().manual_seed(_NOISE_SEED)
    return torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.device, t.dtype)


def first_change(a, b, dim, tol):
    """Index along dim of the first slice where a and b differ."""
    for i in range(a.shape[dim]):
        if not torch.allclose(a.select(dim, i), b.select(dim, i), **tol):
            return i
    return None


def causal(keys, in_dim, out_dim, what="token", batch_keys=None):
    """Changing the inputs after position t must leave outputs 0..t unchanged. Where the
    inputs have a batch (batch_keys), an output that changes because one sequence reads
    another is said to be that, not a look at the future."""
    def fn(ctx):
        T = ctx.out.shape[out_dim]
        t = (T - 1) // 2
        new = dict(ctx.inputs)
        for key in keys:
            x = ctx.inputs[key].clone()
            idx = [slice(None)] * x.dim()
            idx[in_dim] = slice(t + 1, None)
            x[tuple(idx)] += 3 * noise_like(x[tuple(idx)])
            new[key] = x
        out = ctx.run(new)
        before, after = ctx.out.narrow(out_dim, 0, t + 1), out.narrow(out_dim, 0, t + 1)
        if not ctx.close(before, after):
            if batch_keys and ctx.close(before[:1], after[:1]):  # sequence 0 keeps to its past
                mixed = _batch_mixing(ctx, batch_keys)
                if mixed:
                    return mixed
            i = first_change(before, after, out_dim, ctx.tol)
            return (f"not causal: changing {what}s {t + 1}..{T - 1} changed the output at "
                    f"position {i}.\n  Position {i} may only use {what}s 0..{i}.")
    return Invariant("causal", fn)


def batch_independent(keys):
    """Changing batch element 0 must leave the other batch elements unchanged."""
    return Invariant("batch_independent", lambda ctx: _batch_mixing(ctx, keys))


def _batch_mixing(ctx, keys):
    """None when changing batch element 0 leaves the others unchanged; else what it shows:
    state carried from one sequence into the next (sequence 0 right, the later ones not), or
    information mixed along the batch."""
    new = dict(ctx.inputs)
    for key in keys:
        x = ctx.inputs[key].clone()
        x[0] += 3 * noise_like(x[0])
        new[key] = x
    out = ctx.run(new)
    if ctx.close(ctx.out[1:], out[1:]):
        return None
    again = ctx.run(ctx.inputs)
    if not ctx.close(again, ctx.out):  # it changes on the same inputs too: no sign of mixing
        from grader.checks.stages import unwritten
        return unwritten(ctx.exercise, ctx, again) or \
            "your output changes from call to call on the same inputs (random weights, or entries never written?)"
    try:
        carried = ctx.close(ctx.out[:1], reference64(ctx.exercise, ctx.inputs)[:1])
    except Exception:
        carried = False
    if carried:  # sequence 0 right, the others reading it: a look at the future would not do that
        return ("batch elements are not independent: sequence 0 comes out right, and changing it "
                "changes the sequences after it.\n  Each sequence may only use its own tokens: nothing "
                "may carry over from one sequence to the next.")
    return ("batch elements are not independent: changing sequence 0 changed the others.\n"
            "  Mix information along T only, never along the batch dim B.")


def _rows_sum_to_one(ctx):
    sums = ctx.out.sum(-1)
    want = torch.ones_like(sums)
    mask = ctx.inputs.get("mask")
    if isinstance(mask, torch.Tensor):
        want = (~mask.cpu().expand(ctx.out.shape).all(-1)).to(sums.dtype)
    if not ctx.close(sums, want):
        msg = (f"each row must sum to 1 (a distribution over the keys); row sums range from "
               f"{float(sums.min()):.4g} to {float(sums.max()):.4g}.")
        if ctx.close(ctx.out.sum(-2), torch.ones_like(ctx.out.sum(-2))):
            msg += "\n  Your columns sum to 1 instead."
        return msg


def _masked_get_zero(ctx):
    mask = ctx.inputs["mask"].cpu().expand(ctx.out.shape)
    w = ctx.out[mask].abs()
    if w.numel() and float(w.max()) > ctx.tol["atol"]:
        return (f"masked positions must get weight 0; {int((w > ctx.tol['atol']).sum())} of "
                f"{w.numel()} masked positions have weight (up to {float(w.max()):.4g}).")


def _fully_masked_rows(ctx):
    empty = ctx.inputs["mask"].cpu().expand(ctx.out.shape).all(-1)  # (B, T)
    rows = ctx.out[empty]
    if not ctx.close(rows, torch.zeros_like(rows)):
        return ("a row whose every position is masked must come out as zeros "
                f"(it may attend to nothing); got rows with values up to {float(rows.abs().max()):.4g}.")


def _future_gets_zero(ctx):
    upper = ctx.out.triu(1)
    if not ctx.close(upper, torch.zeros_like(upper)):
        idx = tuple(int(i) for i in (upper.abs() > ctx.tol["atol"]).nonzero()[0])
        return (f"weights above the diagonal (the future) must be 0; found "
                f"{float(upper[idx]):.4g} at index {idx}.")


def _follows_inputs(ctx):
    """The code follows its inputs: with float64 inputs it works and returns float64; with
    its inputs on another device (the meta device: no data) it creates nothing on the CPU."""
    floats = [v for v in ctx.inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if not floats:
        return None
    other = torch.float32 if floats[0].dtype == torch.float64 else torch.float64
    inputs = to_device(ctx.inputs, floats[0].device, other)
    out, problem = ctx.try_run(inputs)
    if problem and "NaN/inf" in problem and wrong_already(ctx):
        problem = None  # the output is wrong as it is (entries never written hold NaN or not
        # as the memory happens to): the values check says how, not a guess about dtypes
    if problem and "NaN/inf" in problem:
        found = _unwritten_nan(ctx, inputs, problem.partition("\n")[0], other)
        if found:
            return found
    if problem:
        first, _, rest = problem.partition("\n")
        hint = "" if "dtype=" in rest else ("\n  Create new tensors with dtype=x.dtype and device=x.device, and move "
                                            "those you are given: .to(x.device, x.dtype).")
        return (f"{_with_inputs(other)}, {first}" + (f"\n{rest}" if rest else "")
                + hint, "follows_inputs")
    if other == torch.float64:
        problem = _float32_inside(ctx, inputs, out)
        if problem:
            return problem
    meta = ctx.on_meta()
    return diagnosis.device_message(meta, ctx.facts() if ctx.facts else None,
                                    ctx.exercise.diagnosis.reads_no_values) if meta else None


def _with_inputs(dtype):
    """How the output check's messages name the run in another dtype: "with float64 inputs"."""
    return f"with {str(dtype).replace('torch.', '')} inputs"


def _unwritten_nan(ctx, inputs, first, dtype):
    """(message, "unwritten") where the NaN/inf of a run on `inputs` (first: what the output
    check said) come from entries never written, not from the dtype: the same call again gives
    other values there or none (torch.empty held leftovers: the check's own run found right
    values, often the previous call's), or NaN/inf only in the last slices of one dim with
    everything else right. None where the NaN/inf stand as they were (an overflow)."""
    try:
        again = ctx.run_raw(inputs)
        want = reference64(ctx.exercise, inputs)
    except Exception:  # the call fails now: the message the check has says what it can
        return None
    found = _unwritten_tail(ctx, inputs, again, want, dtype)
    if found:
        return found
    if bool(torch.isfinite(again).all()):
        return (f"{_with_inputs(dtype)}, {first} Called again on the same "
                "inputs, it has none: those entries depend on what the memory held, so they are never written.\n  "
                "torch.empty leaves whatever the memory held: make sure your loops fill every entry.",
                "unwritten")
    return None


def _unwritten_tail(ctx, inputs, got, want, dtype):
    """(message, "unwritten") where `got`, the output on `inputs` (of `dtype`; float64 on the
    CPU here), is right but for the last slices of one dim (entries never written:
    diagnosis.unwritten_finding), compared at the inputs' tolerance; else None."""
    tol = core_tolerance(inputs)
    found = diagnosis.unwritten_finding(got, want, lambda a, b: torch.allclose(a, b, **tol),
                                        list(ctx.exercise.shape(inputs)[1]))
    if found is None:
        return None
    return (f"{_with_inputs(dtype)} your output is {found.name}.\n  Likely mistake: "
            f"{found.hint}", found.key)


def reference64(exercise, inputs):
    """The exercise's reference on these inputs, computed in float64 on the CPU."""
    cpu64 = {k: (v.detach().to("cpu", torch.float64) if v.is_floating_point() else v.detach().cpu())
             if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    return exercise.reference(*cpu64.values()).detach().to("cpu", torch.float64)


def wrong_already(ctx):
    """Whether the output of the check's own run differs from the float64 reference (an
    invariant that looks for one mistake asks it first, so that it names no other)."""
    try:
        want = reference64(ctx.exercise, ctx.inputs)
    except Exception:
        return False
    return not ctx.close(ctx.out, want)


def _float32_inside(ctx, inputs64, out):
    """An answer right in float32 whose output on float64 inputs (out) is only float32-accurate:
    something inside it (a running maximum, a sum, a buffer) was created in float32."""
    want = reference64(ctx.exercise, inputs64)
    if not ctx.close(ctx.out, want):
        return None  # wrong already: the values check says how
    tol64 = core_tolerance(inputs64)
    if torch.allclose(out, want, **tol64):
        return None
    if not torch.allclose(out.to(torch.float32), want.to(torch.float32),
                          **_tolerance(out.device, torch.float32)):
        return _far_in_float64(ctx, inputs64, out, want)
    if "scores" in inputs64:  # a softmax: an error by the same factor in each row is no rounding
        found = diagnosis.softmax_sum_finding(out, want, inputs64["scores"].detach().cpu(),
                                              lambda a, b: torch.allclose(a, b, **tol64))
        if found and found.key == "sum_epsilon":  # the other factors may be float32 rounding
            return (f"with float64 inputs your values differ from the float64 reference by up to "
                    f"{float((out - want).abs().max()):.2g}, every row by one factor.\n  Likely mistake: "
                    f"{found.name} \u2014 {found.hint}", found.key)
    return (f"the checks also run your code on float64 inputs (as a model kept in another precision "
            f"would run it); there your values are only float32-accurate (they differ from the float64 "
            f"reference by up to {float((out - want).abs().max()):.2g}): part of the computation runs in "
            "float32.\n  Create new tensors (running maximum and sum, buffers, a cache) with dtype=x.dtype "
            "and device=x.device.", "follows_inputs")


def _far_in_float64(ctx, inputs64, out, want):
    """Right in float32, wrong in float64 by more than float32 rounding: not a precision. Most
    often entries never written (torch.empty's memory held the right values in one run and
    leftovers in the other), which the values diagnosis names; else the plain difference."""
    got = out.detach().cpu()
    found = _unwritten_tail(ctx, inputs64, got, want, torch.float64)
    if found:
        return found
    return (f"with float64 inputs your values differ from the float64 reference by up to "
            f"{float((got - want).abs().max()):.2g}, far more than float32 rounding, although "
            "they match in float32: something in your code depends on the dtype, or on what memory "
            "it was given (torch.empty).", "follows_inputs")


def _stable(ctx):
    """Large scores must not overflow: the softmax of scores * 40 (up to a few hundred) is
    still a finite set of weights, and the reference's."""
    if not ctx.close(ctx.out, reference64(ctx.exercise, ctx.inputs)):
        return None  # wrong already at ordinary scores: the values check says how
    new = dict(ctx.inputs)
    new["scores"] = ctx.inputs["scores"] * 40
    biggest = float(new["scores"].abs().max())
    out, problem = ctx.try_run(new)
    if problem is None:
        if ctx.close(out, reference64(ctx.exercise, new)):
            return None
        problem = "the weights differ from the reference."
    return (f"with large scores (up to {biggest:.0f}) {problem.splitlines()[0]}\n"
            "  exp overflows there: subtract each row's largest score first (torch.softmax does).",
            "unstable")


def changes_with(keys, what):
    """attends(ctx) for an exercise whose output must change when the inputs in keys change
    (the scores, or the queries and keys): an output that does not ignores them."""
    def fn(ctx):
        new = dict(ctx.inputs)
        for key in keys:
            new[key] = ctx.inputs[key] + noise_like(ctx.inputs[key])
        if ctx.close(ctx.run(new), ctx.out):
            return f"stays the same when {what} change: it never uses them"
    return fn


FOLLOWS_INPUTS = Invariant("follows_inputs", _follows_inputs)


STABLE = Invariant("stable", _stable)


ROWS_SUM_TO_ONE = Invariant("rows_sum_to_one", _rows_sum_to_one)


MASKED_GET_ZERO = Invariant("masked_get_zero", _masked_get_zero)


FULLY_MASKED_ROWS = Invariant("fully_masked_rows", _fully_masked_rows)


FUTURE_GETS_ZERO = Invariant("future_gets_zero", _future_gets_zero)


def call_function(*names):
    return lambda inputs: {"kind": "function", "args": [inputs[n] for n in names], "names": list(names)}


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def crop_x(inputs, L):
    return {**inputs, "x": inputs["x"][:, :L]}


X_READS = diagnosis.reads("x")


SCORES_READS = diagnosis.reads("scores", T="-1")


ATTENTION_VARIANTS = (diagnosis.fill_variants, diagnosis.scale_variants, diagnosis.operand_variants)


ATTENTION_SHORTCUTS = ("F.scaled_dot_product_attention", "nn.MultiheadAttention",
                       "F.multi_head_attention_forward",
                       "torch.nn.attention.flex_attention.flex_attention")  # attention with a score hook


def bump(value, taken):
    """value, moved up until it differs from every size in taken."""
    while value in taken:
        value += 1
    return value
