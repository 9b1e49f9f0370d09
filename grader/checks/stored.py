"""Stored outputs: what the student bundle's checks use instead of the answers.

The student bundle (`make student-bundle`, grader/instructor/bundle.py) ships the checks without the
reference implementations, the catalogued mistakes or the attention that the diagnosis
computes with its knobs turned (grader/answers/). The registry hands its checks a lookup
for each of those functions instead (stored_answers): its output on the inputs the
visible checks use, recorded from the real functions when the bundle is built, with the
mistakes' names and hints listed beside them (LISTING): the checks then pass a correct answer and name every
catalogued mistake exactly as in the course repository. A call whose inputs were never
recorded (a hidden check, or an analysis of an unusual answer) raises NotShipped, which
the checks treat as "nothing more to say".

This module imports only torch, hashlib and the registry's types; it is the same in the repository and in
the bundle, so a call is identified the same way when recorded and when looked up.
"""
import hashlib

TABLE = "stored_outputs.pt"  # in data/ of the bundle
LISTING = "answers"  # the table's entry that lists the stored functions and mistakes


class NotShipped(LookupError):
    """The bundle has no stored output for this call."""


def _feed(h, obj):
    import torch

    if isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu").contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(obj, torch.nn.Module):
        h.update(f"M{type(obj).__qualname__}".encode())
        for name, t in sorted(obj.state_dict().items()):
            h.update(name.encode())
            _feed(h, t)
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}".encode())
        for o in obj:
            _feed(h, o)
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}".encode())
        for k in sorted(obj, key=str):
            h.update(str(k).encode())
            _feed(h, obj[k])
    elif isinstance(obj, torch.device):
        h.update(b"device")  # where a call runs does not change its output
    elif obj is None or isinstance(obj, (bool, int, float, str, torch.dtype)):
        h.update(f"{type(obj).__name__}:{obj!r}".encode())
    elif callable(obj):
        h.update(f"F{getattr(obj, '__qualname__', type(obj).__qualname__)}".encode())
    else:
        h.update(f"O{type(obj).__qualname__}".encode())


def call_key(name, args, kwargs):
    """The identity of one call: the function's name and its arguments' values."""
    h = hashlib.sha256(name.encode())
    _feed(h, list(args))
    _feed(h, dict(kwargs))
    return h.hexdigest()


def to_entry(value):
    """What is stored for a call's result (plain data only: it is loaded weights_only)."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": value.detach().to("cpu").clone()}
    if isinstance(value, (list, tuple)):
        return {"sequence": [to_entry(v) for v in value], "tuple": isinstance(value, tuple)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"plain": value}
    raise TypeError(f"cannot store a {type(value).__qualname__}")


def raised_entry(err):
    return {"raises": type(err).__name__, "message": str(err)}


def _device_of(args, kwargs):
    import torch

    for obj in [*args, *kwargs.values()]:
        if isinstance(obj, torch.Tensor):
            return obj.device
        if isinstance(obj, dict):
            found = _device_of((), obj)
            if found is not None:
                return found
    return None


def from_entry(entry, device=None):
    if "raises" in entry:  # raised again with the same type name and message
        raise type(entry["raises"], (Exception,), {})(entry["message"])
    if "tensor" in entry:
        t = entry["tensor"].clone()
        return t.to(device) if device is not None else t
    if "sequence" in entry:
        items = [from_entry(e, device) for e in entry["sequence"]]
        return tuple(items) if entry["tuple"] else items
    return entry["plain"]


_TABLE = None


def _table():
    global _TABLE
    if _TABLE is None:
        import torch

        from grader.checks.fixed import references_dir

        path = references_dir().parent / TABLE
        _TABLE = torch.load(path, weights_only=True) if path.exists() else {}
    return _TABLE


def lookup(name, args, kwargs):
    """The stored output of name(*args, **kwargs), on the device of its inputs."""
    entry = _table().get(call_key(name, args, kwargs))
    if entry is None:
        raise NotShipped(f"{name}: this call is answered only by the course's grader "
                         "(hidden checks run when your work is graded)")
    return from_entry(entry, _device_of(args, kwargs))


def function(name):
    """A stand-in for a function the bundle does not ship."""
    def stored(*args, **kwargs):
        return lookup(name, args, kwargs)
    stored.__name__ = stored.__qualname__ = name.rsplit(".", 1)[-1]
    return stored


def stored_answers():
    """The answers as the bundle's checks receive them (grader/checks/registry.py): each
    function a lookup of its stored outputs, each mistake its name and hint and a lookup."""
    from grader.checks.registry import Answers, Mistake

    listing = _table().get(LISTING, {"reference": [], "mistakes": {}, "knobs": []})
    mistakes = {key: tuple(Mistake(k, name, hint, function(stored_name))
                           for stored_name, k, name, hint in catalogue)
                for key, catalogue in listing["mistakes"].items()}
    return Answers(reference={n: function(f"reference.{n}") for n in listing["reference"]},
                   mistakes=mistakes, knobs={n: function(f"knobs.{n}") for n in listing["knobs"]})
