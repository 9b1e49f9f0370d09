"""Correct answers written the way a student would, and helpers that turn a catalogued
mistake into a student's function or module, for testing the checks."""
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
