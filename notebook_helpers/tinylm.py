"""A tiny next-character model around any attention module, to see what attention learns.

one learned vector per (character, position) pair -> attention module -> linear layer to the
vocabulary. A character at position 3 and the same character at position 4 are two different
vectors, so the attention can tell where a token is; notebook 07 builds the usual way instead,
a token table and a position table added together.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F

from notebook_helpers.text import get_batch


class TinyLM(nn.Module):
    def __init__(self, vocab_size, C, block_size, attention, out_dim):
        super().__init__()
        self.block_size = block_size
        self.embedding = nn.Embedding(vocab_size * block_size, C)  # row i * block_size + t: character i at position t
        self.attention = attention  # (B, T, C) -> (B, T, out_dim)
        self.lm_head = nn.Linear(out_dim, vocab_size)

    def embed(self, idx):
        """(B, T) character ids -> (B, T, C): the vector of each character at its position."""
        rows = idx * self.block_size + torch.arange(idx.shape[1], device=idx.device)  # (B, T) one row per pair
        return self.embedding(rows)  # (B, T, C)

    def forward(self, idx):
        return self.lm_head(self.attention(self.embed(idx)))  # (B, T, vocab_size)


def train(model, data, steps=300, batch_size=32, block_size=16, lr=1e-2, seed=0):
    """AdamW on next-character prediction; returns the loss of every step."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        chunk = get_batch(data, batch_size, block_size + 1, generator=gen)  # (B, T + 1)
        idx, targets = chunk[:, :-1], chunk[:, 1:]  # (B, T) each
        logits = model(idx)  # (B, T, vocab_size)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
