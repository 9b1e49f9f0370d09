"""Known wrong answers, each written out so a check can recognise it.

When a student's answer fails a check, the checker runs every variant below on the same
inputs; if one reproduces the student's output (or raises the same error), its name
and hint are shown. Each variant takes the same arguments as the matching function in
``grader.reference``. The numbers in the comments refer to the list of misconceptions
at the end of the curriculum.
"""
from dataclasses import dataclass
from typing import Callable

import torch

from grader import reference as ref


@dataclass(frozen=True)
class Mistake:
    key: str
    name: str
    hint: str
    fn: Callable


# --- names and hints shared by several exercises ------------------------------------

WRONG_DIM = "softmax over the wrong dimension"
WRONG_DIM_HINT = "use dim=-1: each row (one query) must be a distribution over the keys."
OVER_BATCH = "softmax over the batch dimension"
OVER_BATCH_HINT = "dim=0 mixes different sequences; use dim=-1."
MASK_AFTER_SOFTMAX = "mask applied after the softmax"
MASK_AFTER_SOFTMAX_HINT = ("fill the scores with -inf before the softmax; zeroing probabilities "
                           "afterwards leaves rows that no longer sum to 1.")
MASK_FROM_VALUES = "mask built from the score values"
MASK_FROM_VALUES_HINT = ("build the mask from positions, torch.ones(T, T, dtype=torch.bool).triu(1), "
                         "not from the scores: tril(scores) == 0 also hides every score that "
                         "happens to be 0.")
CAUSAL_INVERTED = "mask polarity inverted (the past hidden, the future visible)"
CAUSAL_INVERTED_HINT = ("hide the future: positions above the diagonal (triu(..., diagonal=1)), "
                        "keep tril.")
MASK_ON_CPU = "mask created on the CPU while the scores are on the GPU"
MISSING_SCALE = "no scale"
MISSING_SCALE_HINT = "multiply the scores by head_size ** -0.5 (head_size = q.shape[-1])."
MASK_NOT_SLICED = "mask sized for block_size, not sliced to T"
MASK_NOT_SLICED_HINT = "slice the buffer to the current length T, e.g. self.mask[:T, :T]."
DOT_T_BATCHED = ".T on a batched tensor"
DOT_T_BATCHED_HINT = "k.T reverses all three dims of (B, T, head_size); use k.transpose(-2, -1) or k.mT."


# --- one attention routine with every knob a learner can get wrong ------------------

def _attend(q, k, v, mask=None, *, dim=-1, scale="before", factor=None, mask_mode="fill",
            transpose="mT"):
    """softmax(q k^T * factor) v with the mistakes switchable; mask True = hidden."""
    head_size = q.shape[-1]
    factor = head_size**-0.5 if factor is None else factor
    kt = k.T if transpose == "T" else k.mT  # (8) .T reverses every dim
    wei = q @ kt  # (..., T, T)
    if scale == "before":
        wei = wei * factor
    if mask is not None and mask_mode == "fill":
        wei = wei.masked_fill(mask, float("-inf"))
    elif mask is not None and mask_mode == "inverted":
        wei = wei.masked_fill(~mask, float("-inf"))
    wei = torch.softmax(wei, dim=dim)
    if mask is not None and mask_mode == "after":
        wei = wei.masked_fill(mask, 0.0)  # (6) not renormalised
    if scale == "after":
        wei = wei * factor  # (2)
    return wei.nan_to_num(0.0) @ v


def _mask_from_values(wei):
    """(4) a mask read off the scores: every score that happens to be 0 is hidden too."""
    return torch.tril(wei) == 0


def _unsliced_mask(T, block_size, device):
    """(7) a (block_size, block_size) mask used as is for a sequence of length T < block_size."""
    tril = torch.tril(torch.ones(block_size, block_size, device=device))
    return tril == 0


def _cpu_mask(T, device):
    """(7) a mask built on the CPU while the scores live on the GPU."""
    return torch.ones(T, T, dtype=torch.bool).triu(1)


# --- 01/02: averaging the past -------------------------------------------------------

def _bow_leaves_out_self(x):
    csum = x.cumsum(1) - x  # (B, T, C) sum of tokens 0..t-1
    counts = torch.arange(x.shape[1], dtype=x.dtype, device=x.device).view(1, -1, 1)
    return csum / counts  # token 0 divides 0 by 0


def _bow_future(x):
    return ref.bag_of_words(x.flip(1)).flip(1)


BAG_OF_WORDS = (
    Mistake("leaves_out_self", "token t left out of its own average",
            "average x[b, :t+1] (tokens 0..t inclusive), not x[b, :t].", _bow_leaves_out_self),
    Mistake("running_sum", "running sum instead of running mean",
            "divide the sum of tokens 0..t by their count t+1 (or use .mean(0)).",
            lambda x: x.cumsum(1)),
    Mistake("whole_sequence", "every token averages the whole sequence, future included",
            "token t may only see tokens 0..t: slice x[b, :t+1].",
            lambda x: x.mean(1, keepdim=True).expand_as(x)),
    Mistake("averages_future", "tokens average the future instead of the past",
            "slice x[b, :t+1] (up to t), not x[b, t:] (from t on).", _bow_future),
)


def _weights_columns(T):
    wei = torch.tril(torch.ones(T, T, dtype=torch.float64))
    return wei / wei.sum(0, keepdim=True)


def _weights_upper(T):
    wei = torch.triu(torch.ones(T, T, dtype=torch.float64))
    return wei / wei.sum(1, keepdim=True)


RUNNING_AVERAGE_WEIGHTS = (
    Mistake("normalised_columns", "columns normalised instead of rows",
            "divide each row by its own sum: wei.sum(1, keepdim=True) (row t averages tokens 0..t).",
            _weights_columns),
    Mistake("upper_triangular", "upper-triangular matrix (inverted mask)",
            "use torch.tril, not torch.triu: row t must weight the past, not the future.",
            _weights_upper),
    Mistake("not_normalised", "tril of ones, not normalised",
            "torch.tril(torch.ones(T, T)) gives running sums; divide each row by its sum.",
            lambda T: torch.tril(torch.ones(T, T, dtype=torch.float64))),
    Mistake("uniform", "uniform weights 1/T everywhere",
            "the weights must be lower-triangular: zero for the future.",
            lambda T: torch.full((T, T), 1.0 / T, dtype=torch.float64)),
)


# --- 03: masked softmax --------------------------------------------------------------

def _softmax(scores, mask, *, dim=-1, mask_mode="fill", fill=float("-inf"), zero_empty=True):
    wei = scores
    if mask_mode == "fill":
        wei = wei.masked_fill(mask, fill)
    elif mask_mode == "inverted":
        wei = wei.masked_fill(~mask, fill)
    wei = torch.softmax(wei, dim=dim)
    if mask_mode == "after":
        wei = wei.masked_fill(mask, 0.0)
    return wei.nan_to_num(0.0) if zero_empty else wei


MASKED_SOFTMAX = (
    Mistake("softmax_wrong_dim", WRONG_DIM, WRONG_DIM_HINT,
            lambda scores, mask: _softmax(scores, mask, dim=-2)),
    Mistake("softmax_over_batch", OVER_BATCH, OVER_BATCH_HINT,
            lambda scores, mask: _softmax(scores, mask, dim=0)),
    Mistake("inverted_mask", "mask polarity inverted",
            "here True means 'hidden': fill where mask is True (masked_fill(mask, -inf)), not ~mask.",
            lambda scores, mask: _softmax(scores, mask, mask_mode="inverted")),
    Mistake("mask_after_softmax", MASK_AFTER_SOFTMAX, MASK_AFTER_SOFTMAX_HINT,
            lambda scores, mask: _softmax(scores, mask, mask_mode="after")),
    Mistake("mask_ignored", "mask ignored",
            "fill the masked scores with -inf before the softmax.",
            lambda scores, mask: _softmax(scores, mask, mask_mode="none")),
    Mistake("nan_fully_masked", "fully masked row left as NaN",
            "with -inf everywhere a row's softmax is 0/0 = NaN; set such rows to 0 "
            "(e.g. .nan_to_num(0.0) or masked_fill on rows where mask.all(-1)).",
            lambda scores, mask: _softmax(scores, mask, zero_empty=False)),
    Mistake("finite_fill", "finite fill value (like -1e9) instead of -inf",
            "a finite fill turns a fully masked row into a uniform one; use float('-inf') "
            "and set empty rows to 0.",
            lambda scores, mask: _softmax(scores, mask, fill=-1e9)),
)


def _causal(scores, **kw):
    return _softmax(scores, ref.causal_mask(scores.shape[-1], scores.device), **kw)


CAUSAL_WEIGHTS = (
    Mistake("softmax_wrong_dim", WRONG_DIM, WRONG_DIM_HINT,
            lambda scores: _causal(scores, dim=-2)),
    Mistake("softmax_over_batch", OVER_BATCH, OVER_BATCH_HINT,
            lambda scores: _causal(scores, dim=0)),
    Mistake("mask_from_values", MASK_FROM_VALUES, MASK_FROM_VALUES_HINT,
            lambda scores: _softmax(scores, _mask_from_values(scores))),
    Mistake("inverted_mask", CAUSAL_INVERTED, CAUSAL_INVERTED_HINT,
            lambda scores: _causal(scores, mask_mode="inverted")),
    Mistake("diagonal_masked", "the diagonal is masked too",
            "a token may attend to itself: hide only positions strictly above the diagonal.",
            lambda scores: _softmax(scores, torch.ones_like(scores, dtype=torch.bool).triu(0))),
    Mistake("mask_after_softmax", MASK_AFTER_SOFTMAX, MASK_AFTER_SOFTMAX_HINT,
            lambda scores: _causal(scores, mask_mode="after")),
    Mistake("mask_ignored", "no causal mask", "hide the future before the softmax.",
            lambda scores: torch.softmax(scores, dim=-1)),
    Mistake("mask_wrong_device", MASK_ON_CPU, "create the mask with device=scores.device.",
            lambda scores: _softmax(scores, _cpu_mask(scores.shape[-1], scores.device))),
)


# --- 04: one head (no scale yet) -----------------------------------------------------

def _head(x, w_query, w_key, w_value, causal=True, block_size=None, *, values="v",
          swap=False, mask="causal", **attend):
    q, k, v = x @ w_query.mT, x @ w_key.mT, x @ w_value.mT  # (B, T, head_size)
    if swap:
        q, k = k, q
    T = x.shape[1]
    m = None
    if causal and mask == "causal":
        m = ref.causal_mask(T, x.device)
    elif causal and mask == "values":
        m = _mask_from_values(q @ k.mT)
    elif causal and mask == "unsliced":
        m = _unsliced_mask(T, block_size, x.device)
    elif causal and mask == "cpu":
        m = _cpu_mask(T, x.device)
    attend.setdefault("factor", 1.0)
    return _attend(q, k, v if values == "v" else x, m, **attend)


HEAD = (
    Mistake("softmax_wrong_dim", WRONG_DIM, WRONG_DIM_HINT,
            lambda *a: _head(*a, dim=-2)),
    Mistake("softmax_over_batch", OVER_BATCH, OVER_BATCH_HINT,
            lambda *a: _head(*a, dim=0)),
    Mistake("aggregates_x", "weights applied to x instead of v",
            "aggregate the values: out = wei @ v, where v = self.value(x).",
            lambda *a: _head(*a, values="x")),
    Mistake("queries_keys_swapped", "queries and keys swapped",
            "wei = q @ k.transpose(-2, -1): row t holds what query t finds in every key.",
            lambda *a: _head(*a, swap=True)),
    Mistake("mask_from_values", MASK_FROM_VALUES, MASK_FROM_VALUES_HINT,
            lambda *a: _head(*a, mask="values")),
    Mistake("inverted_mask", CAUSAL_INVERTED, CAUSAL_INVERTED_HINT,
            lambda *a: _head(*a, mask_mode="inverted")),
    Mistake("mask_after_softmax", MASK_AFTER_SOFTMAX, MASK_AFTER_SOFTMAX_HINT,
            lambda *a: _head(*a, mask_mode="after")),
    Mistake("mask_ignored", "no causal mask (an encoder head)",
            "with causal=True, hide the future before the softmax.",
            lambda *a: _head(*a, mask="none")),
    Mistake("scaled", "scores scaled by head_size ** -0.5",
            "this notebook's head has no scale yet: that is the subject of notebook 05.",
            lambda x, *a: _head(x, *a, factor=a[0].shape[0] ** -0.5)),
    Mistake("mask_not_sliced", MASK_NOT_SLICED, MASK_NOT_SLICED_HINT,
            lambda *a: _head(*a, mask="unsliced")),
    Mistake("dot_T_batched", DOT_T_BATCHED, DOT_T_BATCHED_HINT,
            lambda *a: _head(*a, transpose="T")),
    Mistake("mask_wrong_device", MASK_ON_CPU,
            "create the mask with device=x.device, or register it as a buffer.",
            lambda *a: _head(*a, mask="cpu")),
)


# --- 05: scaled dot-product attention ------------------------------------------------

def _sdpa(q, k, v, mask=None, **attend):
    return _attend(q, k, v, mask, **attend)


SCALED_DOT_PRODUCT_ATTENTION = (
    Mistake("softmax_wrong_dim", WRONG_DIM, WRONG_DIM_HINT,
            lambda *a: _sdpa(*a, dim=-2)),
    Mistake("softmax_over_batch", OVER_BATCH, OVER_BATCH_HINT,
            lambda *a: _sdpa(*a, dim=0)),
    Mistake("scale_after_softmax", "scale applied to the probabilities after the softmax",
            "scale the scores before masking and softmax: softmax(q @ k^T * head_size**-0.5).",
            lambda *a: _sdpa(*a, scale="after")),
    Mistake("missing_scale", MISSING_SCALE, MISSING_SCALE_HINT,
            lambda *a: _sdpa(*a, scale=None)),
    Mistake("multiplied_by_sqrt", "multiplied by sqrt(head_size) instead of dividing",
            "divide by sqrt(head_size): scores * head_size ** -0.5.",
            lambda q, *a: _sdpa(q, *a, factor=q.shape[-1] ** 0.5)),
    Mistake("divided_by_head_size", "divided by head_size instead of its square root",
            "the variance of q . k grows like head_size, so its spread like sqrt(head_size): "
            "divide by head_size ** 0.5.",
            lambda q, *a: _sdpa(q, *a, factor=q.shape[-1] ** -1.0)),
    Mistake("inverted_mask", "mask polarity inverted (torch's SDPA convention)",
            "in this course True means 'hidden' (masked_fill(mask, -inf)); "
            "F.scaled_dot_product_attention uses True for 'may attend'.",
            lambda *a: _sdpa(*a, mask_mode="inverted")),
    Mistake("mask_after_softmax", MASK_AFTER_SOFTMAX, MASK_AFTER_SOFTMAX_HINT,
            lambda *a: _sdpa(*a, mask_mode="after")),
    Mistake("mask_ignored", "mask ignored", "when mask is given, fill those scores with -inf.",
            lambda *a: _sdpa(*a, mask_mode="none")),
    Mistake("dot_T_batched", DOT_T_BATCHED, DOT_T_BATCHED_HINT,
            lambda *a: _sdpa(*a, transpose="T")),
)


# --- 06: multi-head attention --------------------------------------------------------

def _mha(x, w_query, w_key, w_value, w_proj, b_proj, causal=True, block_size=None, *,
         layout="heads", project=True, scale_by="head_size", **attend):
    B, T, C = x.shape
    n_heads, head_size, _ = w_query.shape
    q = x @ w_query.reshape(-1, C).mT  # (B, T, n_heads * head_size)
    k = x @ w_key.reshape(-1, C).mT
    v = x @ w_value.reshape(-1, C).mT
    if layout == "heads":
        split = lambda t: t.view(B, T, n_heads, head_size).transpose(1, 2)  # (B, nh, T, hs)
    elif layout == "no_transpose":
        split = lambda t: t.view(B, n_heads, T, head_size)  # (8) mixes heads and time
    else:  # one wide head
        split = lambda t: t.unsqueeze(1)  # (B, 1, T, n_heads * head_size)
    q, k, v = split(q), split(k), split(v)
    if scale_by == "C":
        attend["factor"] = C**-0.5
    m = None
    if causal:
        m = _unsliced_mask(T, block_size, x.device) if attend.pop("unsliced", False) \
            else ref.causal_mask(T, x.device)
    out = _attend(q, k, v, m, **attend)  # (B, nh, T, hs)
    out = out.transpose(1, 2).reshape(B, T, n_heads * head_size)
    return out @ w_proj.mT + b_proj if project else out


MULTI_HEAD_ATTENTION = (
    Mistake("heads_without_transpose", "heads split with view but no transpose",
            "q.view(B, T, n_heads, head_size).transpose(1, 2): view(B, n_heads, T, head_size) "
            "alone mixes time steps and heads.",
            lambda *a: _mha(*a, layout="no_transpose")),
    Mistake("one_wide_head", "one wide head instead of n_heads small ones",
            "split q, k, v into heads so each head has its own softmax.",
            lambda *a: _mha(*a, layout="wide")),
    Mistake("missing_projection", "output projection missing",
            "after concatenating the heads, apply self.proj (n_heads * head_size -> C).",
            lambda *a: _mha(*a, project=False)),
    Mistake("missing_scale", MISSING_SCALE, MISSING_SCALE_HINT, lambda *a: _mha(*a, scale=None)),
    Mistake("scale_by_C", "scores scaled by C ** -0.5 instead of head_size ** -0.5",
            "the dot products are over head_size numbers, so scale by head_size ** -0.5.",
            lambda *a: _mha(*a, scale_by="C")),
    Mistake("softmax_wrong_dim", WRONG_DIM, WRONG_DIM_HINT,
            lambda *a: _mha(*a, dim=-2)),
    Mistake("inverted_mask", CAUSAL_INVERTED, CAUSAL_INVERTED_HINT,
            lambda *a: _mha(*a, mask_mode="inverted")),
    Mistake("mask_ignored", "no causal mask", "with causal=True, hide the future.",
            lambda *a: _mha(*a, mask_mode="none")),
    Mistake("mask_not_sliced", MASK_NOT_SLICED, MASK_NOT_SLICED_HINT,
            lambda *a: _mha(*a, unsliced=True)),
)
