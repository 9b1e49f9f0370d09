"""The output's first checks, before any invariant: the returned type, shape, dtype and
device, and NaN/inf; each problem a CheckError that says what came back and what was
expected."""
import torch

from grader.checks.calling import type_name
from grader.checks.feedback import CheckError


def shape_text(names):
    """"(B, T, C)": a shape's dimensions by name."""
    return "(" + ", ".join(names) + ")"


def check_tensor(exercise, out, inputs, shape_info):
    """Returned type, shape, dtype/device and finiteness: raise CheckError on the first problem."""
    shape, names = shape_info[0], shape_text(shape_info[1])
    want = f"a tensor of shape {tuple(shape)} = {names}"
    if out is None:
        raise CheckError(f"returned None; expected {want}.\n  Did you forget the `return`?")
    if isinstance(out, (list, tuple)):
        tensors = [o for o in out if isinstance(o, torch.Tensor)]
        fits = [i for i, o in enumerate(out) if isinstance(o, torch.Tensor) and tuple(o.shape) == tuple(shape)]
        if len(fits) == 1:  # the answer plus extras (running statistics, a cache): not parts to stack
            extra = f"\n  Item {fits[0]} has that shape: return it alone and keep the rest inside."
        elif out and len(tensors) == len(out) and len({tuple(o.shape) for o in tensors}) == 1:
            extra = " Stack them with torch.stack(...)."
        else:
            extra = ""
        raise CheckError(f"returned a {type(out).__name__} of {len(out)} items; expected {want}.{extra}")
    if isinstance(out, (bool, int, float, complex)):
        raise CheckError(f"returned a single {type(out).__name__} ({out!r}); expected {want}.")
    if type(out).__module__.startswith("numpy"):
        raise CheckError(f"returned a {type_name(out)}; expected {want}.\n"
                         "  Keep the computation in torch (no .numpy()).")
    if isinstance(out, torch.nn.Parameter):
        out = out.data
    if not isinstance(out, torch.Tensor):
        raise CheckError(f"returned a {type_name(out)}; expected {want}.")
    if type(out) is not torch.Tensor:
        raise CheckError(f"returned a {type_name(out)} (a Tensor subclass); return a plain torch.Tensor.")
    if tuple(out.shape) != tuple(shape):
        raise CheckError(f"returned shape {tuple(out.shape)}; expected {tuple(shape)} = {names}.")
    dev = input_device(inputs)
    if dev is not None and out.device != dev:
        raise CheckError(f"returned a tensor on {out.device}; the inputs are on {dev}.\n"
                         "  Create new tensors with device=x.device (or register a buffer).", finding="device")
    want_dtype = exercise.out_dtype(inputs) if exercise.out_dtype else input_dtype(inputs)
    if want_dtype is not None and out.dtype != want_dtype:
        if exercise.out_dtype:
            raise CheckError(f"returned dtype {out.dtype}; expected {want_dtype}.\n"
                             "  Keep torch's default dtype: no dtype=... when you create the tensor.",
                             finding="dtype")
        raise CheckError(f"returned dtype {out.dtype}; expected {want_dtype} like the inputs.\n"
                         "  Did you create a tensor without dtype=x.dtype?", finding="dtype")
    if out.is_floating_point() and not torch.isfinite(out).all():
        bad = (~torch.isfinite(out)).nonzero()[0].tolist()
        n = int((~torch.isfinite(out)).sum())
        raise CheckError(f"output has {n} NaN/inf value(s), the first at index {tuple(bad)}.")
    return out


def input_device(inputs):
    for val in inputs.values():
        if isinstance(val, torch.Tensor):
            return val.device
    return None


def input_dtype(inputs):
    for val in inputs.values():
        if isinstance(val, torch.Tensor) and val.is_floating_point():
            return val.dtype
    return None
