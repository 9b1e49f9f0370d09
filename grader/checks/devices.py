"""Where and in what precision a check runs: its device (the argument, else $GRADER_DEVICE,
else the CPU), its dtype's tolerances, and its inputs moved there."""
import os

import torch

# (device type, dtype) -> tolerances for torch.testing.assert_close.
TOLERANCES = {
    ("cpu", torch.float32): dict(rtol=1e-4, atol=1e-5),
    ("cpu", torch.float64): dict(rtol=1e-7, atol=1e-9),
    ("cuda", torch.float32): dict(rtol=1e-3, atol=1e-4),
    ("cuda", torch.float64): dict(rtol=1e-7, atol=1e-9),
}
DEVICE_ENV = "GRADER_DEVICE"


def device_name(device=None):
    """The device a check runs on: the argument, else $GRADER_DEVICE, else the CPU."""
    return device or os.environ.get(DEVICE_ENV) or "cpu"


def resolve_device(device=None):
    """device_name's device, which torch must have."""
    name = device_name(device)
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"{DEVICE_ENV}/device asks for {name}, but torch sees no CUDA device")
    return dev


def tolerance(device, dtype):
    """The tolerances of a check run on device in dtype; ValueError, saying what the checks
    run in, for a precision or a device they have none for (float16, bfloat16, mps)."""
    kind = torch.device(device).type
    if (kind, dtype) not in TOLERANCES:
        short = lambda d: str(d).replace("torch.", "")
        dtypes = " or ".join(dict.fromkeys(short(d) for _, d in TOLERANCES))
        devices = " or ".join(dict.fromkeys(k for k, _ in TOLERANCES))
        raise ValueError(f"the checks run in {dtypes} on {devices}, not in {short(dtype)} on {kind}")
    return TOLERANCES[(kind, dtype)]


def to_device(inputs, device, dtype):
    """The inputs with every tensor on device, the floating ones in dtype."""
    out = {}
    for key, val in inputs.items():
        if isinstance(val, torch.Tensor):
            val = val.to(device=device, dtype=dtype if val.is_floating_point() else val.dtype)
        out[key] = val
    return out


def cpu(inputs):
    """The inputs with every tensor detached on the CPU."""
    return {k: v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def is_cuda_fault(err):
    """Whether err, or the student's error it wraps, is a CUDA error that ends this process's
    GPU work (a device-side assert: an index out of range on the GPU, most often): after one,
    every CUDA call in the process fails the same way, so nothing more can be checked there."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        name = getattr(err, "type_name", None) or type(err).__name__
        if name.rsplit(".", 1)[-1] == "AcceleratorError" or "device-side assert" in str(err):
            return True
        err = getattr(err, "err", None) or err.__cause__ or err.__context__
    return False

