"""Findings from the values: the right numbers in a wrong layout, up to a factor, partly
unwritten, NaN/inf in one place, a fitted scale, a wrong running sum, a wrong shape."""
import itertools
import math

import torch

from grader.checks import registry
from grader.checks.diagnosis.facts import _how
from grader.checks.diagnosis.findings import PLAIN, Finding
from grader.checks.diagnosis.shapes import at_indices, index_word, name_number, name_shape
from grader.checks.diagnosis.variants import MERGE_HINT, _factor_candidates, forward


def _matches(actual, guess, close):
    guess = guess.detach().to("cpu", torch.float64)
    return guess.shape == actual.shape and (close(actual, guess) or close(
        actual.nan_to_num(0.0), guess.nan_to_num(0.0)))


def _fit_scale(key, inp, actual, close):
    """The scale factor that reproduces the output, searched over a log grid, then refined."""
    def err(logf):
        try:
            out = forward(key, inp, factor=math.exp(logf)).to("cpu", torch.float64)
        except Exception:
            return float("inf")
        return float((out - actual).abs().max()) if out.shape == actual.shape else float("inf")
    grid = [i / 4 for i in range(-40, 21)]
    best = min(grid, key=err)
    lo, hi = best - 0.25, best + 0.25
    g = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if err(a) < err(b):
            hi = b
        else:
            lo = a
    f = math.exp((lo + hi) / 2)
    out = forward(key, inp, factor=f)
    return f if _matches(actual, out, close) else None


def _say_number(f, sz=None):
    """0.25 -> '1/sqrt(16)'; 1/sqrt(10) with head_size = 5 -> '1/sqrt(10 = 2·head_size)';
    1/2 with head_size = 5 -> '1/(2 = head_size // 2)'; 0.3 -> '0.3'."""
    def name(n):
        if not sz:
            return None
        halves = [k for k, v in sz.items() if v // 2 == n and v > 3]
        return name_number(n, sz) or (f"2\u00b7{name_number(n // 2, sz)}" if n % 2 == 0 and name_number(n // 2, sz)
                                      else f"{halves[0]} // 2" if len(halves) == 1 else None)
    inv = 1 / f
    forms = []  # (a whole number n, how 1/f is said with it), the square root first
    if abs(inv**2 - round(inv**2)) < 1e-3 * inv**2 and round(inv**2) > 1:
        forms.append((round(inv ** 2), lambda n, said: f"1/sqrt({said})"))
    if abs(inv - round(inv)) < 1e-3 * inv and round(inv) > 1:
        forms.append((round(inv), lambda n, said: f"1/({said})" if said != str(n) else f"1/{n}"))
    rank = lambda form: (name(form[0]) is None, "\u00b7" in (name(form[0]) or ""))  # one size's name first
    for n, say in sorted(forms, key=rank):
        return say(n, f"{n} = {name(n)}" if name(n) else str(n))
    return f"{f:.4g}"


def layout_finding(actual, expected, close, names):
    """The right numbers in the wrong layout: a permutation or a reshape of the expected."""
    if actual.numel() != expected.numel() or actual.dim() == 0:
        return None
    dims = list(range(expected.dim()))
    label = lambda perm: "(" + ", ".join(names[i] for i in perm) + ")" if names else str(perm)
    for perm in itertools.permutations(dims):
        if list(perm) == dims:
            continue
        e = expected.permute(perm)
        if e.shape == actual.shape and close(actual, e):
            if expected.dim() >= 2 and list(perm) == dims[:-2] + [dims[-1], dims[-2]]:
                return Finding("transposed", "the last two dims swapped (the result transposed)",
                               f"expected {label(dims)}; yours is {label(perm)}: "
                               "check which side of each matmul or transpose is which.")
            return Finding("permuted", f"the right numbers with dims ordered {label(perm)}",
                           f"expected {label(dims)}: put the dims back with .permute/.transpose.")
    for perm in itertools.permutations(dims):
        e = expected.permute(perm).reshape(actual.shape)
        if close(actual, e):
            how = "without a permute" if list(perm) == dims else f"from {label(perm)}"
            return Finding("reshaped", f"the right numbers in the wrong places: a view/reshape {how}",
                           "view and reshape never move numbers between dims; transpose first, then reshape.")
    return None


def _express_factor(c, sz):
    """The factor c said in the sizes ('1/T', 'sqrt(head_size)', 'T'), or None."""
    for expr, value in _factor_candidates(sz):
        if value != 1.0 and math.isclose(c, value, rel_tol=1e-4):
            return expr
    for name, v in sz.items():
        if math.isclose(c, v, rel_tol=1e-4):
            return name
    return None


def unfilled_finding(actual, expected, close, names):
    """Right everywhere except whole slices left at zero (a loop that stops early, a return
    inside a loop)."""
    for d in range(actual.dim()):
        zero = [i for i in range(actual.shape[d]) if not actual.select(d, i).any()
                and expected.select(d, i).abs().max() > 1e-6]
        if not zero or len(zero) == actual.shape[d]:
            continue
        keep = [i for i in range(actual.shape[d]) if i not in zero]
        idx = torch.tensor(keep)
        if close(actual.index_select(d, idx), expected.index_select(d, idx)):
            name = names[d] if names and d < len(names) else f"dim {d}"
            where = ", ".join(map(str, zero[:4])) + (", ..." if len(zero) > 4 else "")
            where = at_indices(name, zero[0] if len(zero) == 1 else where)
            tail = zero == list(range(zero[0], actual.shape[d])) and zero[0] < actual.shape[d] - 1
            size = names[d] if names and d < len(names) else "the size"
            hint = (f"those were never written: a loop with a size written as a number (range({zero[0]})) "
                    f"instead of read from the input ({size}), or one that stops early."
                    if tail else "those were never written: a loop that stops early (range(T - 1)?) "
                    "or a return inside the loop.")
            return Finding("unfilled", f"right everywhere except {where}, left at 0", hint)
    return None


def unwritten_finding(actual, expected, close, names):
    """Right everywhere except the last slices along one dim, which hold NaN/inf among
    whatever else: entries never written (a loop that stops early leaves them as
    torch.empty found the memory), not a division by zero."""
    if actual.shape != expected.shape:
        return None
    for d in range(actual.dim()):
        n = actual.shape[d]
        wrong = [i for i in range(n) if not close(actual.select(d, i), expected.select(d, i))]
        if not wrong or wrong[0] == 0 or wrong != list(range(wrong[0], n)):
            continue
        if close(actual.narrow(d, 0, wrong[0]), expected.narrow(d, 0, wrong[0])):
            name = names[d] if names and d < len(names) else f"dim {d}"
            span = at_indices(name, n - 1 if wrong[0] == n - 1 else f"{wrong[0]}..{n - 1}")
            return Finding("unwritten", f"right everywhere except {span}, which hold NaN/inf and "
                           "other values nothing computed",
                           f"those entries were never written: torch.empty leaves whatever the memory "
                           f"held; make sure your loops fill every one, up to {at_indices(name, n - 1)}.")
    return None


def ratio_finding(actual, expected, close, tol, names, sz):
    """Right up to a factor: constant, changing along one dim, or u[i]/u[j] (a row
    normaliser read along the columns: a sum without keepdim=True)."""
    atol = tol["atol"]
    support = expected.abs() > 1e-6
    if not support.any() or actual.shape != expected.shape:
        return None
    if (actual[~support].abs() > atol * 10).any():
        return None
    r = torch.where(support, actual / expected.where(support, torch.ones_like(expected)),
                    torch.full_like(expected, float("nan")))
    vals = r[support]
    if (vals.max() - vals.min()).abs() <= 1e-3 * vals.abs().max():
        c = float(vals.mean())
        if abs(c - 1) < 1e-3:
            return None
        expr = _express_factor(c, sz) if sz else None
        return Finding("constant_factor", f"every value is {c:.4g} times the expected one"
                       + (f" (a factor {expr})" if expr else ""),
                       "the pattern is right; look for an extra or a missing division or scale.")
    if expected.dim() >= 2 and expected.shape[-1] == expected.shape[-2] and bool(support[..., :, 0].all()):
        u = r[..., :, 0]  # (..., T)
        pred = u.unsqueeze(-1) / u.unsqueeze(-2)  # (..., T, T)
        if torch.allclose(r[support], pred[support], rtol=1e-3, atol=1e-6):
            return Finding("missing_keepdim", "a row normaliser broadcast along the columns",
                           "wei.sum(-1) has shape (..., T) and divides column j by row j's sum; keep "
                           "the dim: wei.sum(-1, keepdim=True).")
    for d in range(expected.dim()):
        moved = r.movedim(d, 0).reshape(r.shape[d], -1)
        sup = support.movedim(d, 0).reshape(r.shape[d], -1)
        ok = True
        for i in range(moved.shape[0]):
            row = moved[i][sup[i]]
            if row.numel() and (row.max() - row.min()).abs() > 1e-3 * row.abs().max():
                ok = False
                break
        if ok:
            name = names[d] if names and d < len(names) else f"dim {d}"
            factors = []
            for i in range(min(3, moved.shape[0])):
                row = moved[i][sup[i]]
                factors.append(f"{float(row.mean()):.3g}" if row.numel() else "?")
            word, letter = index_word(name)
            return Finding("factor_along_dim", f"values right up to a factor that changes along {name}",
                           f"at {word}s {letter} = 0, 1, 2 yours are {', '.join(factors)} times the expected "
                           f"ones: the count or sum you divide by is wrong for each {word}.")
    return None


def nonfinite_finding(actual, names, hooks=PLAIN):
    """Where NaN/inf values sit: everywhere, or all at one index of one dim."""
    bad = ~torch.isfinite(actual)
    if not bad.any():
        return None
    if hooks.running_max and bool((actual == float("inf")).all()):
        return Finding("max_not_updated", "every value is +inf: the maximum subtracted at the end is still -inf",
                       "after each step store the new running maximum (m = m_new), so that exp(x - m) "
                       "is at most 1.")
    if bad.all() and hooks.given_code:  # no mask argument here: say where, not how
        return Finding("all_nan", "every value is NaN or inf",
                       "follow one row by hand on a few scores: print the running maximum m and sum "
                       "l after each step, and look for inf - inf, 0 * inf or 0 / 0.")
    if bad.all():
        return Finding("all_nan", "every value is NaN or inf",
                       "an inf met a 0 early on (0 * -inf, or inf - inf): hide scores with "
                       "masked_fill(mask, float('-inf')), never by arithmetic with inf.")
    where = bad.nonzero()
    for d in range(actual.dim()):
        idx = where[:, d].unique()
        if idx.numel() == 1 and actual.shape[d] > 1 and (d > 0 or actual.dim() == 2):
            name = names[d] if names and d < len(names) else f"dim {d}"
            i = int(idx)
            if hooks.nonfinite_hint:
                hint = hooks.nonfinite_hint(i)
            elif i == 0 and name == "T":
                hint = ("the first query sees no key at all: a causal mask that also hides the "
                        "diagonal (key >= query) leaves it nothing to attend to; hide only key > query")
            else:
                hint = "a division by zero (or a row with nothing to attend to) there"
            word, letter = index_word(name)
            return Finding("nonfinite_at", f"the NaN/inf values all sit at {word} {letter} = {i}", hint + ".")
    return None


def averaging_nonfinite_hint(i):
    """Diagnosis.nonfinite_hint of the averages (01, 02): NaN/inf at index i of one dim."""
    return ("an average of nothing at the first position: a slice that is empty at t = 0, or a count "
            "of t instead of t + 1" if i == 0 else "a division by zero (or a row with nothing to average) there")


def online_softmax_finding(inp, actual, expected, close):
    """Diagnosis.first_finding of 08's online softmax: the running sum gone wrong."""
    return softmax_sum_finding(actual, expected, inp["scores"], close)


def softmax_sum_finding(actual, expected, scores, close):
    """For a softmax computed with a running sum: rows that are the softmax times a factor
    (the exps right, the sum they are divided by wrong), and what the factors say."""
    sums = actual.sum(-1, keepdim=True)
    if not torch.isfinite(sums).all() or bool((sums <= 0).any()) or not close(actual, expected * sums):
        return None
    if close(sums, torch.ones_like(sums)) and close(actual, expected):
        return None
    lo, hi = float(sums.min()), float(sums.max())
    top = scores.amax(-1, keepdim=True)
    l_true = torch.exp(scores - top).sum(-1, keepdim=True)  # the right running sum
    if close(sums, l_true):
        return Finding("never_divided", "each row is exp(x - m), never divided by the running sum l",
                       "after the loop, divide by l: the exps over their sum are the probabilities.")
    if bool((sums >= 1).all()):
        return Finding("scores_skipped", f"each row is the softmax times {lo:.4g} to {hi:.4g}: the running "
                       "sum misses some scores",
                       "the exps are right but l is too small: the loop must add every score of the row "
                       "to l, the first (index 0) to the last (N - 1).")
    if not bool((sums < 1).all()):
        return None
    eps = l_true * (1 / sums - 1)  # what was added to it
    if float(eps.max() - eps.min()) <= 1e-3 * float(eps.max()):
        return Finding("sum_epsilon", f"a constant {float(eps.mean()):.2g} added to the running sum before dividing",
                       "l is at least 1 (the largest score's own term is exp(0) = 1), so nothing can divide "
                       "by zero: divide by l alone.")
    return Finding("sum_too_large", f"each row is the softmax times {lo:.4g} to {hi:.4g}: the running sum "
                   "comes out too large",
                   "each step adds exp(x_j - m_new), against the maximum after this score, to the old sum "
                   "rescaled by exp(m - m_new).")


def overflow_finding(exercise):
    """Right on the check's inputs, NaN/inf once they change: something overflows."""
    if not exercise.diagnosis.running_max:
        return None
    return Finding("maximum_decreases", "right on these inputs, NaN/inf once the keys change: an exp overflows",
                   "exp(m - m_new) overflows when m_new can be lower than m: the running maximum must never go "
                   "down, m_new = torch.maximum(m, the new scores' maximum).")


def context_length_finding(inp, actual, expected):
    """generate's tokens, when they are those of a model always given the last L tokens
    for one L other than block_size: how long the context was."""
    _generate = registry.knob("generate")  # grader/answers/mistakes.py's generate with knobs
    block_size, T = int(inp["block_size"]), len(inp["idx"][0])
    args = (inp["model"], inp["idx"], inp["max_new_tokens"], block_size, inp["temperature"], inp["seed"])
    for L in range(1, inp["model"]["pos"].shape[0] + 1):
        try:
            guess = _generate(*args, crop=L).to(actual.dtype)
        except Exception:
            continue
        if L == block_size or (expected is not None and torch.equal(guess, expected.to(guess.dtype))):
            continue
        if torch.equal(guess, actual):
            if L == T:
                why = (f"the prompt's length T = {T}: a length read before the loop (idx.shape[1] "
                       "of the prompt) stays fixed while idx grows")
            elif abs(L - block_size) == 1:
                why = f"block_size {'+' if L > block_size else '-'} 1: the crop is off by one"
            else:
                why = f"not block_size = {block_size}"
            return Finding("context_length", f"the model was given the last {L} tokens each step",
                           f"{L} is {why}. Keep the last block_size tokens of the growing "
                           "sequence at every step.")
    return None


def slice_finding(actual, expected, close, names):
    """An output that is one slice of the expected one: the last (or first) position only."""
    if actual.dim() + 1 != expected.dim() or not names:
        return None
    for d in range(1, expected.dim() - 1):  # a dim in the middle (T of (B, T, vocab_size))
        if expected.select(d, 0).shape != actual.shape:
            continue
        for i, which in ((-1, "last"), (0, "first")):
            if close(actual, expected.select(d, i)):
                word = index_word(names[d] if d < len(names) else f"dim {d}")[0]
                shown = ", ".join(n for j, n in enumerate(names) if j != d)
                return Finding(f"{which}_position_only", f"only the {which} {word}'s output, ({shown})",
                               f"return the output of every {word}, ({', '.join(names)}); picking one "
                               f"(as generate does with [:, -1, :]) is the caller's job.")
    return None


def shape_finding(shape, expected, names, sz, hooks=PLAIN):
    """Why the output has this shape, said in the sizes."""
    named = name_shape(shape, sz)
    want = name_shape(expected.shape, sz)
    if want is not None and named is None and len(shape) == expected.dim():
        odd = [(int(have), n, int(w)) for have, n, w in zip(shape, want.strip("()").split(", "), expected.shape)
               if int(have) != int(w)]
        if odd and all(name_number(h, sz) is None and h > 1 for h, _, _ in odd):
            have, n, w = odd[0]
            return Finding("hard_coded_size", f"the output has {have} where {n} = {w} belongs: {have} is "
                           "none of this check's sizes",
                           f"a size written as a number (or taken from elsewhere) fits one input only: "
                           f"{_how(hooks, n)}.")
    if named is None or want is None:
        return None
    parts = named.strip("()").split(", ")
    if "n_heads" in parts and "head_size" in parts:
        return Finding("heads_not_merged", f"the output is {named}: the heads are still separate",
                       f"merge them back: {MERGE_HINT}, then self.proj.")
    if sorted(parts) == sorted(want.strip("()").split(", ")):
        return Finding("dims_order", f"the output is {named}, not {want}",
                       "the right sizes in the wrong order: a transpose or view swapped two dims.")
    if parts[-2:] == ["T", "T"] and want.endswith("T, T)") is False:
        return Finding("returned_weights", f"the output is {named}: the attention weights",
                       "return the weights applied to the values: wei @ v.")
    return Finding("shape_named", f"the output is {named}; expected {want}",
                   "follow the shape of each step with a comment like # (B, T, head_size).")
