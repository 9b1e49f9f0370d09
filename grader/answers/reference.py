"""Trusted reference implementations, written for clarity rather than speed.

Every function here is the answer to one exercise. The checks run them in float64 on
the CPU, so a student's result is always compared with the most accurate value
available. Convention used across the course: a boolean ``mask`` is True where a
token may NOT attend (the position is hidden), as in ``scores.masked_fill(mask, -inf)``.
"""
import torch

from grader.checks.masks import causal_mask


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


# --- 07: a transformer block, a tiny GPT, generation ---------------------------------

def _split_heads(w, n_heads):
    """(n_heads * head_size, C) projection -> (n_heads, head_size, C), head i in rows i*head_size..."""
    return w.view(n_heads, w.shape[0] // n_heads, w.shape[1])


def causal_self_attention(x, w_query, w_key, w_value, w_proj, b_proj, n_heads):
    """Multi-head causal self-attention with (C, C) projections, as in notebook 07."""
    return multi_head_attention(x, _split_heads(w_query, n_heads), _split_heads(w_key, n_heads),
                                _split_heads(w_value, n_heads), w_proj, b_proj, causal=True)


def mlp(x, w_fc, b_fc, w_out, b_out):
    """Linear(C, 4C) -> GELU -> Linear(4C, C)."""
    h = torch.nn.functional.gelu(x @ w_fc.mT + b_fc)  # (B, T, 4 * C)
    return h @ w_out.mT + b_out  # (B, T, C)


def layer_norm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


def block(x, ln1_w, ln1_b, w_query, w_key, w_value, w_proj, b_proj, ln2_w, ln2_b,
          w_fc, b_fc, w_out, b_out, n_heads, block_size=None, dropout=0.0):
    """A pre-norm transformer block (dropout is off: evaluation mode):
    x + attn(ln1(x)), then x + mlp(ln2(x))."""
    x = x + causal_self_attention(layer_norm(x, ln1_w, ln1_b), w_query, w_key, w_value,
                                  w_proj, b_proj, n_heads)  # (B, T, C)
    return x + mlp(layer_norm(x, ln2_w, ln2_b), w_fc, b_fc, w_out, b_out)  # (B, T, C)


def gpt(idx, tok, pos, ln1_w, ln1_b, w_query, w_key, w_value, w_proj, b_proj, ln2_w, ln2_b,
        w_fc, b_fc, w_out, b_out, lnf_w, lnf_b, w_head, b_head, n_heads, block_size=None):
    """Logits of a tiny GPT; every per-block weight is stacked along a first n_layers dim.

    token + position embeddings -> the blocks -> final LayerNorm -> linear head."""
    T = idx.shape[1]
    x = tok[idx] + pos[:T]  # (B, T, C)
    layers = (ln1_w, ln1_b, w_query, w_key, w_value, w_proj, b_proj, ln2_w, ln2_b,
              w_fc, b_fc, w_out, b_out)
    for weights in zip(*layers):
        x = block(x, *weights, n_heads)  # (B, T, C)
    return layer_norm(x, lnf_w, lnf_b) @ w_head.mT + b_head  # (B, T, vocab_size)


def generate(model, idx, max_new_tokens, block_size, temperature, seed):
    """Sample max_new_tokens tokens from the stand-in model of grader.checks.student_call.

    model: its tensors {"tok", "pos", "mix"}; idx: the prompt, a list of lists of ids.
    Each step: crop the context to its last block_size tokens, take the logits of the
    last position, softmax(logits / temperature), one torch.multinomial draw with a
    generator seeded once with seed."""
    from grader.checks.student_call import StandInLM

    lm = StandInLM(**model)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.tensor(idx, dtype=torch.long)  # (B, T)
    for _ in range(max_new_tokens):
        logits = lm(idx[:, -block_size:])[:, -1, :]  # (B, vocab_size)
        probs = torch.softmax(logits / temperature, dim=-1)  # (B, vocab_size)
        nxt = torch.multinomial(probs, num_samples=1, generator=gen)  # (B, 1)
        idx = torch.cat([idx, nxt], dim=1)  # (B, T + 1)
    return idx.double()  # the ids, in float64 like every reference


# --- 08: attention that fits in memory -----------------------------------------------

def online_softmax(scores):
    """The softmax over the last dim (an online softmax computes exactly this)."""
    return torch.softmax(scores, dim=-1)


def tiled_attention(q, k, v, tile_size):
    """Causal scaled dot-product attention of (B, n_heads, T, head_size) tensors; tiling
    changes how it is computed, not the result."""
    return scaled_dot_product_attention(q, k, v, causal_mask(q.shape[-2], q.device))


def sliding_window_mask(T, window, device=None):
    """(T, T) bool, True where query i may not see key j: the future, and keys more than
    window - 1 positions back."""
    i = torch.arange(T, device=device).view(T, 1)
    j = torch.arange(T, device=device).view(1, T)
    return (j > i) | (j <= i - window)


def cached_attention(x, w_query, w_key, w_value, w_proj, b_proj, n_heads, block_size, chunks):
    """What multi-head causal attention with a key/value cache of block_size entries
    returns when x is fed a prompt (at most block_size tokens) and then a few tokens at a
    time: each token attends to itself and the block_size - 1 tokens before it. This is
    computed here without any cache, on the whole sequence at once. Chunks of several
    tokens must end within block_size tokens (no cropping while a chunk is attended to)."""
    ends = [sum(chunks[:i + 1]) for i in range(len(chunks))]
    if any(n > 1 and end > block_size for n, end in zip(chunks, ends)):
        raise ValueError("the reference expects chunks of several tokens only within the first block_size "
                         "tokens, then single tokens")
    T = x.shape[1]
    mask = sliding_window_mask(T, block_size, x.device)  # (T, T)
    heads = [_split_heads(w, n_heads) for w in (w_query, w_key, w_value)]
    outs = []
    for wq, wk, wv in zip(*heads):
        q, k, v = x @ wq.mT, x @ wk.mT, x @ wv.mT  # (B, T, head_size) each
        outs.append(scaled_dot_product_attention(q, k, v, mask))
    return torch.cat(outs, dim=-1) @ w_proj.mT + b_proj  # (B, T, C)


# --- 09: attention in today's models -----------------------------------------------

ROPE_BASE = 10000.0


def rope_angles(positions, head_size, dtype=torch.float64):
    """(T, head_size // 2): the angle pair i turns by at each position,
    position * ROPE_BASE ** (-2i / head_size)."""
    i = torch.arange(head_size // 2, dtype=dtype, device=positions.device)  # (head_size // 2,)
    return positions.to(dtype).view(-1, 1) * ROPE_BASE ** (-2 * i / head_size)  # (T, head_size // 2)


def apply_rope(x, positions):
    """Rotary positions with interleaved pairs: for x (..., T, head_size) and positions (T,),
    the dims (2i, 2i + 1) of the vector at position p are rotated by the angle
    p * ROPE_BASE ** (-2i / head_size), as the complex number x[2i] + 1j * x[2i + 1] is
    multiplied by exp(1j * angle)."""
    angles = rope_angles(positions, x.shape[-1], x.dtype)  # (T, head_size // 2)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, head_size // 2) each
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)  # (..., T, head_size)


def grouped_query_attention(q, k, v, n_kv_heads, mask):
    """Scaled dot-product attention where key/value head j serves the query heads
    j * group .. (j + 1) * group - 1, group = n_heads // n_kv_heads.

    q (B, n_heads, T_q, head_size); k, v (B, n_kv_heads, T_k, head_size); mask (T_q, T_k),
    True where a query may NOT attend."""
    group = q.shape[1] // n_kv_heads
    k = k.repeat_interleave(group, dim=1)  # (B, n_heads, T_k, head_size)
    v = v.repeat_interleave(group, dim=1)  # (B, n_heads, T_k, head_size)
    return scaled_dot_product_attention(q, k, v, mask)  # (B, n_heads, T_q, head_size)


def sliding_window_attention(x, w_query, w_key, w_value, w_proj, b_proj, n_heads, n_kv_heads, window,
                             chunks):
    """What SlidingWindowAttention returns when x is fed to it in chunks (a prompt, then a
    few tokens at a time): computed here on the whole sequence at once, without a cache.
    Each token sees itself and the window - 1 tokens before it; queries and keys are
    rotated at their positions 0..T-1 in the text; key/value head j serves a group of
    n_heads // n_kv_heads query heads. The chunks change how it is computed, not the result."""
    B, T, C = x.shape
    head_size = w_query.shape[0] // n_heads
    heads = lambda t, n: t.view(B, T, n, head_size).transpose(1, 2)  # (B, n, T, head_size)
    positions = torch.arange(T, device=x.device)  # (T,)
    q = apply_rope(heads(x @ w_query.mT, n_heads), positions)  # (B, n_heads, T, head_size)
    k = apply_rope(heads(x @ w_key.mT, n_kv_heads), positions)  # (B, n_kv_heads, T, head_size)
    v = heads(x @ w_value.mT, n_kv_heads)  # (B, n_kv_heads, T, head_size)
    out = grouped_query_attention(q, k, v, n_kv_heads, sliding_window_mask(T, window, x.device))
    return out.transpose(1, 2).reshape(B, T, n_heads * head_size) @ w_proj.mT + b_proj  # (B, T, C)
