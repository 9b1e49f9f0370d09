"""Run a student's function or module on a prepared call, and nothing else.

This file imports only torch: the verification sandbox copies it next to the student's
code and uses it there, so a check calls the student's code the same way inside the
notebook's kernel and inside the sandbox.

A call is a plain dict:
    {"kind": "function", "args": [...]}
    {"kind": "module", "ctor": [...], "ctor_kw": {...}, "params": {name: tensor},
     "param_hint": "...", "x": tensor}
"""
import torch


class ParameterMismatch(Exception):
    """The student's module does not have the parameters the exercise asks for."""


def load_parameters(model, params, hint):
    have = {n: tuple(p.shape) for n, p in model.named_parameters()}
    want = {n: tuple(p.shape) for n, p in params.items()}
    if have != want:
        fmt = lambda d: ", ".join(f"{n} {s}" for n, s in sorted(d.items())) or "none"
        extra = "\n  Did you leave bias=True?" if any(n.endswith("bias") for n in set(have) - set(want)) else ""
        raise ParameterMismatch(f"parameters do not match {hint}.\n  expected: {fmt(want)}\n"
                                f"  yours:    {fmt(have)}{extra}")
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])


def execute(student, call):
    if call["kind"] == "function":
        return student(*call["args"])
    x = call["x"]  # (B, T, C)
    model = student(*call["ctor"], **call["ctor_kw"]).to(x.device, x.dtype)
    load_parameters(model, call["params"], call["param_hint"])
    with torch.no_grad():
        return model(x)
