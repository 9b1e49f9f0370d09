"""Runs inside the verification sandbox: the student's solution cells, then calls.

Copied into the sandbox's job folder with student_call.py and started with
`python -S -B sandbox_runner.py SITE_PACKAGES LIMITS_JSON SKIP_JSON`. It imports nothing
from the course. Protocol on the original stdin/stdout: frames of a 4-byte big-endian
length and a torch.save payload. Anything the student prints goes to stderr.
Results are plain: a torch.Tensor of exact type (moved to the CPU), None, a number, a
list of plain tensors, or a description of anything else; errors as their type name,
message and line.
"""
import io
import json
import os
import resource
import struct
import sys
import traceback


def _frames():
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the student's prints go to stderr, never into the protocol
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    return proto_in, proto_out


def _send(out, obj, torch):
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    out.write(struct.pack(">I", len(data)) + data)
    out.flush()


def _recv(inp, torch):
    head = inp.read(4)
    if len(head) < 4:
        return None
    data = inp.read(struct.unpack(">I", head)[0])
    return torch.load(io.BytesIO(data), weights_only=True)


def _limit(limits):
    for name, value in limits.items():
        res = getattr(resource, name)
        resource.setrlimit(res, (value, value))


def _error(err):
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename.startswith("<cell")]
    line = f"{frames[-1].lineno}: {frames[-1].line}" if frames and frames[-1].line else None
    return {"type": type(err).__name__, "message": str(err).splitlines()[0][:300] if str(err) else "",
            "line": line}


SUSPECT_PATHS = ("gradebook", "references", "solutions", "submitted", "autograded", ".status", ".git")
SUSPECT_EVENTS = ("sqlite3.connect", "socket.connect", "socket.bind", "subprocess.Popen",
                  "os.system", "os.exec", "os.posix_spawn", "os.fork", "ctypes.dlopen")


def _watch(incidents):
    """An audit hook (it cannot be removed) noting attempts to reach grading files,
    databases, the network or other programs."""
    def hook(event, args):
        if len(incidents) > 20:
            return
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            path = os.fsdecode(args[0])
            if any(s in path for s in SUSPECT_PATHS):
                incidents.append(f"tried to open {path[:120]}")
        elif event in SUSPECT_EVENTS:
            incidents.append(f"tried {event}")
    sys.addaudithook(hook)


def _plain(out, torch):
    if type(out) is torch.Tensor:
        return {"out": out.detach().cpu(), "device": str(out.device)}
    if isinstance(out, torch.Tensor):
        return {"opaque": f"{type(out).__module__}.{type(out).__qualname__} (a Tensor subclass)"}
    if out is None or type(out) in (int, float, bool):
        return {"out": out}
    if type(out) in (list, tuple) and all(type(o) is torch.Tensor for o in out):
        return {"out": [o.detach().cpu() for o in out]}
    own_eq = type(out).__eq__ is not object.__eq__ and type(out).__module__ == "__main__"
    return {"opaque": f"{type(out).__module__}.{type(out).__qualname__}"
                      + (" (an object with its own __eq__)" if own_eq else "")}


def main():
    site_packages, limits, skip = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
    sys.path[:0] = [os.getcwd()] + site_packages.split(os.pathsep)
    proto_in, proto_out = _frames()
    _limit(limits)
    import torch
    import student_call

    send = lambda obj: _send(proto_out, obj, torch)
    with open("cells.json") as f:
        cells = json.load(f)
    os.remove("cells.json")  # nothing for the student's code to find
    namespace = {"__name__": "__main__"}
    incidents = []
    watched = {"torch": torch, "torch.testing": torch.testing, "torch.Tensor": torch.Tensor,
               "torch.nn.functional": torch.nn.functional}
    before = {name: dict(vars(obj)) for name, obj in watched.items()}
    _watch(incidents)
    for i, cell in enumerate(cells):
        if i in skip:
            continue
        send({"event": "cell", "index": i})
        try:
            exec(compile(cell["source"], f"<cell {cell['id']}>", "exec"), namespace)
        except SystemExit as err:
            incidents.append(f"{cell['id']}: sys.exit({err.code}) in a solution cell")
        except BaseException as err:
            incidents.append(f"{cell['id']}: {type(err).__name__} while defining the solution")
    for name, obj in watched.items():  # rebinding torch's functions is never part of an answer
        changed = sorted(k for k, v in vars(obj).items() if k in before[name] and v is not before[name][k])
        if changed:
            incidents.append(f"solution code rebinds {name}.{', '.join(changed[:5])}")
    if getattr(torch._C, "_len_torch_function_stack", lambda: 0)() > 0:
        incidents.append("solution code leaves a torch function mode active")
    send({"event": "ready", "incidents": list(incidents)})
    reported = len(incidents)
    while True:
        request = _recv(proto_in, torch)
        if request is None:
            return
        obj = namespace.get(request["name"])
        if obj is None:
            send({"error": {"type": "NameError", "message": f"name {request['name']!r} is not defined",
                            "line": None}, "incidents": []})
            continue
        call = request["call"]
        if request.get("facts"):  # plain facts about the student's code, no call
            try:
                reply = {"facts": student_call.code_facts(obj, call)}
            except BaseException as err:
                reply = {"facts": None, "note": type(err).__name__}
            reply["incidents"], reported = incidents[reported:], len(incidents)
            send(reply)
            continue
        for key in ("args",):
            if key in call:
                call[key] = [a.to(request["device"]) if isinstance(a, torch.Tensor) else a for a in call[key]]
        if "x" in call:
            call["x"] = call["x"].to(request["device"])
            call["params"] = {k: v.to(request["device"]) for k, v in call["params"].items()}
        try:
            out, changed = student_call.execute_watched(obj, call)
            reply = _plain(out, torch)
            reply["changed"] = changed
        except BaseException as err:  # SystemExit included: the student's code may not stop us
            reply = {"error": _error(err)}
            if isinstance(err, MemoryError) or "allocate memory" in str(err):
                incidents.append(f"{request['name']}: hit the memory limit")
            elif isinstance(err, SystemExit):
                incidents.append(f"{request['name']}: called sys.exit")
        reply["incidents"], reported = incidents[reported:], len(incidents)
        send(reply)


if __name__ == "__main__":
    main()
