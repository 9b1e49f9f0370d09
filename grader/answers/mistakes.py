"""Known wrong answers, each written out so a check can recognise it.

When a student's answer fails a check, the checker runs every variant below on the same
inputs; if one reproduces the student's output (or raises the same error), its name
and hint are shown. Each variant takes the same arguments as the matching function in
``grader.answers.reference``. The numbers in the comments refer to the list of misconceptions
at the end of the curriculum.
"""
import functools

import torch

from grader.answers import reference as ref
from grader.checks.registry import Mistake


# --- names and hints shared by several exercises ------------------------------------

WRONG_DIM = "softmax over the wrong dimension"
WRONG_DIM_HINT = "use dim=-1: each row (one query) must be a distribution over the keys."
OVER_BATCH = "softmax over the batch dimension"
OVER_BATCH_HINT = "dim=0 mixes different sequences; use dim=-1."
MASK_AFTER_SOFTMAX = "mask applied after the softmax"
MASK_AFTER_SOFTMAX_HINT = ("fill the scores with -inf before the softmax; zeroing probabilities "
                           "afterwards leaves rows that no longer sum to 1.")
MASK_FROM_VALUES = "mask built from the score values"
MASK_FROM_VALUES_HINT = ("build the mask from positions (True above the diagonal of a T x T matrix), "
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


DOUBLE_SOFTMAX = "the softmax applied twice"
DOUBLE_SOFTMAX_HINT = ("one softmax turns scores into weights; a second treats those weights as scores: the "
                       "masked positions (weight 0) get exp(0) = 1 again and every row flattens out.")


def _named(catalogue, key):
    """The mistake of a catalogue with this key (its name and hint are shared with another)."""
    return next(m for m in catalogue if m.key == key)


# --- one attention routine with every knob a learner can get wrong ------------------

def _attend(q, k, v, mask=None, *, dim=-1, scale="before", factor=None, mask_mode="fill",
            transpose="mT", twice=False):
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
    if twice:  # the weights taken for scores: the masked zeros get exp(0) again
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


def _bow_halved(x):
    """out[t] = (out[t-1] + x[t]) / 2: each new token weighs 1/2, the oldest ever less."""
    out = [x[:, 0]]
    for t in range(1, x.shape[1]):
        out.append((out[-1] + x[:, t]) / 2)
    return torch.stack(out, 1)  # (B, T, C)


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
    Mistake("halved_update", "each step halves: out[t] = (out[t-1] + x[t]) / 2",
            "that weighs the newest token 1/2 and the first ones almost nothing; the mean of tokens "
            "0..t weighs each 1/(t+1): out[t-1] + (x[t] - out[t-1]) / (t + 1), or the mean of x[b, :t+1].",
            _bow_halved),
)


BAG_OF_WORDS_MATMUL = (  # the same mistakes, said for weights built with tril and one matmul
    Mistake("leaves_out_self", "the diagonal left out of the weights: token t not in its own average",
            "tril(..., diagonal=-1) drops the diagonal; keep tril's default diagonal=0, so row t "
            "weights tokens 0..t.", _bow_leaves_out_self),
    Mistake("running_sum", "running sums: the tril of ones never divided by its row sums",
            "divide each row of the lower triangle by its own sum (keepdim=True), so row t holds "
            "1/(t+1).", lambda x: x.cumsum(1)),
    Mistake("whole_sequence", "weights without the lower triangle: every token averages the whole "
            "sequence, future included",
            "keep only the lower triangle (torch.tril) before normalising: row t weights tokens 0..t.",
            lambda x: x.mean(1, keepdim=True).expand_as(x)),
    Mistake("averages_future", "the upper triangle: tokens average the future instead of the past",
            "torch.tril keeps the past (below the diagonal); torch.triu keeps the future.", _bow_future),
)


def _weights_columns(T):
    wei = torch.tril(torch.ones(T, T, dtype=torch.float64))
    return wei / wei.sum(0, keepdim=True)


def _weights_below_diagonal(T):
    """tril(..., diagonal=-1) normalised: row 0 has nothing left (0), row t averages 0..t-1."""
    wei = torch.tril(torch.ones(T, T, dtype=torch.float64), diagonal=-1)
    return wei / wei.sum(1, keepdim=True).clamp(min=1)


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
            "a lower triangle of ones gives running sums; divide each row by its own sum.",
            lambda T: torch.tril(torch.ones(T, T, dtype=torch.float64))),
    Mistake("uniform", "uniform weights 1/T everywhere",
            "the weights must be lower-triangular: zero for the future.",
            lambda T: torch.full((T, T), 1.0 / T, dtype=torch.float64)),
    Mistake("leaves_out_self", "the diagonal left out: row t averages tokens 0..t-1, row 0 nothing",
            "tril(..., diagonal=-1) drops the diagonal; keep tril's default diagonal=0, so token t is "
            "in its own average.", _weights_below_diagonal),
)


# --- 03: masked softmax --------------------------------------------------------------

def _softmax(scores, mask, *, dim=-1, mask_mode="fill", fill=float("-inf"), zero_empty=True, twice=False):
    wei = scores
    if mask_mode == "fill":
        wei = wei.masked_fill(mask, fill)
    elif mask_mode == "inverted":
        wei = wei.masked_fill(~mask, fill)
    wei = torch.softmax(wei, dim=dim)
    if twice:
        wei = torch.softmax(wei.nan_to_num(0.0), dim=dim)
    if mask_mode == "after":
        wei = wei.masked_fill(mask, 0.0)
    return wei.nan_to_num(0.0) if zero_empty else wei


MASKED_SOFTMAX = (
    Mistake("double_softmax", DOUBLE_SOFTMAX, DOUBLE_SOFTMAX_HINT,
            lambda scores, mask: _softmax(scores, mask, twice=True)),
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
            "(replace the NaNs, or fill the rows where mask.all(-1)).",
            lambda scores, mask: _softmax(scores, mask, zero_empty=False)),
    Mistake("finite_fill", "finite fill value (like -1e9) instead of -inf",
            "a finite fill turns a fully masked row into a uniform one; use float('-inf') "
            "and set empty rows to 0.",
            lambda scores, mask: _softmax(scores, mask, fill=-1e9)),
)


def _causal(scores, **kw):
    return _softmax(scores, ref.causal_mask(scores.shape[-1], scores.device), **kw)


CAUSAL_WEIGHTS = (
    Mistake("double_softmax", DOUBLE_SOFTMAX, DOUBLE_SOFTMAX_HINT, lambda scores: _causal(scores, twice=True)),
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
    Mistake("past_hidden", "the past hidden instead of the future (the diagonal kept visible)",
            "True marks what a token may not see, the columns after its own: above the diagonal, "
            "triu(..., diagonal=1), not below it.",
            lambda scores: _softmax(scores, torch.ones_like(scores, dtype=torch.bool).tril(-1))),
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
    return _attend(q, k, {"v": v, "x": x, "q": q, "k": k}[values], m, **attend)


HEAD = (
    Mistake("double_softmax", DOUBLE_SOFTMAX, DOUBLE_SOFTMAX_HINT, lambda *a: _head(*a, twice=True)),
    Mistake("softmax_wrong_dim", WRONG_DIM, WRONG_DIM_HINT,
            lambda *a: _head(*a, dim=-2)),
    Mistake("softmax_over_batch", OVER_BATCH, OVER_BATCH_HINT,
            lambda *a: _head(*a, dim=0)),
    Mistake("aggregates_x", "weights applied to x instead of v",
            "the weights mix the values, self.value(x), not x itself.",
            lambda *a: _head(*a, values="x")),
    Mistake("aggregates_queries", "weights applied to the queries instead of the values",
            "the weights mix the values: weights @ v, with v = self.value(x).",
            lambda *a: _head(*a, values="q")),
    Mistake("aggregates_keys", "weights applied to the keys instead of the values",
            "the weights mix the values: weights @ v, with v = self.value(x).",
            lambda *a: _head(*a, values="k")),
    Mistake("queries_keys_swapped", "queries and keys swapped",
            "the scores are the queries times the keys (transposed), not the other way round: "
            "row t holds what query t finds in every key.",
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
    Mistake("double_softmax", DOUBLE_SOFTMAX, DOUBLE_SOFTMAX_HINT, lambda *a: _attend(*a, twice=True)),
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
    Mistake("aggregates_keys", "weights applied to the keys instead of the values",
            "the weights mix the values: weights @ v.",
            lambda q, k, v, *a: _sdpa(q, k, k, *a)),
)


# --- 06: multi-head attention --------------------------------------------------------

def _mha(x, w_query, w_key, w_value, w_proj, b_proj, causal=True, block_size=None, *,
         layout="heads", project=True, scale_by="head_size", bias_times=1, **attend):
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
    return out @ w_proj.mT + bias_times * b_proj if project else out


MULTI_HEAD_ATTENTION = (
    Mistake("double_softmax", DOUBLE_SOFTMAX, DOUBLE_SOFTMAX_HINT, lambda *a: _mha(*a, twice=True)),
    Mistake("heads_without_transpose", "heads split with view but no transpose",
            "view as (B, T, n_heads, head_size), then swap T and n_heads: view(B, n_heads, T, head_size) "
            "alone mixes time steps and heads.",
            lambda *a: _mha(*a, layout="no_transpose")),
    Mistake("one_wide_head", "one wide head instead of n_heads small ones",
            "split q, k, v into heads so each head has its own softmax.",
            lambda *a: _mha(*a, layout="wide")),
    Mistake("missing_projection", "output projection missing",
            "after concatenating the heads, apply self.proj (n_heads * head_size -> C).",
            lambda *a: _mha(*a, project=False)),
    Mistake("bias_per_head", "proj's bias added once per head",
            "summing each head's share of proj adds the bias n_heads times: concatenate the heads "
            "(torch.cat(..., dim=-1)) and apply self.proj once.",
            lambda *a: _mha(*a, bias_times=a[1].shape[0])),
    Mistake("missing_scale", MISSING_SCALE, MISSING_SCALE_HINT, lambda *a: _mha(*a, scale=None)),
    Mistake("scale_by_C", "scores scaled by C ** -0.5 instead of head_size ** -0.5",
            "the dot products are over head_size numbers, so scale by head_size ** -0.5.",
            lambda *a: _mha(*a, scale_by="C")),
    Mistake("softmax_wrong_dim", WRONG_DIM, WRONG_DIM_HINT,
            lambda *a: _mha(*a, dim=-2)),
    Mistake("softmax_over_heads", "softmax over the heads' dim (dim=1) of the (B, n_heads, T, T) scores",
            "each query's scores run along the last dim: softmax(dim=-1), whatever dims come before.",
            lambda *a: _mha(*a, dim=1)),
    Mistake("inverted_mask", CAUSAL_INVERTED, CAUSAL_INVERTED_HINT,
            lambda *a: _mha(*a, mask_mode="inverted")),
    Mistake("mask_ignored", "no causal mask", "with causal=True, hide the future.",
            lambda *a: _mha(*a, mask_mode="none")),
    Mistake("mask_not_sliced", MASK_NOT_SLICED, MASK_NOT_SLICED_HINT,
            lambda *a: _mha(*a, unsliced=True)),
)


# --- 07: the transformer block -------------------------------------------------------

def _block(x, ln1_w, ln1_b, w_query, w_key, w_value, w_proj, b_proj, ln2_w, ln2_b,
           w_fc, b_fc, w_out, b_out, n_heads, block_size=None, dropout=0.0, *, layout):
    ln1 = lambda t: ref.layer_norm(t, ln1_w, ln1_b)
    ln2 = lambda t: ref.layer_norm(t, ln2_w, ln2_b)
    attn = lambda t: ref.causal_self_attention(t, w_query, w_key, w_value, w_proj, b_proj, n_heads)
    mlp = lambda t: ref.mlp(t, w_fc, b_fc, w_out, b_out)
    if layout == "post_norm":  # (12) the original transformer's order
        x = ln1(x + attn(x))
        return ln2(x + mlp(x))
    if layout == "residual_after_norm":  # the residual stream carries the normalised x
        h = ln1(x)
        x = h + attn(h)
        h = ln2(x)
        return h + mlp(h)
    if layout == "no_residual":
        return mlp(ln2(attn(ln1(x))))
    if layout == "norms_swapped":
        x = x + attn(ln2(x))
        return x + mlp(ln1(x))
    if layout == "no_norm":
        x = x + attn(x)
        return x + mlp(x)
    if layout == "norm_after_branch":
        x = x + ln1(attn(x))
        return x + ln2(mlp(x))
    if layout == "parallel":  # the MLP reads the block's input, not the attention's output
        return x + attn(ln1(x)) + mlp(ln2(x))
    raise ValueError(layout)


def _block_parts(x, ln1_w, ln1_b, w_query, w_key, w_value, w_proj, b_proj, ln2_w, ln2_b,
                 w_fc, b_fc, w_out, b_out, n_heads, block_size=None, dropout=0.0, *,
                 attn_norm="ln1", mlp_norm="ln2", attn_res="x", mlp_res="x", order="attn_first",
                 final=None):
    """The pre-norm block with some parts changed: which norm feeds each branch ("ln1", "ln2",
    "none", "plain": no learned weights, "unbiased": a hand-made one with torch.std and the
    branch's own weights), what each residual adds the branch to ("x", "normed": the norm's
    output, "none"), the order of the branches, and a norm on the block's output."""
    lns = {"ln1": (ln1_w, ln1_b), "ln2": (ln2_w, ln2_b)}

    def norm(kind, t, own):
        if kind == "none":
            return t
        if kind == "plain":
            return torch.nn.functional.layer_norm(t, (t.shape[-1],), eps=1e-5)
        if kind == "unbiased":
            w, b = lns[own]
            return (t - t.mean(-1, keepdim=True)) / (t.std(-1, keepdim=True) + 1e-5) * w + b
        return ref.layer_norm(t, *lns[kind])

    branches = {"attn": (attn_norm, attn_res, "ln1", lambda t: ref.causal_self_attention(
                    t, w_query, w_key, w_value, w_proj, b_proj, n_heads)),
                "mlp": (mlp_norm, mlp_res, "ln2", lambda t: ref.mlp(t, w_fc, b_fc, w_out, b_out))}
    for name in (("attn", "mlp") if order == "attn_first" else ("mlp", "attn")):
        kind, res, own, branch = branches[name]
        h = norm(kind, x, own)
        x = {"x": x, "normed": h, "none": 0}[res] + branch(h)  # (B, T, C)
    return ref.layer_norm(x, ln2_w, ln2_b) if final == "ln2" else x


BLOCK = (
    Mistake("post_norm", "post-norm instead of pre-norm",
            "normalise the input of each branch, not the sum: the branch reads a normalised copy "
            "and its result is added to x itself, which stays unnormalised.", lambda *a: _block(*a, layout="post_norm")),
    Mistake("residual_after_norm", "residual added after the norm",
            "add the branch to the block's own x, not to ln1(x): keep x unnormalised on the "
            "residual path; only what goes into the branch is normalised.",
            lambda *a: _block(*a, layout="residual_after_norm")),
    Mistake("no_residual", "no residual connections",
            "each branch's result is added to the x it read (a residual connection); it does not replace x.",
            lambda *a: _block(*a, layout="no_residual")),
    Mistake("norms_swapped", "ln1 and ln2 swapped",
            "ln1 goes before the attention and ln2 before the MLP.",
            lambda *a: _block(*a, layout="norms_swapped")),
    Mistake("no_norm", "LayerNorms left out", "normalise the input of each branch with ln1 and ln2.",
            lambda *a: _block(*a, layout="no_norm")),
    Mistake("norm_after_branch", "the norm applied to the branch's output",
            "pre-norm normalises what goes into each branch, not what comes out of it.",
            lambda *a: _block(*a, layout="norm_after_branch")),
    Mistake("parallel_branches", "the MLP reads the block's input instead of the attention's output",
            "update x with the attention branch first, then feed that x to ln2 and the MLP.",
            lambda *a: _block(*a, layout="parallel")),
) + tuple(
    Mistake(key, name, hint, lambda *a, parts=parts: _block_parts(*a, **parts))
    for key, name, hint, parts in (
        ("no_attention_residual", "no residual around the attention",
         "add the attention branch's output to the block's input x (a residual); without it "
         "the input never reaches the output.", {"attn_res": "none"}),
        ("no_mlp_residual", "no residual around the MLP",
         "add the MLP branch's output to its input x (a residual), as for the attention.",
         {"mlp_res": "none"}),
        ("mlp_residual_after_norm", "the MLP's residual added to ln2(x) instead of x",
         "the residual path carries x unnormalised: the branch's output is added to x, not "
         "to the LayerNorm's output.", {"mlp_res": "normed"}),
        ("attention_residual_after_norm", "the attention's residual added to ln1(x) instead of x",
         "the residual path carries x unnormalised: the branch's output is added to x, not "
         "to the LayerNorm's output.", {"attn_res": "normed"}),
        ("mlp_norm_ln1", "ln1 used before the MLP as well",
         "each branch has its own LayerNorm: ln1 before the attention, ln2 before the MLP.", {"mlp_norm": "ln1"}),
        ("attention_norm_ln2", "ln2 used before the attention as well",
         "each branch has its own LayerNorm: ln1 before the attention, ln2 before the MLP.", {"attn_norm": "ln2"}),
        ("mlp_not_normalised", "the MLP's input not normalised",
         "pre-norm normalises the input of both branches: the MLP reads ln2 of x.", {"mlp_norm": "none"}),
        ("attention_not_normalised", "the attention's input not normalised",
         "pre-norm normalises the input of both branches: the attention reads ln1 of x.",
         {"attn_norm": "none"}),
        ("norm_without_weights", "LayerNorm without its learned weight and bias",
         "use the block's own layers, self.ln1 and self.ln2: a new nn.LayerNorm (or F.layer_norm "
         "without weight and bias) ignores the weights the model learns (and the check loads).",
         {"attn_norm": "plain", "mlp_norm": "plain"}),
        ("norm_unbiased", "a hand-made LayerNorm with the unbiased variance",
         "LayerNorm divides by the biased standard deviation, sqrt(var(unbiased=False) + eps); "
         "torch.std and torch.var default to the unbiased one (divided by C - 1). Simplest: "
         "call self.ln1 and self.ln2.", {"attn_norm": "unbiased", "mlp_norm": "unbiased"}),
        ("branches_swapped", "the MLP runs before the attention",
         "the attention comes first (tokens exchange information), then the MLP works on each "
         "token.", {"order": "mlp_first"}),
        ("extra_final_norm", "the block's output normalised",
         "return x after the second residual as it is: pre-norm normalises only what goes into "
         "each branch (the GPT's ln_f normalises once, after the last block).", {"final": "ln2"}),
    ))


# --- 07: the GPT's forward -----------------------------------------------------------

def _gpt(idx, tok, pos, *rest, layout):
    *layers, lnf_w, lnf_b, w_head, b_head, n_heads, block_size = rest
    B, T = idx.shape
    F = torch.nn.functional
    x = F.embedding(idx, tok)  # (B, T, C)
    if layout == "scaled_embeddings":
        x = x * tok.shape[1] ** 0.5
    positions = {"positions_from_ids": lambda: F.embedding(idx, pos),  # the table indexed by token ids
                 "positions_not_sliced": lambda: pos,  # (block_size, C): fails unless T == block_size
                 "positions_reversed": lambda: pos[:T].flip(0),
                 "positions_from_one": lambda: pos[1:T + 1],
                 "positions_per_sequence": lambda: pos[:B].unsqueeze(1),  # (B, 1, C): sequence b at b
                 "concatenated": lambda: None}
    if layout == "concatenated":  # (B, T, 2C): the first LayerNorm raises
        x = torch.cat([x, pos[:T].expand(B, T, -1)], dim=-1)
        return F.layer_norm(x, (tok.shape[1],), layers[0][0], layers[1][0], eps=1e-5)
    if layout in positions:
        x = x + positions[layout]()
    elif layout == "multiplied":
        x = x * pos[:T]
    elif layout not in ("positions_after_blocks", "no_positions"):
        x = x + pos[:T]
    if layout in ("final_norm_first", "final_norm_twice"):
        x = ref.layer_norm(x, lnf_w, lnf_b)
    blocks = list(zip(*layers)) if layout != "no_blocks" else []
    for weights in {"first_block_only": blocks[:1], "last_block_only": blocks[-1:]}.get(layout, blocks):
        x = ref.block(x, *weights, n_heads)
    if layout == "positions_after_blocks":
        x = x + pos[:T]
    if layout not in ("no_final_norm", "final_norm_first", "final_norm_after_head"):
        x = ref.layer_norm(x, lnf_w, lnf_b)
    if layout == "tied_head":  # logits from the token embedding table, lm_head unused
        return x @ tok.mT
    logits = x @ w_head.mT + b_head  # (B, T, vocab_size)
    if layout == "final_norm_after_head":  # a LayerNorm over C given vocab_size features raises
        return F.layer_norm(logits, (tok.shape[1],), lnf_w, lnf_b, eps=1e-5)
    return {"probabilities": lambda: torch.softmax(logits, dim=-1),
            "log_probabilities": lambda: torch.log_softmax(logits, dim=-1)}.get(layout, lambda: logits)()


_POSITIONS_HINT = ("token t sits at position t: add position_embedding of torch.arange(T) (0, 1, "
                   "..., T - 1, on idx's device) to every sequence's token embeddings.")

GPT = (
    Mistake("embeddings_multiplied", "token and position embeddings multiplied instead of added",
            "add them: x = token_embedding(idx) + position_embedding(positions); each token's vector "
            "then carries both what it is and where it is.", lambda *a: _gpt(*a, layout="multiplied")),
    Mistake("positions_after_attention", "positions added after attention",
            "add the position embeddings to the token embeddings before the first block: "
            "attention itself cannot tell positions apart.",
            lambda *a: _gpt(*a, layout="positions_after_blocks")),
    Mistake("no_positions", "no position embeddings",
            "add the embeddings of positions 0..T-1 to the token embeddings, before the blocks.",
            lambda *a: _gpt(*a, layout="no_positions")),
    Mistake("positions_from_ids", "position table indexed by the token ids",
            "look the position table up with the positions 0..T-1 (on idx's device), not with "
            "the token ids.", lambda *a: _gpt(*a, layout="positions_from_ids")),
    Mistake("positions_not_sliced", "the whole position table added, not its first T rows",
            "a sequence may be shorter than block_size: use positions 0..T-1 only.",
            lambda *a: _gpt(*a, layout="positions_not_sliced")),
    Mistake("positions_reversed", "positions counted backwards (T - 1 down to 0)", _POSITIONS_HINT,
            lambda *a: _gpt(*a, layout="positions_reversed")),
    Mistake("positions_from_one", "positions counted from 1 instead of 0", _POSITIONS_HINT,
            lambda *a: _gpt(*a, layout="positions_from_one")),
    Mistake("positions_per_sequence", "one position per sequence (numbered along the batch), not per token",
            "the positions number the tokens of a sequence, 0..T-1 along dim 1; every sequence of "
            "the batch uses the same T positions.", lambda *a: _gpt(*a, layout="positions_per_sequence")),
    Mistake("embeddings_concatenated", "token and position embeddings concatenated (2·C features)",
            "add them: both are (.., C), and their sum is the (B, T, C) the blocks expect.",
            lambda *a: _gpt(*a, layout="concatenated")),
    Mistake("scaled_embeddings", "token embeddings scaled by sqrt(C)",
            "this GPT adds the embeddings as they are; the sqrt(C) factor belongs to another model.",
            lambda *a: _gpt(*a, layout="scaled_embeddings")),
    Mistake("no_blocks", "the blocks left out",
            "run the embeddings through self.blocks before ln_f and lm_head: without them no "
            "token sees another.", lambda *a: _gpt(*a, layout="no_blocks")),
    Mistake("first_block_only", "only the first block runs",
            "every block runs, each on the previous one's output: self.blocks(x) runs them all.",
            lambda *a: _gpt(*a, layout="first_block_only")),
    Mistake("last_block_only", "the blocks not chained: only the last one's output is kept",
            "each block reads the previous block's output: in a loop, reassign x (x = block(x)), "
            "or call self.blocks(x), which chains them.", lambda *a: _gpt(*a, layout="last_block_only")),
    Mistake("no_final_norm", "final LayerNorm left out",
            "apply self.ln_f after the last block, before self.lm_head.",
            lambda *a: _gpt(*a, layout="no_final_norm")),
    Mistake("final_norm_first", "ln_f applied before the blocks instead of after",
            "ln_f normalises the last block's output, just before lm_head.",
            lambda *a: _gpt(*a, layout="final_norm_first")),
    Mistake("final_norm_twice", "ln_f applied before the blocks as well",
            "ln_f is used once, on the last block's output; the embeddings go into the first block as they are.",
            lambda *a: _gpt(*a, layout="final_norm_twice")),
    Mistake("final_norm_after_head", "ln_f applied to the logits",
            "ln_f normalises the last block's output (C features), before lm_head turns it into "
            "vocab_size logits.", lambda *a: _gpt(*a, layout="final_norm_after_head")),
    Mistake("tied_head", "logits from the token embedding table instead of lm_head",
            "the model has its own output layer: the logits are self.lm_head of the normalised "
            "output (the check loads its weights).", lambda *a: _gpt(*a, layout="tied_head")),
    Mistake("probabilities", "probabilities returned instead of logits",
            "forward returns the logits, unnormalised: the loss (F.cross_entropy) and generate "
            "apply the softmax themselves.", lambda *a: _gpt(*a, layout="probabilities")),
    Mistake("log_probabilities", "log-probabilities returned instead of logits",
            "forward returns lm_head's output as it is: F.cross_entropy applies log_softmax itself.",
            lambda *a: _gpt(*a, layout="log_probabilities")),
)


# --- 07: generate --------------------------------------------------------------------

def _generate(model, idx, max_new_tokens, block_size, temperature, seed, *, crop="end",
              position=-1, probs="softmax", pick="sample", dim=-1):
    from grader.checks.student_call import StandInLM

    lm = StandInLM(**model)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.tensor(idx, dtype=torch.long)  # (B, T)
    for _ in range(max_new_tokens):
        context = idx[:, -crop:] if isinstance(crop, int) else {  # crop: the length kept
            "end": idx[:, -block_size:], "none": idx, "start": idx[:, :block_size],
            "last": idx[:, -1:], "model": idx[:, -lm.block_size:]}[crop]
        logits = lm(context)[-1] if position == "batch" else lm(context)[:, position, :]  # (B, vocab_size)
        if probs == "softmax":
            p = torch.softmax(logits / temperature, dim=dim)
        elif probs == "twice":  # logits / temperature, then softmax(that / temperature)
            p = torch.softmax(logits / temperature**2, dim=dim)
        elif probs == "logits":  # (12) raises: negative "probabilities"
            p = logits / temperature
        elif probs == "after":  # torch.multinomial renormalises: the temperature vanishes
            p = torch.softmax(logits, dim=dim) / temperature
        elif probs == "multiplied":
            p = torch.softmax(logits * temperature, dim=dim)
        if pick == "at_once":  # every new token drawn from the prompt's next-token distribution
            return torch.cat([idx, torch.multinomial(p, max_new_tokens, replacement=True, generator=gen)], 1)
        if pick == "sample":
            nxt = torch.multinomial(p, num_samples=1, generator=gen)  # (B, 1)
        else:
            nxt = p.argmax(-1, keepdim=True)
        idx = torch.cat([idx, nxt], dim=1)
    return idx


GENERATE = (
    Mistake("new_tokens_only", "only the new tokens returned, without the prompt",
            "return the whole sequence, the prompt followed by the new tokens: keep appending to idx "
            "and return it.", lambda *a: _generate(*a)[:, len(a[1][0]):]),
    Mistake("context_not_cropped", "the context not cropped to block_size",
            "the model has positions for block_size tokens only: give it the last block_size tokens.",
            lambda *a: _generate(*a, crop="none")),
    Mistake("cropped_to_the_models_size", "the context cropped to the model's own block_size",
            "crop to the block_size argument generate is given, not to an attribute of the "
            "model: the caller decides how much context to use.",
            lambda *a: _generate(*a, crop="model")),
    Mistake("cropped_from_the_start", "the context cropped to its first block_size tokens",
            "keep the most recent block_size tokens, the end of idx, not its first ones.",
            lambda *a: _generate(*a, crop="start")),
    Mistake("last_token_only", "only the last token given to the model",
            "give the model the whole cropped context, up to block_size tokens; it predicts from all of it.",
            lambda *a: _generate(*a, crop="last")),
    Mistake("first_position", "the logits of the first position used",
            "the next token is predicted at the last position: keep the logits of the last position, not the first.",
            lambda *a: _generate(*a, position=0)),
    Mistake("sampled_from_logits", "sampling from the logits instead of the probabilities",
            "torch.multinomial needs non-negative weights: turn the tempered logits into "
            "probabilities with a softmax first.",
            lambda *a: _generate(*a, probs="logits")),
    Mistake("temperature_after_softmax", "temperature applied after the softmax (or not at all)",
            "divide the logits by the temperature before the softmax. Dividing the "
            "probabilities changes nothing, since torch.multinomial renormalises them.",
            lambda *a: _generate(*a, probs="after")),
    Mistake("temperature_twice", "the logits divided by the temperature twice",
            "divide the logits by the temperature once, then softmax: dividing again before the "
            "softmax sharpens (or flattens) the distribution a second time.",
            lambda *a: _generate(*a, probs="twice")),
    Mistake("sampled_at_once", "every new token sampled at once from the prompt's prediction",
            "generate one token per step: predict from the context, sample one token, append it, "
            "and predict the next one from the context that now ends with it.",
            lambda *a: _generate(*a, pick="at_once")),
    Mistake("temperature_multiplied", "logits multiplied by the temperature",
            "divide by the temperature: a high temperature must flatten the distribution.",
            lambda *a: _generate(*a, probs="multiplied")),
    Mistake("greedy", "the most likely token taken instead of a sample",
            "draw one id per sequence from the probabilities with torch.multinomial, passing "
            "the generator on, instead of taking the most likely one.",
            lambda *a: _generate(*a, pick="argmax")),
    Mistake("softmax_wrong_dim", "softmax over the batch instead of the vocabulary",
            "the logits of the last position are (B, vocab_size): softmax over dim=-1.",
            lambda *a: _generate(*a, dim=0)),
)


# --- 08: online softmax --------------------------------------------------------------

def _online(scores, *, start=float("-inf"), rescale="right", guard=True, shift=True, dim=-1, term="new"):
    x = scores.movedim(dim, -1)  # (..., N)
    m = torch.full(x.shape[:-1], start, dtype=x.dtype, device=x.device)  # running max
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)  # running sum
    for j in range(x.shape[-1]):
        xj = x[..., j]
        if not shift:  # no maximum at all: exp overflows
            l = l + torch.exp(xj)
            continue
        m_new = torch.maximum(m, xj)
        ref_m = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new) if guard else m_new
        if rescale == "right":
            alpha = torch.exp(m - ref_m)
        elif rescale == "inverted":
            alpha = torch.exp(ref_m - m)
        elif rescale == "inverted_guarded":  # the old maximum guarded too: -inf read as 0
            alpha = torch.exp(ref_m - torch.where(m == float("-inf"), torch.zeros_like(m), m))
        else:
            alpha = torch.ones_like(l)
        if term == "old":  # the new score measured against the maximum before it
            ref_m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
        l = l * alpha + torch.exp(xj - ref_m)
        m = m_new
    out = torch.exp(x) / l.unsqueeze(-1) if not shift else torch.exp(x - m.unsqueeze(-1)) / l.unsqueeze(-1)
    return out.movedim(-1, dim)


ONLINE_SOFTMAX = (
    Mistake("sum_not_rescaled", "the running sum not rescaled when the maximum changes",
            "when the maximum grows from m to m_new, the terms already summed were exp(x - m): "
            "multiply the sum by exp(m - m_new) before adding exp(x_j - m_new).",
            lambda scores: _online(scores, rescale="none")),
    Mistake("rescale_inverted", "rescaled by exp(m_new - m) instead of exp(m - m_new)",
            "the old terms shrink when the maximum grows: l = l * exp(m - m_new) + exp(x_j - m_new).",
            lambda scores: _online(scores, rescale="inverted")),
    Mistake("rescale_inverted_guarded", "rescaled by exp(m_new - m) instead of exp(m - m_new)",
            "the old terms shrink when the maximum grows: l = l * exp(m - m_new) + exp(x_j - m_new) "
            "(a sum multiplied by exp(m_new - m) grows instead, and overflows on large scores).",
            lambda scores: _online(scores, rescale="inverted_guarded")),
    Mistake("max_started_at_zero", "the running maximum started at 0",
            "start it at -inf: with 0, a row whose scores are all far below 0 underflows to "
            "exp(-1000) = 0 everywhere and divides 0 by 0.",
            lambda scores: _online(scores, start=0.0)),
    Mistake("no_max_subtracted", "exp of the raw scores, no maximum subtracted",
            "exp(1000) overflows: keep a running maximum m and sum exp(x_j - m).",
            lambda scores: _online(scores, shift=False)),
    Mistake("masked_prefix_nan", "scores of -inf at the start of a row give NaN",
            "while the maximum is still -inf, exp(m - m_new) and exp(x_j - m_new) are exp(-inf + inf) = NaN: "
            "subtract 0 instead of m_new where m_new is -inf (torch.where).",
            lambda scores: _online(scores, guard=False)),
    Mistake("softmax_wrong_dim", _named(MASKED_SOFTMAX, "softmax_wrong_dim").name, _named(MASKED_SOFTMAX, "softmax_wrong_dim").hint,
            lambda scores: _online(scores, dim=-2)),
    Mistake("streams_wrong_dim", "the loop streams over dim 0 (the batch) instead of a row's scores",
            "a row is the N scores of one (b, t), along the last dim: the loop runs over the last dim "
            "(its size is scores.shape[-1]), one score of every row at a time.", lambda scores: _online(scores, dim=0)),
    Mistake("term_old_max", "the new score's term measured against the old maximum",
            "add exp(x_j - m_new), with the maximum after this score, to the rescaled sum: against the old "
            "maximum the term is too large whenever x_j raises it.",
            lambda scores: _online(scores, term="old")),
)


# --- 08: tiled attention -------------------------------------------------------------

def _tiled(q, k, v, tile_size, *, skip_future=True, mask="global", tile_max=False,
           rescale_sum=True, rescale_out=True, normalise=True, scale=True, partial=True,
           start=float("-inf")):
    T, head_size = q.shape[-2], q.shape[-1]
    factor = head_size**-0.5 if scale is True else 1.0 if scale is False else scale
    out = torch.zeros_like(q)  # (B, n_heads, T, head_size)
    stop = T if partial else T - T % tile_size
    for i0 in range(0, stop, tile_size):
        i1 = min(i0 + tile_size, T)
        qi = q[..., i0:i1, :]  # (B, n_heads, tq, head_size)
        m = torch.full((*q.shape[:-2], i1 - i0, 1), start, dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(qi)
        for j0 in range(0, stop, tile_size):
            if skip_future and j0 >= (i0 if skip_future == "diagonal" else i1):
                break  # this tile and all after it lie in the future
            j1 = min(j0 + tile_size, T)
            s = qi @ k[..., j0:j1, :].mT * factor  # (B, n_heads, tq, tk)
            rows = torch.arange(i1 - i0, device=q.device).view(-1, 1)
            cols = torch.arange(j1 - j0, device=q.device).view(1, -1)
            if mask == "global":
                s = s.masked_fill(cols + j0 > rows + i0, float("-inf"))
            elif mask == "local":  # positions inside the tile, without the tiles' offsets
                s = s.masked_fill(cols > rows, float("-inf"))
            elif mask == "diagonal":  # >= for >: each query hides itself too
                s = s.masked_fill(cols + j0 >= rows + i0, float("-inf"))
            if tile_max:  # each tile with its own maximum, merged afterwards
                m_tile = s.amax(-1, keepdim=True)
                p = torch.exp(s - m_tile)
                m_new = torch.maximum(m, m_tile)
                a, b = torch.exp(m - m_new), torch.exp(m_tile - m_new)
                l = l * a + p.sum(-1, keepdim=True) * b
                acc = acc * a + (p @ v[..., j0:j1, :]) * b
            else:
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))
                alpha = torch.exp(m - m_new)
                p = torch.exp(s - m_new)
                l = (l * alpha if rescale_sum else l) + p.sum(-1, keepdim=True)
                acc = (acc / alpha if rescale_out == "inverted" else acc * alpha if rescale_out else acc) \
                    + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :] = acc / l if normalise else acc
    return out


TILED_ATTENTION = (
    Mistake("future_in_diagonal_tile", "tiles that let the future in",
            "skipping the tiles after the diagonal is not enough: inside the diagonal tile, hide "
            "the keys after each query (key position > query position, counted from 0 for the whole sequence).",
            lambda *a: _tiled(*a, mask="none")),
    Mistake("no_causal_mask", "no causal mask: every tile, future included",
            "a query at position t may only use keys 0..t: skip the tiles after it and mask the diagonal tile.",
            lambda *a: _tiled(*a, skip_future=False, mask="none")),
    Mistake("fully_masked_tile_nan", "a fully masked tile produces NaN",
            "a tile entirely in the future has maximum -inf and exp(-inf - (-inf)) = NaN: skip such "
            "tiles (they contribute nothing), or guard rows whose maximum is still -inf.",
            lambda *a: _tiled(*a, skip_future=False, tile_max=True)),
    Mistake("diagonal_hidden", "the causal mask hides the diagonal too (>= for >)",
            "a query may see its own key: hide key positions greater than the query's, not "
            "greater or equal (query 0 would see nothing at all).",
            lambda *a: _tiled(*a, mask="diagonal")),
    Mistake("max_started_at_zero", _named(ONLINE_SOFTMAX, "max_started_at_zero").name,
            "start m at -inf: with 0, a query whose scores are all far below 0 gets exp(s - 0) = 0 "
            "for every key and divides 0 by 0.", lambda *a: _tiled(*a, start=0.0)),
    Mistake("tile_local_mask", "the mask built from positions inside the tile",
            "compare whole-sequence positions, query i0 + r against key j0 + c: a key tile before the "
            "diagonal is entirely visible.", lambda *a: _tiled(*a, mask="local")),
    Mistake("sum_not_rescaled", _named(ONLINE_SOFTMAX, "sum_not_rescaled").name,
            "when a key tile raises the maximum, multiply the running sum l by exp(m - m_new).",
            lambda *a: _tiled(*a, rescale_sum=False)),
    Mistake("output_not_rescaled", "the running output not rescaled when the maximum changes",
            "the accumulated p @ v was computed with the old maximum: multiply it by exp(m - m_new) too.",
            lambda *a: _tiled(*a, rescale_out=False)),
    Mistake("output_rescale_inverted", "the running output divided by exp(m - m_new) instead of multiplied by it",
            "when the maximum grows, the old output shrinks: acc = acc * exp(m - m_new) + p @ v; dividing by a "
            "factor that is 0 at the first tile (m = -inf) gives 0 / 0.",
            lambda *a: _tiled(*a, rescale_out="inverted")),
    Mistake("nothing_rescaled", "neither the running sum nor the running output rescaled when the maximum changes",
            "when a key tile raises the maximum from m to m_new, what l and the output hold was computed "
            "against m: multiply both by exp(m - m_new) before adding the new tile.",
            lambda *a: _tiled(*a, rescale_sum=False, rescale_out=False)),
    Mistake("not_normalised", "the output never divided by the running sum",
            "after the last key tile, divide the accumulated output by l.",
            lambda *a: _tiled(*a, normalise=False)),
    Mistake("missing_scale", _named(SCALED_DOT_PRODUCT_ATTENTION, "missing_scale").name,
            "multiply each tile of scores by head_size ** -0.5.", lambda *a: _tiled(*a, scale=False)),
    Mistake("diagonal_tile_skipped", "the diagonal key tile skipped",
            "the key tile that holds the query tile's own positions must be visited too (with the causal "
            "mask): loop j0 while j0 < i1, the end of the query tile, not i0.",
            lambda *a: _tiled(*a, skip_future="diagonal")),
    Mistake("scale_by_tile_size", "scores scaled by tile_size ** -0.5",
            "the scale belongs to the dot products of length head_size: head_size ** -0.5, whatever the tile.",
            lambda *a: _tiled(*a, scale=a[3] ** -0.5)),
    Mistake("scale_not_sqrt", "scores divided by head_size instead of its square root",
            "multiply by head_size ** -0.5 (1 / sqrt(head_size)).", lambda *a: _tiled(*a, scale=1 / a[0].shape[-1])),
    Mistake("last_tile_dropped", "the last, shorter tile left out",
            "T need not be a multiple of tile_size: range(0, T, tile_size) with slices that stop at T.",
            lambda *a: _tiled(*a, partial=False)),
)


# --- 08: key/value cache -------------------------------------------------------------

def _cache(x, w_query, w_key, w_value, w_proj, b_proj, n_heads, block_size, chunks, *,
           append="before", crop="after", keep="last", align="bottom_right", cat_dim=2, scale=True,
           merge="transpose", split="transpose", dim=-1, keys_from="cache", values_from="cache",
           v_appends="v", offset=0, size=None):
    B = x.shape[0]
    size = block_size if size is None else size
    if split == "transpose":
        split = lambda t: t.view(B, t.shape[1], n_heads, -1).transpose(1, 2)  # (B, n_heads, n, head_size)
    else:  # viewed as (B, n_heads, n, head_size) straight away: tokens and heads mixed
        split = lambda t: t.reshape(B, n_heads, t.shape[1], -1)
    K = V = None
    outs, start = [], 0
    for n in chunks:
        xc = x[:, start:start + n]  # (B, n, C)
        start += n
        q, k, v = split(xc @ w_query.mT), split(xc @ w_key.mT), split(xc @ w_value.mT)
        if crop == "before" and K is not None:
            K, V = K[..., -size:, :], V[..., -size:, :]
        if K is None or append == "replace":
            K_new, V_new = k, v
        elif append == "front":  # the new entries first, the cache after them
            K_new, V_new = torch.cat([k, K], dim=cat_dim), torch.cat([v, V], dim=cat_dim)
        else:
            K_new = torch.cat([K, k], dim=cat_dim)
            V_new = torch.cat([V, v if v_appends == "v" else k], dim=cat_dim)
        if crop == "after":
            cut = slice(-size, None) if keep == "last" else slice(0, size)
            K_new, V_new = K_new[..., cut, :], V_new[..., cut, :]
        keys, vals = (K, V) if append == "after" and K is not None else (K_new, V_new)
        L = keys.shape[2]
        rows = torch.arange(n, device=x.device).view(-1, 1)
        cols = torch.arange(L, device=x.device).view(1, -1)
        hide = {"bottom_right": cols > rows + (L - n) + offset, "top_left": cols > rows,
                "none": torch.zeros(n, L, dtype=torch.bool, device=x.device)}[align]
        factor = q.shape[-1] ** -0.5 if scale is True else 1.0 if scale is False else scale
        wei = q @ (keys if keys_from == "cache" else k).mT * factor
        wei = torch.softmax(wei.masked_fill(hide, float("-inf")), dim=dim)
        out = wei @ (vals if values_from == "cache" else v)  # (B, n_heads, n, head_size)
        out = out.transpose(1, 2) if merge == "transpose" else out
        outs.append(out.reshape(B, n, -1) @ w_proj.mT + b_proj)
        K, V = K_new, V_new
    return torch.cat(outs, dim=1)  # (B, T, C)


CACHED_ATTENTION = (
    Mistake("appended_after_attention", "the cache appended after the attention step",
            "append the new keys and values first, then attend: the new token must see itself.",
            lambda *a: _cache(*a, append="after")),
    Mistake("cache_not_cropped", "the cache not cropped to block_size",
            "after appending, keep only the last block_size entries, the most recent ones.",
            lambda *a: _cache(*a, crop="none")),
    Mistake("cropped_before_append", "the cache cropped before appending (one entry too many)",
            "crop after appending, so that at most block_size keys are attended to.",
            lambda *a: _cache(*a, crop="before")),
    Mistake("kept_oldest", "the cache cropped to its oldest entries",
            "keep the most recent block_size entries, the end of the cache, not the first ones.",
            lambda *a: _cache(*a, keep="first")),
    Mistake("new_before_cache", "the new keys and values put in front of the cached ones",
            "torch.cat([cache, new], dim=2): the cache keeps time order, oldest first, so that the "
            "newest entries are the last ones (what the crop keeps and the mask's positions assume).",
            lambda *a: _cache(*a, append="front")),
    Mistake("cache_cat_dim", "the cache extended along the heads' dim (dim=1) instead of time",
            "the cache is (B, n_heads, T, head_size): concatenate the new keys and values along "
            "T, dim 2.", lambda *a: _cache(*a, cat_dim=1)),
    Mistake("missing_scale", _named(SCALED_DOT_PRODUCT_ATTENTION, "missing_scale").name,
            "multiply the scores by head_size ** -0.5, as without a cache.",
            lambda *a: _cache(*a, scale=False)),
    Mistake("scale_by_C", "scores scaled by C ** -0.5, the model's width",
            "each head's dot products have head_size terms: scale by head_size ** -0.5.",
            lambda *a: _cache(*a, scale=a[0].shape[-1] ** -0.5)),
    Mistake("scale_not_sqrt", "scores divided by head_size instead of its square root",
            "multiply by head_size ** -0.5 (1 / sqrt(head_size)).",
            lambda *a: _cache(*a, scale=a[6] / a[1].shape[0])),
    Mistake("merge_without_transpose", "heads merged without transposing back",
            "(B, n_heads, T_new, head_size).reshape(B, T_new, -1) mixes tokens and heads: "
            "transpose(1, 2) first, then reshape.", lambda *a: _cache(*a, merge="none")),
    Mistake("cache_replaced", "the cache replaced instead of extended",
            "concatenate the new keys and values to the cached ones along T (dim=2).",
            lambda *a: _cache(*a, append="replace")),
    Mistake("top_left_mask", "the causal mask aligned to the first cached key",
            "with T_new queries and L cached keys, query i sits at position L - T_new + i: it may "
            "see keys 0..L - T_new + i. (F.scaled_dot_product_attention's is_causal=True assumes "
            "T_new == L and lets a single new token see key 0 only.)",
            lambda *a: _cache(*a, align="top_left")),
    Mistake("no_mask_in_chunk", "no causal mask among the new tokens",
            "when several tokens arrive at once (the prompt), each may only see the ones before it.",
            lambda *a: _cache(*a, align="none")),
    Mistake("mask_off_by_one", "the causal mask shifted by one: each new token sees the next key too",
            "query i of T_new sits at position L - T_new + i (counted from 0): hide the keys after "
            "that position, key > L - T_new + i.", lambda *a: _cache(*a, offset=1)),
    Mistake("cropped_too_short", "the cache cropped to block_size - 1 entries",
            "keep the last block_size entries, the new token's own key included: [:, :, -block_size:].",
            lambda *a: _cache(*a, size=a[7] - 1)),
    Mistake("split_without_transpose", "heads split with a view to (B, n_heads, T, head_size) directly",
            "the features of one token are head after head: view(B, T_new, n_heads, head_size), then "
            "transpose(1, 2).", lambda *a: _cache(*a, split="view")),
    Mistake("softmax_over_queries", "the softmax taken over the queries (dim=-2)",
            "each query's weights over the keys must sum to 1: softmax over the last dim (dim=-1).",
            lambda *a: _cache(*a, dim=-2)),
    Mistake("new_keys_only", "scores against the new keys only, not the cached ones",
            "compare the queries with every key in the cache (after appending): q @ self.k_cache.mT.",
            lambda *a: _cache(*a, keys_from="new")),
    Mistake("new_values_only", "weights applied to the new values only, not the cached ones",
            "the weights run over every cached key: apply them to the cached values, wei @ self.v_cache.",
            lambda *a: _cache(*a, values_from="new")),
    Mistake("keys_in_value_cache", "the new keys appended to the value cache",
            "append v to the value cache and k to the key cache.", lambda *a: _cache(*a, v_appends="k")),
)


# --- each exercise's catalogue, by the exercise's key ------------------------------------

BY_EXERCISE = {
    "bag_of_words_loop": BAG_OF_WORDS, "bag_of_words_matmul": BAG_OF_WORDS_MATMUL,
    "running_average_weights": RUNNING_AVERAGE_WEIGHTS, "masked_softmax": MASKED_SOFTMAX,
    "causal_weights": CAUSAL_WEIGHTS, "head": HEAD,
    "scaled_dot_product_attention": SCALED_DOT_PRODUCT_ATTENTION,
    "multi_head_attention": MULTI_HEAD_ATTENTION, "batched_multi_head_attention": MULTI_HEAD_ATTENTION,
    "block": BLOCK, "gpt": GPT, "generate": GENERATE, "online_softmax": ONLINE_SOFTMAX,
    "tiled_attention": TILED_ATTENTION, "cached_attention": CACHED_ATTENTION,
}


# --- 09: rotary positions -------------------------------------------------------------

def _rope(x, positions, *, pairing="interleaved", layout="interleaved", sign=1, restart=False,
          exponent=2.0, one_frequency=False, put_back="interleaved"):
    """apply_rope with the knobs a learner can turn: which dims pair up (adjacent, or the two
    halves as rotate_half does), how the angles are laid out over the dims, the direction
    of the turn, the positions used, the frequencies."""
    head_size, half = x.shape[-1], x.shape[-1] // 2
    pos = torch.arange(x.shape[-2], device=x.device) if restart else positions  # (T,)
    i = torch.arange(half, dtype=x.dtype, device=x.device)  # (head_size // 2,)
    freq = torch.ones_like(i) if one_frequency else ref.ROPE_BASE ** (-exponent * i / head_size)
    angles = pos.to(x.dtype).view(-1, 1) * freq  # (T, head_size // 2)
    if layout == "interleaved":  # (a0, a0, a1, a1, ...): one angle per adjacent pair
        angles = angles.repeat_interleave(2, dim=-1)  # (T, head_size)
    else:  # (a0, a1, ..., a0, a1, ...): one angle per pair of halves
        angles = torch.cat([angles, angles], dim=-1)  # (T, head_size)
    if pairing == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]
        turned = torch.stack([-x2, x1], dim=-1).flatten(-2)  # (..., T, head_size)
    else:  # rotate_half
        turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (..., T, head_size)
    out = x * angles.cos() + turned * (sign * angles.sin())
    if put_back == "halves":  # the turned pairs' first numbers, then their second numbers
        out = torch.cat([out[..., 0::2], out[..., 1::2]], dim=-1)
    return out


HALF_SPLIT = "pairs (i, i + head_size/2) turned (the rotate_half convention)"
HALF_SPLIT_HINT = ("this notebook pairs adjacent dims (2i, 2i + 1), as the complex numbers x[2i] + 1j x[2i+1] "
                   "do; weights trained with one pairing give wrong scores under the other (see Hint 3).")
APPLY_ROPE = (
    Mistake("rope_half_split", HALF_SPLIT, HALF_SPLIT_HINT,
            lambda x, p: _rope(x, p, pairing="half", layout="half")),
    Mistake("rope_rotate_half_interleaved_angles",
            "rotate_half pairs (i, i + head_size/2) given angles laid out for adjacent pairs",
            "the angles (a0, a0, a1, a1, ...) belong to adjacent pairs (2i, 2i + 1): turn those pairs, not "
            "the two halves. Mixing the conventions is a bug that shipped in real ports of Llama.",
            lambda x, p: _rope(x, p, pairing="half", layout="interleaved")),
    Mistake("rope_adjacent_pairs_half_angles",
            "adjacent pairs (2i, 2i + 1) given angles laid out for the two halves",
            "the two dims of a pair must turn by the same angle: lay the angles out as (a0, a0, a1, a1, ...) "
            "(repeat_interleave), not (a0, a1, ..., a0, a1, ...) (cat), which belongs to rotate_half.",
            lambda x, p: _rope(x, p, pairing="interleaved", layout="half")),
    Mistake("rope_positions_from_zero", "positions counted from 0 instead of the positions given",
            "turn each vector by its position in the text, positions[t], not by t: with a cache, a new "
            "chunk of tokens starts where the text so far ends, not at 0.",
            lambda x, p: _rope(x, p, restart=True)),
    Mistake("rope_wrong_direction", "every pair turned the other way (by -angle)",
            "new = (a cos - b sin, a sin + b cos): the first of a pair loses b sin, the second gains a sin.",
            lambda x, p: _rope(x, p, sign=-1)),
    Mistake("rope_exponent", "frequencies base ** (-i / head_size): the exponent misses its factor 2",
            "pair i turns at base ** (-2i / head_size), so that the last pair's frequency is near 1/base.",
            lambda x, p: _rope(x, p, exponent=1.0)),
    Mistake("rope_exponent_pairs", "frequencies base ** (-2i / (head_size / 2)): divided by the pairs, not the dims",
            "the exponent is -2i / head_size, with head_size the whole vector's length: the last pair then "
            "turns at nearly 1/base per position.", lambda x, p: _rope(x, p, exponent=4.0)),
    Mistake("rope_pairs_put_back_as_halves", "the turned pairs put back as two halves (torch.cat)",
            "the pairs are turned right, but each pair's two numbers must go back to dims (2i, 2i + 1): "
            "interleave them (torch.stack(..., dim=-1).flatten(-2)), do not concatenate them.",
            lambda x, p: _rope(x, p, put_back="halves")),
    Mistake("rope_one_frequency", "every pair turned by the same angle, the position itself",
            "each pair has its own frequency, base ** (-2i / head_size): fast for the first pairs, slow "
            "for the last, so that both near and far distances are told apart.",
            lambda x, p: _rope(x, p, one_frequency=True)),
)


# --- 09: grouped key/value heads ------------------------------------------------------

def _gqa(q, k, v, n_kv_heads, mask, *, kv_map="interleave", scale=True, mask_mode="fill", dim=-1, factor=None):
    """grouped_query_attention with the knobs a learner can turn: how query heads find
    their key/value head, the scale, the mask."""
    B, n_heads, T_k = q.shape[0], q.shape[1], k.shape[2]
    group = n_heads // n_kv_heads
    if kv_map == "interleave":  # [h0, h0, h0, h1, h1, h1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    elif kv_map == "tile":  # [h0, h1, h0, h1, h0, h1]
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    elif kv_map == "first":  # h // n_heads: every query head reads key/value head 0
        k, v = k[:, :1].expand(-1, n_heads, -1, -1), v[:, :1].expand(-1, n_heads, -1, -1)
    elif kv_map == "divisor":  # query head h reads key/value head h // n_kv_heads
        idx = [h // n_kv_heads for h in range(n_heads)]
        k, v = torch.stack([k[:, j] for j in idx], 1), torch.stack([v[:, j] for j in idx], 1)
    elif kv_map == "zero":  # the group size n_kv_heads // n_heads: every head repeated 0 times
        k, v = k.repeat_interleave(n_kv_heads // n_heads, 1), v.repeat_interleave(n_kv_heads // n_heads, 1)
    elif kv_map == "time":  # repeat_kv written for (B, T, H, D) on (B, H, T, D): time repeated, reshaped
        k = k.repeat_interleave(group, 2).reshape(B, n_heads, T_k, -1)
        v = v.repeat_interleave(group, 2).reshape(B, n_heads, T_k, -1)
    # kv_map == "none": n_kv_heads heads against n_heads: the matmul cannot broadcast them
    factor = factor if factor is not None else q.shape[-1] ** -0.5 if scale else 1.0
    wei = q @ k.mT * factor  # (B, n_heads, T_q, T_k)
    if mask_mode == "fill":
        wei = wei.masked_fill(mask, float("-inf"))
    elif mask_mode == "inverted":
        wei = wei.masked_fill(~mask, float("-inf"))
    elif mask_mode == "transposed":
        wei = wei.masked_fill(mask.mT, float("-inf"))
    return torch.softmax(wei, dim=dim) @ v  # (B, n_heads, T_q, head_size); a row with no key is NaN


GROUPED_QUERY_ATTENTION = (
    Mistake("kv_tiled", "key/value heads tiled (repeat) instead of repeated in place (repeat_interleave)",
            "query heads 0..group-1 share key/value head 0: the heads must come out as [h0, h0, h1, h1], "
            "not [h0, h1, h0, h1]. This very mistake shipped in several public GQA implementations.",
            lambda *a: _gqa(*a, kv_map="tile")),
    Mistake("kv_head_zero", "every query head reads key/value head 0",
            "query head h belongs to group h // (n_heads // n_kv_heads); dividing by n_heads gives 0 for "
            "every head.", lambda *a: _gqa(*a, kv_map="first")),
    Mistake("kv_head_divisor", "query head h given key/value head h // n_kv_heads",
            "the group size is n_heads // n_kv_heads: head h belongs to key/value head "
            "h // (n_heads // n_kv_heads).", lambda *a: _gqa(*a, kv_map="divisor")),
    Mistake("kv_not_repeated", "key/value heads not repeated along the heads dim",
            "k and v hold n_kv_heads heads on dim 1: repeat each one n_heads // n_kv_heads times along "
            "dim 1 (not dim 2, which is time in (B, n_heads, T, head_size)).",
            lambda *a: _gqa(*a, kv_map="none")),
    Mistake("kv_repeated_along_time",
            "key/value heads repeated along time, then reshaped into heads",
            "repeat along dim 1, the heads: repeating dim 2 (time, in this layout) and reshaping mixes "
            "positions into other heads. Code written for (B, T, n_heads, head_size) has its heads on dim 2.",
            lambda *a: _gqa(*a, kv_map="time")),
    Mistake("kv_group_zero", "the group size computed the wrong way round: n_kv_heads // n_heads is 0",
            "each key/value head serves n_heads // n_kv_heads query heads, n_heads being the number of query "
            "heads, dim 1 of q.",
            lambda *a: _gqa(*a, kv_map="zero")),
    Mistake("missing_scale", "no scale", "multiply the scores by head_size ** -0.5 (head_size = q.shape[-1]).",
            lambda *a: _gqa(*a, scale=False)),
    Mistake("scale_by_width", "scores scaled by (n_heads * head_size) ** -0.5, the model's width",
            "each head's dot products have head_size terms: scale by head_size ** -0.5 (q.shape[-1]).",
            lambda *a: _gqa(*a, factor=(a[0].shape[1] * a[0].shape[-1]) ** -0.5)),
    Mistake("scale_not_sqrt", "scores divided by head_size instead of its square root",
            "multiply by head_size ** -0.5 (1 / sqrt(head_size)).", lambda *a: _gqa(*a, factor=1 / a[0].shape[-1])),
    Mistake("mask_inverted", "mask polarity inverted (True taken as may attend)",
            "here mask is True where a query may NOT attend: fill those scores with -inf. "
            "(F.scaled_dot_product_attention's boolean attn_mask means the opposite.)",
            lambda *a: _gqa(*a, mask_mode="inverted")),
    Mistake("softmax_over_queries", "softmax over the queries (dim=-2)",
            "each query's weights over the keys must sum to 1: softmax over the last dim (dim=-1).",
            lambda *a: _gqa(*a, dim=-2)),
    Mistake("mask_transposed", "the mask transposed (mask.mT)",
            "mask[i, j] is about query i and key j, like the scores q @ k.mT: use it as it is.",
            lambda *a: _gqa(*a, mask_mode="transposed")),
)


# --- 09: a sliding window with a rolling key/value cache ------------------------------

class _WindowSteps:
    """SlidingWindowAttention with the knobs a learner can turn, fed one chunk at a time, its
    cache of (key, value, position) kept between chunks: the window's lower edge (lower=1:
    window + 1 tokens seen) and its diagonal (upper=-1: a token does not see itself; 1: it
    sees the next one), how many entries the cache keeps after each step (window - 1 +
    keep_extra), whether a single new token is masked at all (or sees one token less) and a
    chunk by the window, the positions the rotation uses, which of q and k it turns, how query
    heads find their key/value head, the heads' split and merge, and whether the new keys are
    attended to and kept."""

    def __init__(self, w_query, w_key, w_value, w_proj, b_proj, n_heads, n_kv_heads, window, *, lower=0,
                 upper=0, keep_extra=0, single_unmasked=False, single_short=False, chunk_band=True,
                 positions="text", rope="both", kv_map="interleave", append="before", stored="all",
                 align="text", merge="transpose", split="transpose"):
        self.w = (w_query, w_key, w_value, w_proj, b_proj)
        self.n_heads, self.n_kv_heads, self.window = n_heads, n_kv_heads, window
        self.keep = window - 1 + keep_extra
        self.knobs = dict(lower=lower, upper=upper, single_unmasked=single_unmasked, single_short=single_short,
                          chunk_band=chunk_band, positions=positions, rope=rope, kv_map=kv_map, append=append,
                          stored=stored, align=align, merge=merge, split=split)
        self.K = self.V = self.P = None  # the cache: (B, n_kv_heads, L, head_size) twice, positions (L,)
        self.seen = 0

    def step(self, xc):
        """The outputs (B, n, C) for the next n tokens xc (B, n, C)."""
        w_query, w_key, w_value, w_proj, b_proj = self.w
        kn, K, V, P = self.knobs, self.K, self.V, self.P
        B, n, _ = xc.shape
        head_size = w_query.shape[0] // self.n_heads
        if kn["split"] == "view":  # viewed as (B, heads, n, head_size) straight away: tokens and heads mixed
            heads = lambda t, h: t.reshape(B, h, n, head_size)
        else:
            heads = lambda t, h: t.view(B, n, h, head_size).transpose(1, 2)  # (B, h, n, head_size)
        pos = torch.arange(self.seen, self.seen + n, device=xc.device)  # (n,) their positions in the text
        turn_at = {"text": pos, "restart": pos - self.seen, "restart_all": pos - self.seen,
                   "cache_length": pos - self.seen + (0 if K is None else K.shape[2])}[kn["positions"]]
        q = heads(xc @ w_query.mT, self.n_heads)
        k, v = heads(xc @ w_key.mT, self.n_kv_heads), heads(xc @ w_value.mT, self.n_kv_heads)
        if kn["rope"] in ("both", "q_only"):
            q = ref.apply_rope(q, turn_at)
        if kn["rope"] == "both":
            k = ref.apply_rope(k, turn_at)
        if K is None:
            keys, values, key_pos = k, v, pos
        elif kn["append"] == "before":
            keys, values, key_pos = torch.cat([K, k], 2), torch.cat([V, v], 2), torch.cat([P, pos])
        else:  # the new tokens attend to the cache only, and are appended afterwards
            keys, values, key_pos = K, V, P
        rows = (turn_at if kn["positions"] == "restart_all" else pos).view(-1, 1)  # (n, 1) the queries' positions
        cols = key_pos.view(1, -1)  # (1, L)
        if kn["align"] == "top_left":  # positions counted inside the attended keys, the first cached one at 0
            rows = torch.arange(n, device=xc.device).view(-1, 1)
            cols = torch.arange(key_pos.shape[0], device=xc.device).view(1, -1)
        hide = cols > rows + kn["upper"]
        single = n == 1
        if kn["chunk_band"] and not (kn["single_unmasked"] and single):
            hide = hide | (cols <= rows - self.window - kn["lower"])
        if kn["single_unmasked"] and single:
            hide = torch.zeros_like(hide)
        if kn["single_short"] and single:  # a single token given only the last window - 1 keys
            hide = hide.clone()
            hide[:, :max(0, hide.shape[1] - (self.window - 1))] = True
        out = _gqa(q, keys, values, self.n_kv_heads, hide, kv_map=kn["kv_map"])  # (B, n_heads, n, head_size)
        out = out.transpose(1, 2) if kn["merge"] == "transpose" else out
        if kn["stored"] == "new" or K is None:  # the cache replaced by the new entries
            K, V, P = k, v, pos
        else:
            K, V, P = torch.cat([K, k], 2), torch.cat([V, v], 2), torch.cat([P, pos])
        cut = max(0, K.shape[2] - self.keep)
        self.K, self.V, self.P = K[:, :, cut:], V[:, :, cut:], P[cut:]
        self.seen += n
        return out.reshape(B, n, -1) @ w_proj.mT + b_proj  # (B, n, C)


def _window_stream(x, w_query, w_key, w_value, w_proj, b_proj, n_heads, n_kv_heads, window, chunks, **knobs):
    """The outputs (B, T, C) of _WindowSteps fed x chunk by chunk."""
    steps = _WindowSteps(w_query, w_key, w_value, w_proj, b_proj, n_heads, n_kv_heads, window, **knobs)
    outs, start = [], 0
    for n in chunks:
        outs.append(steps.step(x[:, start:start + n]))
        start += n
    return torch.cat(outs, dim=1)  # (B, T, C)


def _window(**knobs):
    """A catalogued window mistake: fn(inputs...) -> outputs, which also carries .steps, its
    stepper, so that a module made from it (grader/answers/correct.py: student_from) is fed
    a chunk at a time as the checks feed it, instead of recomputing the text so far each time."""
    fn = functools.partial(_window_stream, **knobs)
    fn.steps = lambda *weights: _WindowSteps(*weights, **knobs)
    return fn


SLIDING_WINDOW_ATTENTION = (
    Mistake("window_plus_one", "each token sees window + 1 tokens, itself and window before it",
            "the window counts the token itself: keys at positions p - window + 1 .. p, hidden when "
            "key <= p - window. FlashAttention's window_size=(W, 0) means W + 1 tokens; the off-by-one "
            "shipped in widely used libraries.", _window(lower=1, keep_extra=1)),
    Mistake("window_minus_one", "each token sees window - 1 tokens: the window's edge one short",
            "a token sees itself and the window - 1 before it, window tokens in all: hide keys at "
            "key <= p - window, not key <= p - window + 1.", _window(lower=-1)),
    Mistake("window_hides_itself", "the mask's diagonal off by one: a token does not see itself",
            "hide the keys after the query (key > p), not from the query on (key >= p): position 0 would "
            "see nothing at all.", _window(upper=-1)),
    Mistake("window_sees_next", "the mask's diagonal off by one: a token sees the next one too",
            "inside a chunk of several tokens, hide every key after the query's own position (key > p).",
            _window(upper=1)),
    Mistake("no_window_in_chunk", "no window inside a chunk: a prompt's tokens see all the prompt before them",
            "the cache's size limits a single new token, but a chunk of several tokens needs the window in "
            "its mask too: hide keys at key <= p - window.", _window(chunk_band=False)),
    Mistake("cache_one_long", "the cache keeps window keys, and a single new token sees them all: window + 1",
            "the mask and the cache must agree: a new token sees the window - 1 before it and itself. Keep "
            "window - 1 entries after the step, or mask the oldest one (this disagreement shipped in a "
            "widely used library).", _window(single_unmasked=True, keep_extra=1)),
    Mistake("cache_one_short", "the cache keeps window - 2 entries: a new token sees only window - 1 tokens",
            "the mask and the cache must agree: after a step, keep the last window - 1 keys and values (or "
            "window of them), so that the next token sees window tokens with its own.",
            _window(keep_extra=-1)),
    Mistake("single_token_one_short", "a single new token sees window - 1 tokens, a token of a chunk window",
            "the rolling cache is one slot short of the mask: a single new token must see the window - 1 "
            "tokens before it and itself, as the same token inside a prompt does.",
            _window(single_short=True)),
    Mistake("appended_after_attention", "the new keys and values appended after the attention step",
            "append them first (or attend over the cache and the new ones together): a token sees itself.",
            _window(append="after")),
    Mistake("cache_replaced", "the cache replaced by the new keys and values instead of extended",
            "put the new keys and values after the cached ones (torch.cat along time), then keep the last "
            "window - 1: a new token must see the tokens before it, not only the last chunk.",
            _window(stored="new")),
    Mistake("mask_top_left", "the mask counted from the first cached key, not from positions in the text",
            "new token i sits at position self.seen + i, and the cached keys before it: compare positions in "
            "the text (F.scaled_dot_product_attention's is_causal=True aligns them the other way).",
            _window(align="top_left")),
    Mistake("positions_restarted", "rotary positions restarted at 0 for each new chunk",
            "turn the new queries and keys at their positions in the text, tokens seen so far + 0 .. "
            "T_new - 1: keep a count of the tokens seen.", _window(positions="restart")),
    Mistake("positions_restarted_in_mask",
            "positions restarted at 0 for each new chunk, in the rotation and in the mask",
            "the new tokens sit at positions self.seen .. self.seen + T_new - 1 of the text: with positions "
            "from 0, the rotation is wrong and the mask hides every cached key from them (NaN).",
            _window(positions="restart_all")),
    Mistake("positions_from_cache_length", "rotary positions counted from the cache's length",
            "the cache stops growing once it holds the window, but positions go on: count the tokens seen "
            "so far (self.seen), not the keys cached.", _window(positions="cache_length")),
    Mistake("rope_queries_only", "only the queries rotated, not the keys",
            "rotate the new keys too, at the same positions, before they go into the cache: the score then "
            "depends on the distance between query and key.", _window(rope="q_only")),
    Mistake("no_rope", "no rotary positions", "rotate the new queries and keys with your apply_rope, at "
            "their positions in the text.", _window(rope="none")),
    Mistake("kv_tiled", GROUPED_QUERY_ATTENTION[0].name, GROUPED_QUERY_ATTENTION[0].hint,
            _window(kv_map="tile")),
    Mistake("merge_without_transpose", "heads joined without transposing back",
            "(B, n_heads, T_new, head_size).reshape(B, T_new, -1) mixes tokens and heads: transpose(1, 2) "
            "first, then reshape.", _window(merge="none")),
    Mistake("split_without_transpose", "heads split with a view to (B, heads, T_new, head_size) directly",
            "the features of one token are head after head: view(B, T_new, heads, head_size), then "
            "transpose(1, 2).", _window(split="view")),
)


BY_EXERCISE.update({"apply_rope": APPLY_ROPE, "grouped_query_attention": GROUPED_QUERY_ATTENTION,
                    "sliding_window_attention": SLIDING_WINDOW_ATTENTION})
