"""AdamW for the notebooks' small training runs: the update of torch.optim.AdamW.

torch.optim.AdamW computes the same steps, but creating it imports torch's compiler
(torch._dynamo) the first time, about 1.5 s of CPU: more than notebook 07's whole
training. This one updates all parameters with one call per operation (torch's
_foreach functions), so a step costs a handful of calls however many parameters.
"""
import math

import torch


class AdamW:
    """opt = AdamW(model.parameters(), lr=3e-3); then per step opt.zero_grad(),
    loss.backward(), opt.step(). Defaults as torch.optim.AdamW: betas (0.9, 0.999),
    eps 1e-8, weight_decay 0.01 (decoupled: parameters shrink by lr * weight_decay)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if isinstance(params, torch.Tensor):
            raise TypeError("AdamW takes an iterable of parameters, e.g. model.parameters(), "
                            "not a single tensor")
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("AdamW got no parameters that require a gradient")
        if not (lr > 0 and eps >= 0 and weight_decay >= 0 and all(0 <= b < 1 for b in betas)):
            raise ValueError(f"invalid settings: lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}")
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]  # running mean of the gradient
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]  # and of its square

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self):
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        params = [self.params[i] for i in live]
        grads = [p.grad for p in params]
        exp_avg = [self.exp_avg[i] for i in live]
        exp_avg_sq = [self.exp_avg_sq[i] for i in live]
        self.steps += 1
        beta1, beta2 = self.betas
        bias1, bias2 = 1 - beta1**self.steps, 1 - beta2**self.steps
        if self.weight_decay:
            torch._foreach_mul_(params, 1 - self.lr * self.weight_decay)
        torch._foreach_lerp_(exp_avg, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, 1 - beta2)
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denom, math.sqrt(bias2))
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, exp_avg, denom, -self.lr / bias1)
