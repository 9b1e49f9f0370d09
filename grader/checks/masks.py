"""The causal mask, which the notebooks give students and the checks use themselves."""
import torch


def causal_mask(T, device=None):
    """(T, T) bool, True above the diagonal: the future a token may not see."""
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)
