"""notebook_helpers.AdamW takes exactly the steps of torch.optim.AdamW."""
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

from notebook_helpers import AdamW


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(20, 16), nn.LayerNorm(16), nn.Linear(16, 64), nn.GELU(),
                         nn.Linear(64, 20))


def _train(model, opt, steps=30):
    x = torch.randint(0, 20, (8, 12), generator=torch.Generator().manual_seed(1))  # (B, T)
    for _ in range(steps):
        loss = F.cross_entropy(model(x).flatten(0, 1), x.roll(1, 1).flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


@pytest.mark.parametrize("settings", [dict(lr=3e-3), dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6,
                                                          weight_decay=0.1)])
def test_same_parameters_as_torch_adamw(settings):
    ours, theirs = _model(), _model()
    _train(ours, AdamW(ours.parameters(), **settings))
    _train(theirs, torch.optim.AdamW(theirs.parameters(), **settings))
    before = _model()
    assert not torch.equal(ours[-1].weight, before[-1].weight)  # it trained
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_frozen_parameters_and_missing_gradients_are_left_alone():
    model = _model()
    model[0].weight.requires_grad_(False)
    frozen, unused = model[0].weight.clone(), nn.Parameter(torch.ones(3))
    opt = AdamW(list(model.parameters()) + [unused], lr=1e-2)
    _train(model, opt, steps=3)
    assert torch.equal(model[0].weight, frozen) and torch.equal(unused, torch.ones(3))


def test_zero_grad_keeps_or_drops_the_gradient():
    model = _model()
    opt = AdamW(model.parameters())
    model(torch.tensor([[1, 2]])).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="iterable of parameters"):
        AdamW(torch.zeros(3, requires_grad=True))
    with pytest.raises(ValueError, match="no parameters"):
        AdamW([torch.zeros(3)])
    with pytest.raises(ValueError, match="lr=-1"):
        AdamW(_model().parameters(), lr=-1)


def test_creating_it_does_not_import_the_compiler():
    code = ("import sys, torch\nfrom notebook_helpers import AdamW\n"
            "p = torch.nn.Parameter(torch.ones(2)); opt = AdamW([p])\n"
            "p.sum().backward(); opt.step(); opt.zero_grad()\n"
            "print('torch._dynamo' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
