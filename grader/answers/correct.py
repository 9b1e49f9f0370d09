"""Correct answers written the way a student would, and student_from(), which turns a
catalogued mistake into a student's function or module: the student bundle records the
visible checks' outputs on them (grader/instructor/bundle.py), and the tests check the
checks with them. Like the rest of grader/answers/, never shipped to students."""
import torch
import torch.nn as nn
from torch.nn import functional as F


def bag_of_words_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros((B, T, C), dtype=x.dtype, device=x.device)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(0)
    return xbow


def running_average_weights(T):
    wei = torch.tril(torch.ones(T, T))
    return wei / wei.sum(1, keepdim=True)


def bag_of_words_matmul(x):
    wei = running_average_weights(x.shape[1]).to(x.device, x.dtype)
    return wei @ x


def masked_softmax(scores, mask):
    wei = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return wei.masked_fill(mask.all(-1, keepdim=True), 0.0)


def causal_weights(scores):
    T = scores.shape[-1]
    tril = torch.tril(torch.ones(T, T, device=scores.device))
    return torch.softmax(scores.masked_fill(tril == 0, float("-inf")), dim=-1)


def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v


class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.query(x), self.key(x), self.value(x)
        wei = q @ k.transpose(-2, -1)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ v


class ScaledHead(Head):
    def forward(self, x):
        T = x.shape[1]
        mask = (self.tril[:T, :T] == 0) if self.causal else None
        return scaled_dot_product_attention(self.query(x), self.key(x), self.value(x), mask)


class MultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.heads = nn.ModuleList(ScaledHead(C, head_size, block_size, causal) for _ in range(n_heads))
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))


CORRECT = {
    "bag_of_words_loop": bag_of_words_loop,
    "bag_of_words_matmul": bag_of_words_matmul,
    "running_average_weights": running_average_weights,
    "masked_softmax": masked_softmax,
    "causal_weights": causal_weights,
    "head": Head,
    "scaled_dot_product_attention": scaled_dot_product_attention,
    "multi_head_attention": MultiHeadAttention,
    "batched_multi_head_attention": BatchedMultiHeadAttention,
}


def student_from(key, fn):
    """A student's function or module whose output is fn(inputs...), for any exercise."""
    if key == "running_average_weights":
        return lambda T: fn(T).float()
    if key == "head":
        class FromFn(Head):
            def forward(self, x):
                return fn(x, self.query.weight, self.key.weight, self.value.weight,
                          self.causal, self.tril.shape[0])
        return FromFn
    if key in ("multi_head_attention", "batched_multi_head_attention"):
        class FromFnMHA(BatchedMultiHeadAttention):
            def forward(self, x):
                n, hs, C = self.n_heads, self.head_size, x.shape[-1]
                w = lambda lin: lin.weight.view(n, hs, C)
                return fn(x, w(self.query), w(self.key), w(self.value), self.proj.weight,
                          self.proj.bias, self.causal, self.block_size)

            def __init__(self, C, n_heads, head_size, block_size, causal=True):
                super().__init__(C, n_heads, head_size, block_size, causal)
                self.block_size = block_size
        if key == "multi_head_attention":  # same parameters as the list-of-heads layout
            return _as_list_layout(FromFnMHA)
        return FromFnMHA
    if key in _FROM_FN_07_08:
        return _FROM_FN_07_08[key](fn)
    return fn


def _as_list_layout(batched_cls):
    class ListLayout(nn.Module):
        def __init__(self, C, n_heads, head_size, block_size, causal=True):
            super().__init__()
            self.heads = nn.ModuleList(Head(C, head_size, block_size, causal) for _ in range(n_heads))
            self.proj = nn.Linear(n_heads * head_size, C)
            self.args = (C, n_heads, head_size, block_size, causal)

        def forward(self, x):
            inner = batched_cls(*self.args).to(x.device, x.dtype)
            with torch.no_grad():
                for name in ("query", "key", "value"):
                    getattr(inner, name).weight.copy_(torch.cat([getattr(h, name).weight for h in self.heads]))
                inner.proj.load_state_dict(self.proj.state_dict())
            return inner(x)
    return ListLayout


# --- 07: the given attention and MLP, and the three answers ---------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.n_heads, self.head_size = n_heads, C // n_heads
        self.query = nn.Linear(C, C, bias=False)
        self.key = nn.Linear(C, C, bias=False)
        self.value = nn.Linear(C, C, bias=False)
        self.proj = nn.Linear(C, C)
        self.attn_dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(block_size, block_size, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        wei = (q @ k.mT * self.head_size**-0.5).masked_fill(self.mask[:T, :T], float("-inf"))
        wei = self.attn_dropout(torch.softmax(wei, dim=-1))
        return self.proj((wei @ v).transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.ln_f(self.blocks(x)))


def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        probs = F.softmax(logits / temperature, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return idx


# --- 08 -----------------------------------------------------------------------------

def online_softmax(scores):
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros_like(m)
    for j in range(scores.shape[-1]):
        m_new = torch.maximum(m, scores[..., j])
        safe = torch.where(m_new == float("-inf"), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(scores[..., j] - safe)
        m = m_new
    return torch.exp(scores - m[..., None]) / l[..., None]


def tiled_attention(q, k, v, tile_size):
    T, hs = q.shape[-2], q.shape[-1]
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        qi = q[..., i0:i0 + tile_size, :]
        tq = qi.shape[-2]
        m = torch.full((*qi.shape[:-1], 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(qi)
        for j0 in range(0, i0 + tq, tile_size):
            kj, vj = k[..., j0:j0 + tile_size, :], v[..., j0:j0 + tile_size, :]
            s = qi @ kj.mT * hs**-0.5
            qpos = torch.arange(i0, i0 + tq, device=q.device)[:, None]
            kpos = torch.arange(j0, j0 + kj.shape[-2], device=q.device)[None, :]
            s = s.masked_fill(kpos > qpos, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ vj
            m = m_new
        out[..., i0:i0 + tq, :] = acc / l
    return out


class CachedSelfAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim=2)
            v = torch.cat([self.v_cache, v], dim=2)
        self.k_cache, self.v_cache = k[:, :, -self.block_size:], v[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        hide = torch.ones(T, L, dtype=torch.bool, device=x.device).triu(L - T + 1)
        wei = (q @ self.k_cache.mT / self.head_size**0.5).masked_fill(hide, float("-inf")).softmax(-1)
        return self.proj((wei @ self.v_cache).transpose(1, 2).reshape(B, T, -1))


CORRECT.update({"block": Block, "gpt": GPT, "generate": generate, "online_softmax": online_softmax,
                "tiled_attention": tiled_attention, "cached_attention": CachedSelfAttention})


def _block_weights(block):
    a = block.attn
    return (block.ln1.weight, block.ln1.bias, a.query.weight, a.key.weight, a.value.weight,
            a.proj.weight, a.proj.bias, block.ln2.weight, block.ln2.bias, block.mlp.net[0].weight,
            block.mlp.net[0].bias, block.mlp.net[2].weight, block.mlp.net[2].bias)


def _block_from(fn):
    class FromFnBlock(Block):
        def __init__(self, C, n_heads, block_size, dropout=0.0):
            super().__init__(C, n_heads, block_size, dropout)
            self.args = (n_heads, block_size, dropout)

        def forward(self, x):
            return fn(x, *_block_weights(self), *self.args)
    return FromFnBlock


def _gpt_from(fn):
    class FromFnGPT(GPT):
        def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
            super().__init__(vocab_size, C, n_heads, n_layers, block_size, dropout)
            self.n_heads = n_heads

        def forward(self, idx):
            stacked = [torch.stack(ws) for ws in zip(*(_block_weights(b) for b in self.blocks))]
            return fn(idx, self.token_embedding.weight, self.position_embedding.weight, *stacked,
                      self.ln_f.weight, self.ln_f.bias, self.lm_head.weight, self.lm_head.bias,
                      self.n_heads, self.block_size)
    return FromFnGPT


def _generate_from(fn):
    def generate_like(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
        tensors = {"tok": model.tok, "pos": model.pos, "mix": model.mix}
        return fn(tensors, idx.tolist(), max_new_tokens, block_size, temperature,
                  generator.initial_seed())
    return generate_like


def _cache_from(fn):
    class FromFnCache(CachedSelfAttention):
        def reset_cache(self):
            self.seen, self.chunks = None, []

        def forward(self, x):
            self.seen = x if self.seen is None else torch.cat([self.seen, x], dim=1)
            self.chunks.append(x.shape[1])
            out = fn(self.seen, self.query.weight, self.key.weight, self.value.weight,
                     self.proj.weight, self.proj.bias, self.n_heads, self.block_size, self.chunks)
            return out[:, -x.shape[1]:]
    return FromFnCache


_FROM_FN_07_08 = {"block": _block_from, "gpt": _gpt_from, "generate": _generate_from,
                  "cached_attention": _cache_from}


# --- 09: rotary positions, grouped key/value heads, a sliding window with a rolling cache ---

def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    i = torch.arange(half, dtype=x.dtype, device=x.device)
    angles = positions.to(x.dtype).view(-1, 1) * base ** (-2 * i / x.shape[-1])  # (T, half)
    cos, sin = angles.cos(), angles.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def grouped_query_attention(q, k, v, n_kv_heads, mask):
    group = q.shape[1] // n_kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    return torch.softmax(wei.masked_fill(mask, float("-inf")), dim=-1) @ v


class SlidingWindowAttention(nn.Module):
    def __init__(self, C, n_heads, n_kv_heads, head_size, window):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_size, self.window = n_heads, n_kv_heads, head_size, window
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_kv_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_kv_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None
        self.seen = 0

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t, n: t.view(B, T, n, self.head_size).transpose(1, 2)
        positions = torch.arange(self.seen, self.seen + T, device=x.device)
        q = apply_rope(split(self.query(x), self.n_heads), positions)
        k = apply_rope(split(self.key(x), self.n_kv_heads), positions)
        v = split(self.value(x), self.n_kv_heads)
        if self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim=2)
            v = torch.cat([self.v_cache, v], dim=2)
        L = k.shape[2]
        key_pos = torch.arange(self.seen + T - L, self.seen + T, device=x.device)
        hide = (key_pos.view(1, L) > positions.view(T, 1)) | (key_pos.view(1, L) <= positions.view(T, 1) - self.window)
        out = grouped_query_attention(q, k, v, self.n_kv_heads, hide)
        keep = max(L - (self.window - 1), 0)  # the last window - 1 positions (none when window = 1)
        self.k_cache, self.v_cache = k[:, :, keep:], v[:, :, keep:]
        self.seen += T
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))


CORRECT.update({"apply_rope": apply_rope, "grouped_query_attention": grouped_query_attention,
                "sliding_window_attention": SlidingWindowAttention})


def _window_from(fn):
    steps = getattr(fn, "steps", None)  # a catalogued mistake fed a chunk at a time (mistakes._window)

    class FromFnWindow(SlidingWindowAttention):
        def reset_cache(self):
            self.seen_x, self.chunks, self.stepper = None, [], None

        def forward(self, x):
            if steps is not None:
                if self.stepper is None:
                    self.stepper = steps(self.query.weight, self.key.weight, self.value.weight, self.proj.weight,
                                         self.proj.bias, self.n_heads, self.n_kv_heads, self.window)
                return self.stepper.step(x)
            self.seen_x = x if self.seen_x is None else torch.cat([self.seen_x, x], dim=1)
            self.chunks.append(x.shape[1])
            out = fn(self.seen_x, self.query.weight, self.key.weight, self.value.weight, self.proj.weight,
                     self.proj.bias, self.n_heads, self.n_kv_heads, self.window, self.chunks)
            return out[:, -x.shape[1]:]
    return FromFnWindow


_FROM_FN_07_08["sliding_window_attention"] = _window_from
