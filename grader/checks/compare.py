"""Comparing a student's output with the expected one: as float64 on the CPU, within a
check's tolerance, and where they differ most."""
import torch


def to_cpu64(t):
    if isinstance(t, torch.nn.Parameter):
        t = t.data
    return t.detach().to("cpu", torch.float64)


def safe_cpu64(t):
    """The tensor as float64 on the CPU, or None when it cannot be read (not a tensor, meta...)."""
    try:
        return to_cpu64(t) if isinstance(t, torch.Tensor) else None
    except Exception:
        return None


def close(a, b, tol):
    """Whether a and b agree within tol (NaN equal to NaN); False for other shapes."""
    if a.shape != b.shape:
        return False
    if a.dtype == b.dtype and a.device == b.device and a.is_floating_point():
        return bool(torch.allclose(a, b, equal_nan=True, **tol))  # the same test, without a report
    try:
        torch.testing.assert_close(a, b, equal_nan=True, check_dtype=False, **tol)
        return True
    except AssertionError:
        return False


def largest_difference(actual, expected):
    """One line: where the two tensors differ most."""
    diff = (actual - expected).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    idx = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    return (f"largest difference {float(diff[idx]):.4g} at index {idx}: "
            f"expected {float(expected[idx]):.6g}, got {float(actual[idx]):.6g}")
