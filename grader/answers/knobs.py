"""The attention the diagnosis computes with every knob a learner can turn (the scale,
the mask, the softmax's dim, the order of q and k, the heads' layout...): its defaults
give the reference, so it is near an answer and the student bundle leaves it out. The
checks receive it through grader/checks/registry.py (knob("forward"))."""
import torch

from grader.checks.diagnosis import sizes
from grader.checks.diagnosis.baselines import _project
from grader.checks.exercises import EXERCISES
from grader.checks.masks import causal_mask

BAG = ("bag_of_words_loop", "bag_of_words_matmul")
WEIGHTS = ("masked_softmax", "causal_weights")


def _core(q, k, v, mask, factor, dim=-1, order="qk", apply="wv", fill=float("-inf")):
    wei = (q @ k.mT if order == "qk" else k @ q.mT) * factor  # (..., T, T)
    if mask is not None:
        wei = wei.masked_fill(mask, fill)
    wei = torch.softmax(wei, dim=dim).nan_to_num(0.0)
    return (wei if apply == "wv" else wei.mT) @ v


def _mask(key, inp, mode, T, device):
    """mode: given (the check's mask or causal flag), none, causal, or 'given+causal'."""
    if key in WEIGHTS or key == "scaled_dot_product_attention":
        given = inp.get("mask") if key != "causal_weights" else causal_mask(T, device)
    else:
        given = causal_mask(T, device) if inp["causal"] else None
    if mode == "given":
        return given
    if mode == "none":
        return None
    if mode == "causal":
        return causal_mask(T, device)
    if mode.startswith("offset"):
        return torch.ones(T, T, dtype=torch.bool, device=device).triu(int(mode[6:]))
    return causal_mask(T, device) | given if given is not None else causal_mask(T, device)


def _split(t, B, T, nh, hs, order):
    """(B, T, nh*hs) -> (B, nh, T, hs) as a view with dims in the given order, then the
    permutation that puts them where the code believes they are."""
    size = {"T": T, "nh": nh, "hs": hs}
    viewed = t.reshape(B, *(size[d] for d in order))
    return viewed.permute(0, *(1 + order.index(d) for d in ("nh", "T", "hs")))


def _merge(out, B, T, nh, hs, order):
    """(B, nh, T, hs) -> dims in the given order -> reshape(B, T, nh*hs)."""
    have = ("nh", "T", "hs")
    return out.permute(0, *(1 + have.index(d) for d in order)).reshape(B, T, nh * hs)


def running_weights(T, form="rows", dtype=torch.float64):
    """(T, T) averaging weights: rows (the answer), transposed, columns (each column
    normalised), or keepdim (row sums without keepdim, so column j is divided by row j's sum)."""
    tril = torch.tril(torch.ones(T, T, dtype=dtype))  # (T, T)
    if form == "rows":
        return tril / tril.sum(1, keepdim=True)
    if form == "transposed":
        return (tril / tril.sum(1, keepdim=True)).mT
    if form == "columns":
        return tril / tril.sum(0, keepdim=True)
    if form == "softmax":  # softmax of the 0/1 pattern: exp(0) = 1 above the diagonal
        return torch.softmax(tril, dim=-1)
    return tril / tril.sum(1)  # (T, T) / (T,): the missing keepdim


def forward(key, inp, *, factor=None, mask="given", dim=-1, order="qk", apply="wv",
            split=("T", "nh", "hs"), merge=("T", "nh", "hs"), heads_over_time=False,
            fill=float("-inf"), weights="rows", along=1, residual=False):
    """The exercise's output with the knobs turned; the defaults give the reference."""
    sz = sizes(EXERCISES[key], inp)
    if key == "running_average_weights":
        return running_weights(int(inp["T"]), weights)
    if key in BAG:
        x = inp["x"]
        if along == "flat":  # the batch flattened into one sequence of B * T tokens
            B, T, C = x.shape
            return (running_weights(B * T, weights, x.dtype) @ x.reshape(B * T, C)).view(B, T, C)
        if along == "all":  # the running mean taken over the channels too: one number per token
            return (running_weights(x.shape[1], weights, x.dtype).to(x.device) @ x).mean(-1, keepdim=True).expand_as(x)
        if along == "carried":  # one running sum over the flattened batch, divided by t + 1
            B, T, C = x.shape
            sums = x.reshape(B * T, C).cumsum(0).view(B, T, C)
            return sums / torch.arange(1, T + 1, dtype=x.dtype, device=x.device).view(1, T, 1)
        if along != 1:  # the running mean along another dim, or (along="mean d") a plain mean
            if isinstance(along, str):
                return x.mean(int(along[-1]), keepdim=True).expand_as(x)
            moved = x.movedim(along, 1)
            return (running_weights(moved.shape[1], weights, x.dtype) @ moved).movedim(1, along)
        return running_weights(x.shape[1], weights, x.dtype).to(x.device) @ x
    f = EXERCISES[key].diagnosis.scale.factor(sz) if factor is None else factor
    if key in WEIGHTS:
        s = inp["scores"]
        m = _mask(key, inp, mask, s.shape[-1], s.device)
        wei = s * f
        if m is not None:
            wei = wei.masked_fill(m, fill)
        return torch.softmax(wei, dim=dim).nan_to_num(0.0)
    if key == "scaled_dot_product_attention":
        q, k, v = inp["q"], inp["k"], inp["v"]
        return _core(q, k, v, _mask(key, inp, mask, q.shape[-2], q.device), f, dim, order, apply, fill)
    x = inp["x"]
    B, T, C = x.shape
    m = _mask(key, inp, mask, T, x.device)
    if key == "head":
        q, k, v = (_project(x, inp[w]) for w in ("w_query", "w_key", "w_value"))
        return _core(q, k, v, m, f, dim, order, apply, fill)
    nh, hs = sz["n_heads"], sz["head_size"]
    q, k, v = (_project(x, inp[w].reshape(-1, C)) for w in ("w_query", "w_key", "w_value"))
    if split is None:  # never split into heads: one attention over all n_heads * head_size features
        out = _core(q, k, v, m, f, dim, order, apply, fill)  # (B, T, n_heads * head_size)
    elif heads_over_time:  # view(B, T, n_heads, head_size) without the transpose
        q, k, v = (t.reshape(B, T, nh, hs) for t in (q, k, v))
        m = causal_mask(nh, x.device) if m is not None else None  # the mask sized by the heads
        out = _core(q, k, v, m, f, dim, order, apply, fill)  # (B, T, nh, hs)
        out = out.reshape(B, T, nh * hs) if merge == ("T", "nh", "hs") else \
            out.transpose(1, 2).reshape(B, T, nh * hs)
    else:
        q, k, v = (_split(t, B, T, nh, hs, split) for t in (q, k, v))
        out = _merge(_core(q, k, v, m, f, dim, order, apply, fill), B, T, nh, hs, merge)
    out = out @ inp["w_proj"].mT + inp["b_proj"]
    return x + out if residual else out  # residual: x added inside the module




def generate_with_knobs(*args, **kwargs):
    """generate with the knobs of the catalogued mistakes (how much context, which position,
    how the probabilities are made): the diagnosis turns crop to find how long a context a
    wrong answer's tokens were predicted from."""
    from grader.answers.mistakes import _generate

    return _generate(*args, **kwargs)
