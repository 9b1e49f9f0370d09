"""Trusted reference implementations, written for clarity rather than speed.

Every function here is the answer to one exercise. The checks run them in float64 on
the CPU, so a student's result is always compared with the most accurate value
available. Convention used across the course: a boolean ``mask`` is True where a
token may NOT attend (the position is hidden), as in ``scores.masked_fill(mask, -inf)``.
"""
import torch


def bag_of_words(x):
    """Token t receives the mean of tokens 0..t of its own sequence."""
    B, T, C = x.shape
    xbow = torch.zeros_like(x)  # (B, T, C)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(0)  # (C,)
    return xbow


def running_average_weights(T, dtype=torch.float64):
    """(T, T) lower-triangular matrix whose row t holds 1/(t+1) in columns 0..t."""
    wei = torch.tril(torch.ones(T, T, dtype=dtype))  # (T, T)
    return wei / wei.sum(1, keepdim=True)


def causal_mask(T, device=None):
    """(T, T) bool, True above the diagonal: the future a token may not see."""
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)


def masked_softmax(scores, mask):
    """Softmax over the last dim with masked positions removed.

    A row whose every position is masked has nothing to attend to: it gets zeros.
    """
    wei = scores.masked_fill(mask, float("-inf"))  # (..., T, T)
    wei = torch.softmax(wei, dim=-1)
    return wei.nan_to_num(0.0)  # fully masked rows: 0/0 -> 0


def causal_weights(scores):
    """Causal attention weights: mask the future by position, softmax each row."""
    T = scores.shape[-1]
    return masked_softmax(scores, causal_mask(T, device=scores.device))


def head(x, w_query, w_key, w_value, causal=True, block_size=None):
    """One unscaled attention head; weights are (head_size, C) like nn.Linear.

    block_size (the longest sequence a module is built for) does not change the result.
    """
    q = x @ w_query.mT  # (B, T, head_size)
    k = x @ w_key.mT  # (B, T, head_size)
    v = x @ w_value.mT  # (B, T, head_size)
    wei = q @ k.mT  # (B, T, T)
    if causal:
        wei = causal_weights(wei)
    else:
        wei = torch.softmax(wei, dim=-1)
    return wei @ v  # (B, T, head_size)


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(head_size), masked) @ v over the last two dims."""
    head_size = q.shape[-1]
    scores = q @ k.mT * head_size**-0.5  # (..., T, T)
    if mask is None:
        wei = torch.softmax(scores, dim=-1)
    else:
        wei = masked_softmax(scores, mask)
    return wei @ v  # (..., T, head_size)


def multi_head_attention(x, w_query, w_key, w_value, w_proj, b_proj, causal=True,
                         block_size=None):
    """Multi-head attention from per-head weights.

    w_query, w_key, w_value: (n_heads, head_size, C); w_proj: (C, n_heads * head_size).
    """
    T = x.shape[1]
    mask = causal_mask(T, device=x.device) if causal else None
    outs = []
    for wq, wk, wv in zip(w_query, w_key, w_value):
        q, k, v = x @ wq.mT, x @ wk.mT, x @ wv.mT  # (B, T, head_size) each
        outs.append(scaled_dot_product_attention(q, k, v, mask))
    out = torch.cat(outs, dim=-1)  # (B, T, n_heads * head_size)
    return out @ w_proj.mT + b_proj  # (B, T, C)
