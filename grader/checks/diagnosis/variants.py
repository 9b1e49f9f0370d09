"""The variant families: attention with a knob turned (grader/answers/knobs.py, through the
registry), each a named mistake (a scale, a flag or mask ignored, a layout, a fill)."""
import itertools
import math

from grader.checks import registry
from grader.checks.diagnosis.findings import Finding, Scale
from grader.checks.diagnosis.shapes import _sizes_text


NO_SCALE = Scale(lambda sz: 1.0, "no scale", "no scale")


HEAD_SIZE_SCALE = Scale(lambda sz: sz["head_size"] ** -0.5, "head_size ** -0.5 = 1/sqrt(head_size)",
                        "head_size ** -0.5")


def forward(key, inp, **knobs):
    """The exercise's output with the knobs turned; the defaults give the reference. The
    answers hand it in (grader/answers/knobs.py), through the registry."""
    return registry.knob("forward")(key, inp, **knobs)


def _factor_candidates(sz):
    """(expression, value) for scale factors a learner might use, in terms of the sizes."""
    out = [("no scale", 1.0)]
    hs = sz.get("head_size")
    if hs:
        out += [("1/sqrt(head_size)", hs**-0.5), ("1/head_size", 1 / hs), ("sqrt(head_size)", hs**0.5),
                ("head_size", float(hs))]
    if "n_heads" in sz:
        nh = sz["n_heads"]
        out += [("1/sqrt(n_heads\u00b7head_size)", (nh * hs) ** -0.5), ("1/(n_heads\u00b7head_size)", 1 / (nh * hs)),
                ("1/sqrt(n_heads)", nh**-0.5), ("1/n_heads", 1 / nh)]
    if "C" in sz:
        out += [("1/sqrt(C)", sz["C"] ** -0.5), ("1/C", 1 / sz["C"]), ("sqrt(C)", sz["C"] ** 0.5)]
        if sz.get("n_heads"):  # the width split over the heads, where no other size says it
            split = (sz["C"] // sz["n_heads"]) ** -0.5
            if not any(math.isclose(split, value, rel_tol=1e-9) for _, value in out):
                out += [("1/sqrt(C // n_heads)", split)]
    out += [("1/sqrt(T)", sz["T"] ** -0.5), ("1/T", 1 / sz["T"]), ("sqrt(T)", sz["T"] ** 0.5)]
    return out


def scale_variants(d, inp, sz):
    if d.scale is None:
        return
    right = d.scale.factor(sz)
    want = d.scale.said
    for expr, value in _factor_candidates(sz):
        if math.isclose(value, right, rel_tol=1e-9):
            continue
        yield (Finding("scale", f"scores scaled by {expr} (= {value:.4g})",
                       f"use {want}; here {_sizes_text(sz, ('T', 'C', 'head_size', 'n_heads'))}."),
               dict(factor=value))


def causal_flag_variants(d, inp, sz):
    """A module's causal flag ignored (04, 06)."""
    if inp["causal"]:
        yield (Finding("causal_ignored", "causal=True ignored: the future is visible",
                       "keep the flag from __init__ and mask when it is True (a module built of "
                       "Heads passes it on to each: Head(..., causal))."),
               dict(mask="none"))
    else:
        yield (Finding("always_causal", "causal=False ignored: the future is always hidden",
                       "keep the flag from __init__ and mask only when it is True (a module built of "
                       "Heads passes it on to each: Head(..., causal))."),
               dict(mask="causal"))


def optional_mask_variants(d, inp, sz):
    """A mask argument that may be None (05) ignored, or replaced by a causal one."""
    if inp["mask"] is not None:
        yield (Finding("mask_ignored", "the mask argument is ignored",
                       "when mask is given, fill those scores with -inf before the softmax."),
               dict(mask="none"))
        yield (Finding("always_causal", "a causal mask used instead of the given mask",
                       "use the mask you are given (True = hidden); it is not always causal."),
               dict(mask="causal"))
    else:
        yield (Finding("always_causal", "a causal mask applied although mask is None",
                       "mask only when a mask is given: if mask is not None: ..."),
               dict(mask="causal"))


def given_mask_variants(d, inp, sz):
    """A mask argument (03's masked_softmax) replaced by, or combined with, a causal one."""
    yield (Finding("always_causal", "a causal mask used instead of the given mask",
                   "use the mask argument (True = hidden), whatever its pattern."), dict(mask="causal"))
    yield (Finding("mask_plus_causal", "the given mask combined with a causal one",
                   "use the mask argument alone; it already says what is hidden."),
           dict(mask="given+causal"))


def mask_offset_variants(d, inp, sz):
    """A causal mask built one diagonal off (03's causal_weights)."""
    for offset, name in ((2, "mask shifted: token t also sees token t+1"),
                         (-1, "mask shifted: token t sees neither itself nor token t-1")):
        yield (Finding("mask_offset", name,
                       "hide exactly the positions above the diagonal: triu(ones(T, T), diagonal=1)."),
               dict(mask=f"offset{offset}"))


ORDER_NAMES = {("nh", "T", "hs"): "(B, n_heads, T, head_size)", ("T", "nh", "hs"): "(B, T, n_heads, head_size)",
               ("T", "hs", "nh"): "(B, T, head_size, n_heads)", ("nh", "hs", "T"): "(B, n_heads, head_size, T)",
               ("hs", "T", "nh"): "(B, head_size, T, n_heads)", ("hs", "nh", "T"): "(B, head_size, n_heads, T)"}


MERGE_HINT = ("move the heads' dim back next to head_size, then reshape to (B, T, n_heads * head_size) "
              "(reshape, since a transpose is not contiguous)")


SPLIT_HINT = ("a view as (B, T, n_heads, head_size), then T and n_heads swapped: head h owns "
              "features h*head_size..(h+1)*head_size-1")


def operand_variants(d, inp, sz):
    """q and k swapped, or the weights transposed before they meet v (04, 05)."""
    yield (Finding("operands_swapped", "queries and keys swapped (k @ q^T)",
                   "the scores are the queries times the keys (transposed), not the other way "
                   "round: row t holds what query t finds in every key."),
           dict(order="kq"))
    yield (Finding("weights_transposed", "the weights transposed before they meet v (wei.mT @ v)",
                   "out = wei @ v: row t of wei (query t) mixes the values of the keys."),
           dict(apply="wTv"))


def heads_layout_variants(d, inp, sz):
    """Heads split or merged in another layout, or attending across the heads (06)."""
    right = ("T", "nh", "hs")
    for merge in itertools.permutations(right):
        for split in itertools.permutations(right):
            if split == right and merge == right:
                continue
            if split == ("nh", "T", "hs") and merge == right:
                continue  # the catalogue's heads_without_transpose
            if split == right and merge == ("nh", "T", "hs"):
                f = Finding("merge_without_transpose", "heads merged without transposing back",
                            f"(B, n_heads, T, head_size).reshape(B, T, -1) mixes time steps and heads: {MERGE_HINT}.")
            elif split == right:
                f = Finding("merge_order", f"heads merged as {ORDER_NAMES[merge]} before the reshape",
                            f"concatenate head by head: torch.cat(outs, dim=-1), or {MERGE_HINT}.")
            elif merge == right:
                f = Finding("split_order", f"heads split as {ORDER_NAMES[split]}", f"use {SPLIT_HINT}.")
            else:
                f = Finding("split_merge_order",
                            f"heads split as {ORDER_NAMES[split]} and merged as {ORDER_NAMES[merge]}",
                            f"split with {SPLIT_HINT}; to merge, {MERGE_HINT}.")
            yield f, dict(split=split, merge=merge)
    for merge in (("T", "nh", "hs"), ("nh", "T", "hs")):
        yield (Finding("heads_over_time", "attention across the heads instead of across time",
                       "after view(B, T, n_heads, head_size), transpose(1, 2) so the softmax runs over T."),
               dict(heads_over_time=True, merge=merge))
    for factor in (sz["head_size"] ** -0.5, (sz["n_heads"] * sz["head_size"]) ** -0.5):
        yield (Finding("heads_not_split", "q, k and v never split into heads: one attention over all "
                       "n_heads·head_size features",
                       f"split them with {SPLIT_HINT}, so that each head attends on its own."),
               dict(split=None, factor=factor))
    yield (Finding("residual_inside", "x added to the attention's output: a residual inside the module",
                   "return the projection alone; the residual connection (x + ...) belongs to the block "
                   "around the attention (notebook 07)."), dict(residual=True))


def _averaging_variants(use):
    yield (Finding("weights_transposed", "the averaging weights transposed (upper-triangular)",
                   f"row t of the weights averages tokens 0..t: {use}."), dict(weights="transposed"))
    yield (Finding("normalised_columns", "the weights' columns normalised instead of their rows",
                   "divide each row by its own sum: wei.sum(1, keepdim=True)."), dict(weights="columns"))
    yield (Finding("missing_keepdim", "row sums divided without keepdim=True",
                   "tril.sum(1) has shape (T,) and divides column j by row j's sum; "
                   "use tril.sum(1, keepdim=True), shape (T, 1)."), dict(weights="keepdim"))
    yield (Finding("zero_fill", "a softmax of the 0/1 tril pattern",
                   "the zeros above the diagonal still get weight exp(0) = 1: fill them with "
                   "-inf before the softmax, or divide tril(ones) by its row sums."), dict(weights="softmax"))


def running_weights_variants(d, inp, sz):
    """02's averaging weights built wrong."""
    yield from _averaging_variants("torch.tril, each row divided by its own sum")


def bag_variants(d, inp, sz):
    """01's and 02's averages: the weights built wrong, or the average along another dim."""
    yield from _averaging_variants("wei @ x with wei = torch.tril(...) normalised by rows")
    yield (Finding("batch_flattened", "the batch flattened into one long sequence",
                   "each sequence is averaged on its own: a (T, T) weight matrix times the "
                   "(B, T, C) batch, no reshape."), dict(along="flat"))
    yield (Finding("mean_over_channels", "the mean taken over the channels too: one number per token",
                   "average over the tokens only, keeping the C channels apart: .mean(0) of the slice "
                   "x[b, :t+1] (a .mean() with no dim averages everything)."), dict(along="all"))
    yield (Finding("carried_across_batch", "state carried from one sequence into the next",
                   "start each sequence's running sum (and count) afresh, inside the loop over the batch."),
           dict(along="carried"))
    for along, name in ((0, "B"), (2, "C")):
        yield (Finding("wrong_dim", f"the running mean taken along {name} instead of T",
                       f"average over the tokens (dim 1, T) of each sequence, not over {name}."),
               dict(along=along))
        yield (Finding("wrong_dim", f"a mean over {name} instead of a running mean over T",
                       "token t averages tokens 0..t of its own sequence, along T."),
               dict(along=f"mean {along}"))


def fill_variants(d, inp, sz):
    yield (Finding("zero_fill", "masked scores set to 0 instead of -inf",
                   "a score of 0 still gets weight exp(0) after the softmax; fill with float('-inf') "
                   "(torch.tril on the scores does the same harm)."), dict(fill=0.0))


def _variants(hooks, inp, sz):
    for family in hooks.variants:
        yield from family(hooks, inp, sz)
