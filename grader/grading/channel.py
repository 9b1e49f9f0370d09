"""The kernel channel: call the student's objects inside their kernel, from outside it.

The trusted grading process never runs student code. To check a function or class, it
asks the kernel to run a short piece of code carrying the call (plain tensors and
numbers, see grader/checks/student_call.py, saved by torch and base64-encoded): the code looks
the object up by name in the notebook's namespace, runs the call and saves the result
as a file in the kernel's working folder. The channel's own code (student_call.py and
the kernel side below) is sent to a kernel once, as the module `_grading_channel`;
every call after that carries only its data. The grading process reads the reply file
(through /proc/<pid>/root when the kernel lives in a sandbox's mount namespace), without
following links, as untrusted data:
- the file is bounded in size, compressed and uncompressed, before anything parses it,
  and its pickle in parse cost (objects and nesting, counted on its opcodes without
  building anything), since `weights_only=True` bounds what a pickle may build, not how
  much of it;
- it is loaded with `weights_only=True` (no pickled code);
- only plain dense tensors (exact `torch.Tensor`, or an `nn.Parameter`'s data, strided,
  not quantized), None, numbers and lists of such tensors are accepted as results;
  anything else is described by a short text the checks turn into a message.
Errors of the student's code cross as data: the exception's type, its whole message,
the student's line and the exception's own fields (a ParameterMismatch's expected and
actual parameter shapes), so graded feedback says what JupyterLab says.
A reply that breaks any of these rules is that student's failure, with its reason,
never an exception out of the grading loop. The student's code can change what the
kernel side does (it runs in the same kernel), but all it can ever send back is data
that the checks then judge on inputs the grader chose.
"""
import base64
import io
import itertools
import os
import pickletools
import stat
import zipfile
from pathlib import Path

from grader.checks.core import RemoteError

MAX_REPLY_BYTES = 16 * 2**20  # compressed, as written by the kernel
MAX_UNPACKED_BYTES = 64 * 2**20  # inside the zip
MAX_ENTRIES = 64
MAX_PICKLE_BYTES = 2**20  # the reply's pickle (tensors' data are entries of their own)
MAX_PICKLE_OBJECTS = 100_000  # objects the pickle may build
MAX_PICKLE_DEPTH = 64  # objects open at once on the pickle's stack (nesting)
MAX_MESSAGE = 4000  # characters of an error message
MODULE = "_grading_channel"
STUDENT_CALL = Path(__file__).resolve().parent.parent / "checks" / "student_call.py"

# Runs in the student's kernel, as module _grading_channel beside student_call's source
# (installed once per kernel, see INSTALL). It imports only torch and writes one file per call.
KERNEL_SIDE = r'''
def grading_call(name, call_b64, reply_path, mode):
    import base64, io, traceback
    import torch
    from IPython import get_ipython

    namespace = get_ipython().user_ns

    def describe(err):
        frames = [f for f in traceback.extract_tb(err.__traceback__)
                  if "ipykernel" in f.filename or f.filename.startswith("<ipython")]
        line = f"{frames[-1].lineno}: {frames[-1].line}" if frames and frames[-1].line else None
        fields = getattr(err, "fields", None)
        return {"error": {"type": type(err).__name__, "message": str(err)[:%(max_message)d],
                          "line": line, "fields": fields if isinstance(fields, dict) else {}}}

    def plain(out):
        if isinstance(out, torch.nn.Parameter) and type(out) is torch.nn.Parameter:
            out = out.data
        if type(out) is torch.Tensor:
            if out.layout != torch.strided or out.is_quantized or out.is_nested:
                return {"opaque": f"torch.Tensor (a {out.layout} tensor; return a plain dense tensor)"}
            return {"out": out.detach().to("cpu").clone(), "device": str(out.device)}
        if isinstance(out, torch.Tensor):
            return {"opaque": f"{type(out).__module__}.{type(out).__qualname__} (a Tensor subclass)"}
        if out is None or type(out) in (int, float, bool):
            return {"out": out}
        if type(out) in (list, tuple) and all(type(o) is torch.Tensor for o in out):
            return {"out": [o.detach().to("cpu").clone() for o in out[:64]]}
        return {"opaque": f"{type(out).__module__}.{type(out).__qualname__}"}

    request = torch.load(io.BytesIO(base64.b64decode(call_b64)), weights_only=True)
    call, device = request["call"], request["device"]
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v
    call = {k: ([move(a) for a in v] if k == "args" else
                {n: move(t) for n, t in v.items()} if k == "params" else move(v))
            for k, v in call.items()}
    student = namespace.get(name)
    if student is None:
        reply = {"error": {"type": "NameError", "message": f"name {name!r} is not defined",
                           "line": None, "fields": {"undefined": True}}}
    else:
        try:
            if mode == "facts":
                reply = {"facts": code_facts(student, call)}
            else:
                out, changed = execute_watched(student, call)
                reply = plain(out)
                reply["changed"] = changed
        except BaseException as err:
            reply = describe(err)
    torch.save(reply, reply_path)
''' % {"max_message": MAX_MESSAGE}

# Installs the channel's module in a kernel; leaves no name behind in the notebook. It runs
# in the notebook's namespace, so it looks up no global name there (`from torch import *`
# binds compile, a student may bind exec, open, print or len): the import statement and the
# builtins module only.
INSTALL = r'''
def __grading_install(source):
    import builtins, sys, types
    module = types.ModuleType(%(module)r)
    builtins.exec(builtins.compile(source, "<grading_channel>", "exec"), module.__dict__)
    sys.modules[%(module)r] = module
__grading_install(%%r)
del __grading_install
''' % {"module": MODULE}
# A call: the module is found by the import statement (sys.modules first), not by a name.
CALL = "import %(module)s as __grading_channel\n__grading_channel.grading_call(%%r, %%r, %%r, %%r)\n" \
       "del __grading_channel\n" % {"module": MODULE}


def channel_source():
    """The code of the kernel's channel module: student_call.py and the kernel side."""
    return STUDENT_CALL.read_text() + "\n" + KERNEL_SIDE


class MalformedReply(Exception):
    """The kernel's answer is not something the checks may read."""


def _read_regular_file(path, limit):
    """The bytes of a regular file, never following a link or blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise MalformedReply("no answer came back from the kernel") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MalformedReply("the answer is not a regular file")
        if info.st_size > limit:
            raise MalformedReply(f"the answer is {info.st_size / 2**20:.0f} MiB; at most "
                                 f"{limit // 2**20} MiB are read")
        return f.read(limit + 1)


def read_reply(path, torch):
    """The reply file as plain data, or MalformedReply with the reason."""
    data = _read_regular_file(path, MAX_REPLY_BYTES)
    if len(data) > MAX_REPLY_BYTES:
        raise MalformedReply(f"the answer is larger than {MAX_REPLY_BYTES // 2**20} MiB")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except zipfile.BadZipFile:
        raise MalformedReply("the answer is not a saved tensor") from None
    unpacked = sum(e.file_size for e in entries)
    if len(entries) > MAX_ENTRIES or unpacked > MAX_UNPACKED_BYTES:
        raise MalformedReply(f"the answer unpacks to {unpacked / 2**20:.0f} MiB in {len(entries)} "
                             f"parts; at most {MAX_UNPACKED_BYTES // 2**20} MiB are read")
    check_pickle_cost(_pickle_of(data, entries))
    try:
        reply = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:
        raise MalformedReply(f"the answer could not be read: {type(err).__name__}") from None
    return _validate(reply, torch)


def _pickle_of(data, entries):
    """The bytes of the reply's pickle (archive/data.pkl), read no further than the bound."""
    pickles = [e for e in entries if e.filename.endswith("/data.pkl") or e.filename == "data.pkl"]
    if len(pickles) != 1:
        raise MalformedReply("the answer is not a saved tensor")
    with zipfile.ZipFile(io.BytesIO(data)) as archive, archive.open(pickles[0]) as f:
        raw = f.read(MAX_PICKLE_BYTES + 1)
    if len(raw) > MAX_PICKLE_BYTES:
        raise MalformedReply(f"the answer's structure is larger than {MAX_PICKLE_BYTES // 2**10} KiB "
                             "(tensors aside); it was not read")
    return raw


# opcodes that leave an object on the stack without making a new one
_NOT_NEW = {"GET", "BINGET", "LONG_BINGET", "DUP", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
            "APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}


def check_pickle_cost(raw):
    """MalformedReply unless the pickle builds at most MAX_PICKLE_OBJECTS objects, nested at
    most MAX_PICKLE_DEPTH deep. Counted on its opcodes (pickletools), building nothing: the
    stack of objects not yet closed into a container is the nesting."""
    objects, depth, marks = 0, 0, []
    try:
        for op, _, _ in pickletools.genops(raw):
            before, after = op.stack_before, op.stack_after
            if pickletools.stackslice in before:  # pops everything down to the last MARK
                depth = (marks.pop() if marks else 0) - before.index(pickletools.markobject)
            else:
                depth -= len(before)
            if op.name == "MARK":
                marks.append(depth)
                continue
            depth = max(0, depth) + len(after)
            objects += bool(after) and op.name not in _NOT_NEW
            if objects > MAX_PICKLE_OBJECTS or depth + len(marks) > MAX_PICKLE_DEPTH:
                raise MalformedReply(
                    f"the answer's structure holds more than {MAX_PICKLE_OBJECTS} objects or is "
                    f"nested more than {MAX_PICKLE_DEPTH} deep; it was not read")
    except ValueError as err:  # not a pickle pickletools can walk
        raise MalformedReply(f"the answer could not be read: {str(err)[:100]}") from None


def _plain_tensor(t, torch):
    return (type(t) is torch.Tensor and t.layout == torch.strided and not t.is_quantized
            and not t.is_nested)


def _short(text, n=300):
    return text[:n] if isinstance(text, str) else ""


MAX_ITEMS = 5000


def plain_data(obj, budget=None, depth=0):
    """obj if it is plain data (None, bool, int, float, short str, lists and str-keyed
    dicts of them, bounded in depth and size); MalformedReply otherwise."""
    budget = budget if budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0 or depth > 8:
        raise MalformedReply("the answer holds too much data")
    if obj is None or type(obj) in (bool, int, float):
        return obj
    if type(obj) is str:
        return obj[:500]
    if type(obj) in (list, tuple):
        return [plain_data(o, budget, depth + 1) for o in obj]
    if type(obj) is dict and all(type(k) is str for k in obj):
        return {k[:200]: plain_data(v, budget, depth + 1) for k, v in obj.items()}
    raise MalformedReply("the answer is not plain data")


def _validate(reply, torch):
    if not isinstance(reply, dict):
        raise MalformedReply("the answer is not a reply")
    if "facts" in reply:
        return {"facts": plain_data(reply["facts"])}
    if "error" in reply:
        err = reply["error"] if isinstance(reply["error"], dict) else {}
        line = err.get("line")
        fields = err.get("fields") if isinstance(err.get("fields"), dict) else {}
        return {"error": {"type": _short(err.get("type"), 80) or "Error",
                          "message": _short(err.get("message"), MAX_MESSAGE),
                          "line": _short(line) if isinstance(line, str) else None,
                          "fields": plain_data(fields)}}
    if "opaque" in reply:
        return {"opaque": _short(reply["opaque"], 200) or "object",
                "changed": plain_data(reply.get("changed") or [])}
    if "out" not in reply:
        raise MalformedReply("the answer has no result")
    out = reply["out"]
    if isinstance(out, torch.Tensor):
        if not _plain_tensor(out, torch):
            raise MalformedReply("the answer is not a plain dense tensor")
    elif isinstance(out, list):
        if not all(_plain_tensor(o, torch) for o in out):
            raise MalformedReply("the answer is not a list of plain dense tensors")
    elif not (out is None or type(out) in (int, float, bool)):
        raise MalformedReply("the answer is not a tensor")
    device = reply.get("device", "cpu")
    return {"out": out, "device": device if isinstance(device, str) and len(device) < 32 else "cpu",
            "changed": plain_data(reply.get("changed") or [])}


def opaque(description):
    """A stand-in for what the student returned, whose type reads as the description
    ("module.Name (a note)"), so the checks' messages name it."""
    name, _, note = description.partition(" ")
    module, _, qualname = name.rpartition(".")
    cls = type(qualname or "object", (), {})
    cls.__module__, cls.__qualname__ = module, f"{qualname} {note}".strip()
    return cls()


class KernelChannel:
    """Calls into one kernel through `run_code(code) -> None or a RemoteError`.

    folder: the kernel's working folder as the kernel sees it; host_root: where the
    kernel's root is seen from here ("" when it shares ours, /proc/<pid>/root when it
    lives in a sandbox); run_code: runs code in the kernel (the grading preprocessor
    passes its own cell runner, with timeouts)."""

    def __init__(self, run_code, folder, device="cpu", host_root=""):
        import torch

        self.torch, self.run_code, self.device = torch, run_code, device
        self.folder, self.host_root = str(folder), host_root
        self.installed = False  # whether the kernel has the channel's module (sent once)
        self.counter = itertools.count()

    def student(self, name):
        """The student's object as the checks see it (grader.checks.core.RemoteStudent), for
        one check. A name the notebook does not define stays undefined for the rest of the
        check (no code of the student's runs while every call fails at the lookup), so the
        kernel is asked once, not for each of the check's calls and facts."""
        from grader.checks.core import RemoteStudent

        undefined = []

        def ask(spec, mode):
            if undefined:
                raise undefined[0]
            try:
                return self.call(name, spec, mode=mode)
            except RemoteError as err:
                if err.type_name == "NameError" and err.fields.get("undefined") is True:
                    undefined.append(err)
                raise

        def call(spec):
            out, student.changed = ask(spec, "call")
            return out

        student = RemoteStudent(name, call, lambda spec: ask(spec, "facts"))
        return student

    def call(self, name, spec, mode="call"):
        """(the student's result, the inputs it changed in place) for one call, or the facts
        about the student's code (mode "facts"); RemoteError describing what went wrong."""
        torch = self.torch
        reply_path = os.path.join(self.folder, f".grading-reply-{next(self.counter)}.pt")
        host_path = self.host_root + reply_path
        cpu = lambda v: v.detach().cpu() if isinstance(v, torch.Tensor) else v
        spec = {k: ([cpu(a) for a in v] if k == "args" else
                    {p: cpu(t) for p, t in v.items()} if k == "params" else cpu(v))
                for k, v in spec.items()}
        buf = io.BytesIO()
        torch.save({"call": spec, "device": self.device}, buf)
        payload = base64.b64encode(buf.getvalue()).decode()
        code = CALL % (name, payload, reply_path, mode)
        if not self.installed:
            code = INSTALL % channel_source() + code
        try:
            problem = self.run_code(code)  # None, or a RemoteError (a timeout, say)
            if problem is not None:
                raise problem
            try:
                reply = read_reply(host_path, torch)
            except MalformedReply as err:
                raise RemoteError("MalformedReply", str(err)) from None
            self.installed = True
        finally:
            try:
                os.unlink(host_path)
            except OSError:
                pass
        if "error" in reply:
            e = reply["error"]
            raise RemoteError(e["type"], e["message"], e["line"], e["fields"])
        if mode == "facts":
            return reply.get("facts")
        if "opaque" in reply:
            return opaque(reply["opaque"]), reply["changed"]
        out = reply["out"]
        if isinstance(out, torch.Tensor) and reply["device"] != "cpu":
            try:
                out = out.to(reply["device"])
            except Exception:
                pass  # a device name we do not have: the device check names it
        return out, reply["changed"]
