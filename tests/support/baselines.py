"""Answers that do no attention, for every exercise: zeros, an input returned, uniform,
identity or random weights, a GPT with constant logits, generate appending random or
constant tokens, a cache never read or never extended. They must earn at most a tenth of
each part's points (tests/checks/test_no_points_without_attention.py)."""
import torch
import torch.nn as nn

from grader.answers.correct import (GPT, Block, BatchedMultiHeadAttention, CachedSelfAttention, Head,
                     MultiHeadAttention)


def _hide(T, device):
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)  # (T, T) the future


def _random_weights(shape, mask, like):
    """Random weights normalised over the visible keys (mask True = hidden)."""
    w = torch.randn(shape, dtype=like.dtype, device=like.device)
    return torch.softmax(w.masked_fill(mask, float("-inf")), -1).nan_to_num(0.0)


def _uniform_weights(shape, mask, like):
    w = torch.zeros(shape, dtype=like.dtype, device=like.device)
    return torch.softmax(w.masked_fill(mask, float("-inf")), -1).nan_to_num(0.0)


def _identity_weights(shape, mask, like):
    eye = torch.eye(shape[-1], dtype=like.dtype, device=like.device).expand(shape)
    return eye.masked_fill(mask, 0.0)


def _bag():
    def random(x):
        T = x.shape[1]
        return _random_weights((T, T), _hide(T, x.device), x) @ x
    return {"zeros": torch.zeros_like, "x": lambda x: x.clone(), "random weights": random,
            "uniform everywhere": lambda x: x.mean(1, keepdim=True).expand_as(x).clone()}


def _weights():
    def lower_random(T):
        return _random_weights((T, T), _hide(T, "cpu"), torch.zeros(()))
    return {"identity": torch.eye, "zeros": lambda T: torch.zeros(T, T),
            "uniform 1/T": lambda T: torch.full((T, T), 1.0 / T), "random weights": lower_random}


def _softmaxes(causal):
    mask_of = (lambda s, m: _hide(s.shape[-1], s.device)) if causal else (lambda s, m: m)
    out = {"zeros": lambda s, *m: torch.zeros_like(s), "the scores": lambda s, *m: s.clone()}
    for name, fn in (("uniform", _uniform_weights), ("identity", _identity_weights),
                     ("random weights", _random_weights)):
        out[name] = (lambda fn: lambda s, *m: fn(s.shape, mask_of(s, m[0] if m else None), s))(fn)
    if causal:
        return {k: (lambda f: lambda scores: f(scores))(f) for k, f in out.items()}
    return {k: (lambda f: lambda scores, mask: f(scores, mask))(f) for k, f in out.items()}


def _sdpa():
    def weights(fn):
        def sdpa(q, k, v, mask=None):
            T = q.shape[-2]
            m = mask if mask is not None else torch.zeros(T, T, dtype=torch.bool, device=q.device)
            return fn((*q.shape[:-1], T), m.expand(*q.shape[:-1], T), q) @ v
        return sdpa
    return {"zeros": lambda q, k, v, mask=None: torch.zeros_like(v), "v": lambda q, k, v, mask=None: v.clone(),
            "uniform": weights(_uniform_weights), "random weights": weights(_random_weights)}


def _module(base, attend):
    """A subclass of the given module whose forward mixes the values with fixed weights."""
    class NoAttention(base):
        def forward(self, x):
            return attend(self, x)
    return NoAttention


def _head_like(values, proj=lambda self, t: t):
    def weights(fn):
        def attend(self, x):
            T = x.shape[1]
            mask = _hide(T, x.device) if self.causal else torch.zeros(T, T, dtype=torch.bool, device=x.device)
            return proj(self, fn((x.shape[0], T, T), mask.expand(x.shape[0], T, T), x) @ values(self, x))
        return attend
    return {"zeros": lambda self, x: proj(self, torch.zeros_like(values(self, x))),
            "values": lambda self, x: proj(self, values(self, x)),
            "uniform": weights(_uniform_weights), "random weights": weights(_random_weights)}


def _modules(base, attends):
    return {name: _module(base, fn) for name, fn in attends.items()}


def _gpt():
    V = lambda self: self.lm_head.out_features
    return _modules(GPT, {
        "constant logits": lambda self, idx: torch.zeros(*idx.shape, V(self), device=idx.device,
                                                         dtype=self.lm_head.weight.dtype),
        "uniform logits from the bias": lambda self, idx: self.lm_head.bias.expand(*idx.shape, V(self)).clone()})


def _generate():
    def random(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
        V = model.tok.shape[0]
        new = torch.randint(0, V, (idx.shape[0], max_new_tokens), generator=generator)
        return torch.cat([idx, new], dim=1)

    def constant(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
        return torch.cat([idx, torch.zeros(idx.shape[0], max_new_tokens, dtype=idx.dtype)], dim=1)

    def repeat_last(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
        return torch.cat([idx, idx[:, -1:].expand(-1, max_new_tokens)], dim=1)
    return {"random tokens": random, "constant tokens": constant, "the last token repeated": repeat_last}


def _online():
    def weights(fn):
        def softmax(scores):
            shape = scores.shape[:-1] + (scores.shape[-1],)
            return fn(shape, torch.zeros(shape, dtype=torch.bool, device=scores.device), scores)
        return softmax
    return {"zeros": torch.zeros_like, "the scores": lambda s: s.clone(), "uniform": weights(_uniform_weights),
            "random weights": weights(_random_weights)}


def _tiled():
    def weights(fn):
        def tiled(q, k, v, tile_size):
            T = q.shape[-2]
            return fn((*q.shape[:-1], T), _hide(T, q.device).expand(*q.shape[:-1], T), q) @ v
        return tiled
    return {"zeros": lambda q, k, v, t: torch.zeros_like(v), "v": lambda q, k, v, t: v.clone(),
            "uniform": weights(_uniform_weights), "random weights": weights(_random_weights)}


def _cache():
    class NeverRead(CachedSelfAttention):
        def forward(self, x):  # attention over the new tokens only
            self.reset_cache()
            return super().forward(x)

    class NeverExtended(CachedSelfAttention):
        def forward(self, x):  # the prompt's keys and values, never the later tokens'
            cache = (self.k_cache, self.v_cache)
            out = super().forward(x)
            if cache[0] is not None:
                self.k_cache, self.v_cache = cache
            return out

    class Zeros(CachedSelfAttention):
        def forward(self, x):
            return torch.zeros_like(x)
    return {"never read": NeverRead, "never extended": NeverExtended, "zeros": Zeros}


def _block():
    return _modules(Block, {"x": lambda self, x: x.clone(), "zeros": lambda self, x: torch.zeros_like(x),
                            "no attention": lambda self, x: x + self.mlp(self.ln2(x))})


_mha_values = lambda self, x: torch.cat([h.value(x) for h in self.heads], -1)
BASELINES = {
    "bag_of_words_loop": _bag(), "bag_of_words_matmul": _bag(), "running_average_weights": _weights(),
    "masked_softmax": _softmaxes(causal=False), "causal_weights": _softmaxes(causal=True),
    "head": _modules(Head, _head_like(lambda self, x: self.value(x))),
    "scaled_dot_product_attention": _sdpa(),
    "multi_head_attention": _modules(MultiHeadAttention, _head_like(
        _mha_values, lambda self, t: self.proj(t))),
    "batched_multi_head_attention": _modules(BatchedMultiHeadAttention, _head_like(
        lambda self, x: self.value(x), lambda self, t: self.proj(t))),
    "block": _block(), "gpt": _gpt(), "generate": _generate(), "online_softmax": _online(),
    "tiled_attention": _tiled(), "cached_attention": _cache(),
}


# --- 09: rotary positions, grouped key/value heads, a sliding window with a rolling cache ---

from grader.answers.correct import SlidingWindowAttention, apply_rope as _rope  # noqa: E402


def _rope_baselines():
    def fixed_turn(x, positions):  # every vector turned by one angle, whatever its position
        return _rope(x, torch.ones_like(positions))

    def random_turn(x, positions):  # new random angles on every call
        return _rope(x, torch.randint(0, 1000, positions.shape, device=positions.device))
    return {"x": lambda x, positions: x.clone(), "zeros": lambda x, positions: torch.zeros_like(x),
            "one angle for every position": fixed_turn, "random angles": random_turn}


def _gqa_baselines():
    def weights(fn):
        def gqa(q, k, v, n_kv_heads, mask):
            v = v.repeat_interleave(q.shape[1] // n_kv_heads, dim=1)  # (B, n_heads, T_k, head_size)
            return fn((*q.shape[:-1], v.shape[-2]), mask.expand(*q.shape[:-1], v.shape[-2]), q) @ v
        return gqa
    return {"zeros": lambda q, k, v, n, mask: torch.zeros_like(q), "q": lambda q, k, v, n, mask: q.clone(),
            "uniform": weights(_uniform_weights), "random weights": weights(_random_weights)}


def _window_baselines():
    class NeverRead(SlidingWindowAttention):
        def forward(self, x):  # attention over the new tokens only: the cache is emptied each time
            seen = self.seen
            self.reset_cache()
            self.seen = seen
            return super().forward(x)

    class OnlyItself(SlidingWindowAttention):
        def forward(self, x):  # each token's own value, merely projected
            B, T, C = x.shape
            v = self.value(x).view(B, T, self.n_kv_heads, self.head_size)
            v = v.repeat_interleave(self.n_heads // self.n_kv_heads, dim=2).reshape(B, T, -1)
            return self.proj(v)

    class Zeros(SlidingWindowAttention):
        def forward(self, x):
            return torch.zeros_like(x)
    return {"never read": NeverRead, "only itself": OnlyItself, "zeros": Zeros}


BASELINES.update({"apply_rope": _rope_baselines(), "grouped_query_attention": _gqa_baselines(),
                  "sliding_window_attention": _window_baselines()})
