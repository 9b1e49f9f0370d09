"""Trivial answers (an input returned, zeros, uniform or identity weights): they earn nothing."""
import torch

from grader.checks import registry
from grader.checks.masks import causal_mask


def _project(x, w):
    return x @ w.mT


def _uniform_weights(T, mask, dtype=torch.float64):
    """Uniform weights over the visible keys: softmax of zeros with the mask."""
    zeros = torch.zeros(T, T, dtype=dtype, device=mask.device if mask is not None else None)
    if mask is None:
        return torch.softmax(zeros, -1)
    return registry.reference("masked_softmax")(zeros.expand(mask.shape), mask)


def bag_baselines(inp):
    """(description, tensor) pairs: answers that skip the exercise (01's and 02's averages)."""
    x = inp["x"]
    return [("x returned unchanged", x), ("zeros", torch.zeros_like(x)),
            ("the mean of the whole sequence (uniform weights 1/T everywhere)",
             x.mean(1, keepdim=True).expand_as(x))]


def running_weights_baselines(inp):
    T = int(inp["T"])
    return [("torch.eye(T): every token keeps only itself", torch.eye(T, dtype=torch.float64)),
            ("zeros", torch.zeros(T, T, dtype=torch.float64)),
            ("uniform weights 1/T everywhere", torch.full((T, T), 1.0 / T, dtype=torch.float64))]


def weights_baselines(inp):
    """03's weights, under the given mask, or the causal one where none is given."""
    s = inp["scores"]
    T = s.shape[-1]
    mask = inp["mask"] if "mask" in inp else causal_mask(T, s.device)
    eye = torch.eye(T, dtype=s.dtype, device=s.device).expand_as(s)
    return [("the scores returned unchanged", s), ("zeros", torch.zeros_like(s)),
            ("uniform weights over the visible keys (the scores ignored)",
             _uniform_weights(T, mask, s.dtype).expand_as(s)),
            ("uniform weights 1/T everywhere", torch.full_like(s, 1.0 / T)),
            ("identity weights (torch.eye)", eye)]


def sdpa_baselines(inp):
    q, k, v, mask = inp["q"], inp["k"], inp["v"], inp["mask"]
    return [("v returned unchanged (identity weights, no attention)", v),
            ("q returned unchanged", q), ("k returned unchanged", k),
            ("zeros", torch.zeros_like(v)),
            ("uniform weights over the visible keys (q and k ignored)",
             _uniform_weights(v.shape[-2], mask, v.dtype) @ v)]


def head_baselines(inp):
    x = inp["x"]
    T = x.shape[1]
    v = _project(x, inp["w_value"])
    mask = causal_mask(T, x.device) if inp["causal"] else None
    return [("self.value(x) (identity weights, no attention)", v),
            ("self.query(x), merely projected", _project(x, inp["w_query"])),
            ("self.key(x), merely projected", _project(x, inp["w_key"])),
            ("zeros", torch.zeros_like(v)),
            ("uniform weights over the visible tokens (queries and keys ignored)",
             _uniform_weights(T, mask, x.dtype) @ v)]


def mha_baselines(inp):
    x = inp["x"]
    B, T, C = x.shape
    proj = lambda t: t @ inp["w_proj"].mT + inp["b_proj"]
    flat = lambda w: _project(x, w.reshape(-1, C))  # (B, T, n_heads * head_size)
    mask = causal_mask(T, x.device) if inp["causal"] else None
    v = flat(inp["w_value"])
    return [("x returned unchanged", x), ("zeros", torch.zeros_like(x)),
            ("proj of zeros (only the bias)", proj(torch.zeros_like(v))),
            ("the values merely projected, proj(value(x)) (identity weights)", proj(v)),
            ("the queries merely projected", proj(flat(inp["w_query"]))),
            ("the keys merely projected", proj(flat(inp["w_key"]))),
            ("uniform weights over the visible tokens (queries and keys ignored)",
             proj(_uniform_weights(T, mask, x.dtype) @ v))]


def trivial(exercise, inp, actual, close):
    """The description of the trivial answer the output equals, or None."""
    hook = exercise.diagnosis.baselines
    for description, tensor in hook(inp) if hook else ():
        tensor = tensor.detach().to("cpu", torch.float64)
        if tensor.shape == actual.shape and close(actual, tensor):
            return description
    return None


def no_attention_message(exercise, description):
    """What a check says of an output that shows no attention where no mistake explains it."""
    return (f"your output {description}, so as it stands the exercise's computation is not there "
            f"yet and no check can give it points.\n  The task: {exercise.diagnosis.task}.")


def trivial_message(exercise, description):
    """What a check says of an output equal to a trivial baseline no mistake explains."""
    return (f"your output equals {description}: the exercise's computation is not there yet, so "
            f"no check can give it points.\n  The task: {exercise.diagnosis.task}.")


def mistaken_message(description, equals=True):
    """The first line for an output that shows no attention (or equals a baseline) because of a
    mistake that the line after it names: no word of a skipped exercise."""
    return f"your output {'equals ' if equals else ''}{description}."
