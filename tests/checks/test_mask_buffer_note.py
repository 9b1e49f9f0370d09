"""04 asks for the causal mask as a registered buffer: a Head that builds its mask in
forward on every call still passes, with a note that names it."""
import torch
import torch.nn as nn

from grader import check_head


class HeadMaskInForward(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).mT  # (B, T, T)
        if self.causal:
            wei = wei.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)  # (B, T, head_size)


class HeadWithBuffer(HeadMaskInForward):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__(C, head_size, block_size, causal)
        self.register_buffer("mask", torch.ones(block_size, block_size, dtype=torch.bool).triu(1))

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).mT  # (B, T, T)
        if self.causal:
            wei = wei.masked_fill(self.mask[:T, :T], float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)  # (B, T, head_size)


def shown(capsys, head, focus):
    """What the check cell shows for head."""
    check_head(head, focus)
    return capsys.readouterr().out


def test_a_mask_built_in_forward_is_named(capsys):
    out = shown(capsys, HeadMaskInForward, "causal")
    assert out.startswith("\u2713") and "no mask buffer" in out and "register_buffer" in out, out


def test_the_buffer_the_text_asks_for_gets_no_note(capsys):
    out = shown(capsys, HeadWithBuffer, "causal")
    assert out.startswith("\u2713") and "note" not in out, out


def test_an_encoder_head_needs_no_mask(capsys):
    out = shown(capsys, HeadMaskInForward, "encoder")
    assert out.startswith("\u2713") and "note" not in out, out


class HeadWithTrilBuffer(HeadMaskInForward):
    """The buffer under another name, as many write it (a lower-triangular matrix of ones)."""
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__(C, head_size, block_size, causal)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).mT  # (B, T, T)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)  # (B, T, head_size)


def test_a_buffer_under_another_name_gets_no_note(capsys):
    out = shown(capsys, HeadWithTrilBuffer, "causal")
    assert out.startswith("\u2713") and "note" not in out, out
