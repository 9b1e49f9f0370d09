"""Run a student's function or module on a prepared call, and nothing else.

This file imports only torch: the verification sandbox copies it next to the student's
code and uses it there, so a check calls the student's code the same way inside the
notebook's kernel and inside the sandbox.

A call is a plain dict:
    {"kind": "function", "args": [...]}
    {"kind": "module", "ctor": [...], "ctor_kw": {...}, "params": {name: tensor},
     "param_hint": "...", "x": tensor, "eval": bool (optional: call model.eval() first),
     "grad_weight": tensor (optional: return the gradient of (out * grad_weight).sum() by x)}
    {"kind": "function", ..., "watch": {...}}   (optional: see _watched)
    {"kind": "stream", <as "module">, "chunks": [n, ...]}   x fed n tokens at a time
        (optional "report": {"n_heads", "n_kv_heads"}: return held_report() of the module
        after the stream instead of its outputs)
    {"kind": "generate", "model": {"tok", "pos", "mix"}, "idx": [[id, ...], ...],
     "max_new_tokens": int, "block_size": int, "temperature": float, "seed": int}
"""
import builtins
import contextlib

import torch


class ParameterMismatch(Exception):
    """The student's module does not have the parameters the exercise asks for.

    fields: {"expected": {name: shape}, "yours": {name: shape}}, shapes as lists of ints
    (plain data, so the kernel channel carries them as they are)."""

    def __init__(self, message, expected, yours):
        super().__init__(message)
        self.fields = {"expected": {n: list(s) for n, s in expected.items()},
                       "yours": {n: list(s) for n, s in yours.items()}}


def load_parameters(model, params, hint):
    have = {n: tuple(p.shape) for n, p in model.named_parameters()}
    want = {n: tuple(p.shape) for n, p in params.items()}
    if have != want:
        fmt = lambda d: ", ".join(f"{n} {s}" for n, s in sorted(d.items())) or "none"
        extra = "\n  Did you leave bias=True?" if any(
            n.endswith(".bias") and n[:-5] + ".weight" in want for n in set(have) - set(want)) else ""
        raise ParameterMismatch(f"parameters do not match {hint}.\n  expected: {fmt(want)}\n"
                                f"  yours:    {fmt(have)}{extra}", want, have)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])


def execute(student, call):
    layouts = _standard_layouts_watched() if call.get("watch") else _standard_layouts()
    with layouts, full_float32():
        return _execute(student, call)


@contextlib.contextmanager
def full_float32():
    """float32 matmuls at full precision while the student's code runs, whatever the notebook
    set (`torch.set_float32_matmul_precision("high")` or "medium", `allow_tf32 = True`, torch
    2.9+'s `fp32_precision = "tf32"`): TF32 on CUDA, and bf16 on CPUs with AMX (oneDNN), round
    products far beyond the float32 tolerances. Set through torch 2.9+'s per-backend API, which
    reads and restores the setting whichever API made it (the legacy flag cannot read a setting
    made by the new one); on an older torch, CUDA's allow_tf32."""
    pinned = []
    for backend in (getattr(torch.backends.cuda, "matmul", None),
                    getattr(getattr(torch.backends, "mkldnn", None), "matmul", None)):
        if backend is not None and hasattr(backend, "fp32_precision"):
            pinned.append((backend, "fp32_precision", backend.fp32_precision, "ieee"))
    if not pinned and hasattr(torch.backends.cuda.matmul, "allow_tf32"):
        pinned.append((torch.backends.cuda.matmul, "allow_tf32", torch.backends.cuda.matmul.allow_tf32, False))
    for backend, name, _, value in pinned:
        setattr(backend, name, value)
    try:
        yield
    finally:
        for backend, name, before, _ in pinned:
            setattr(backend, name, before)


def _standard_layouts():
    """F.scaled_dot_product_attention on its math kernels while the student's code runs, so that
    it returns its output laid out as a fresh (B, n_heads, T, head_size) tensor: its fused
    kernels may lay the output out like the queries (a view of (B, T, n_heads, head_size)), and
    then out.transpose(1, 2).view(...) happens to work. The notebooks teach that a view of a
    transposed tensor fails; on the math kernels it does, whichever attention the student calls.
    (torch's own switch: a few flags set and put back per call, where a torch function mode
    would run Python at every torch call of the student's code.)"""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def _standard_layouts_watched():
    """The same for a watched run (_watched), which must see a fused attention kernel as the
    one operation it is: the kernel torch picks, its output made contiguous by a torch function
    mode (Python at every torch call, so only in these runs)."""
    from torch.overrides import TorchFunctionMode

    sdpa = torch.nn.functional.scaled_dot_product_attention

    class StandardLayouts(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out.contiguous() if func is sdpa and isinstance(out, torch.Tensor) else out
    return StandardLayouts()


def _execute(student, call):
    if call["kind"] == "function":
        if call.get("watch"):
            return _watched(student, call["args"], call["watch"])
        return student(*call["args"])
    if call["kind"] == "generate":
        return _generate(student, call)
    if call["kind"] == "stream":
        return _stream(student, call)
    x = call["x"]  # (B, T, C)
    if not x.is_floating_point():  # token ids: the module's dtype is its parameters'
        return _token_module(student, call)
    model = student(*call["ctor"], **call["ctor_kw"]).to(x.device, x.dtype)
    load_parameters(model, call["params"], call["param_hint"])
    if call.get("eval"):
        model.eval()
    if call.get("grad_weight") is not None:
        return _input_gradient(model, x, call["grad_weight"])
    with torch.no_grad():
        return model(x)


def _input_gradient(model, x, weight):
    """The gradient of (model(x) * weight).sum() with respect to x (zeros where none flows)."""
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        out = model(x)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return torch.zeros_like(x)
        (out * weight).sum().backward()
    return x.grad if x.grad is not None else torch.zeros_like(x)


# --- watching a call: inputs changed in place ----------------------------------------

def _call_tensors(call):
    """(name, tensor) for every tensor the call hands to the student's code."""
    if call["kind"] == "function":
        names = call.get("names") or [f"argument {i + 1}" for i in range(len(call["args"]))]
        return [(n, a) for n, a in zip(names, call["args"]) if isinstance(a, torch.Tensor)]
    return [("x", call["x"])] if isinstance(call.get("x"), torch.Tensor) else []


def execute_watched(student, call):
    """execute(), and which input tensors the student's code changed in place:
    (out, [{"name", "changed", "total"}, ...]), plain data."""
    before = [(n, t, t.detach().clone()) for n, t in _call_tensors(call)]
    out = execute(student, call)
    changed = []
    for name, t, old in before:
        try:
            same = t.shape == old.shape and t.dtype == old.dtype and bool(
                (t.detach() == old).logical_or(t.detach().isnan() & old.isnan()).all())
        except Exception:  # a tensor the student turned into something unreadable
            same = False
        if not same:
            n = int((t.detach() != old).sum()) if t.shape == old.shape and t.dtype == old.dtype else old.numel()
            changed.append({"name": name, "changed": n, "total": old.numel()})
    return out, changed


def execute_on_meta(student, call):
    """Run the call with its tensors on the meta device (no data, so no values), as a
    check that the student's code follows the device of its inputs. Plain data back:
    {"device", "dtype", "shape"} of the output (and "mixed": [op, shape, device] of the first
    operation that met a tensor on another device), or {"error": type, "message"}."""
    meta = lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t
    call = dict(call)
    if call["kind"] == "function":
        call["args"] = [meta(a) for a in call["args"]]
    else:
        call["x"] = meta(call["x"])
        call["params"] = {k: meta(v) for k, v in call["params"].items()}
    mixed = []
    try:
        with _mixed_devices(mixed):
            out = _run_on_meta(student, call)
    except Exception as err:
        return {"error": type(err).__name__, "message": str(err).splitlines()[0][:300] if str(err) else ""}
    if type(out) is not torch.Tensor:
        return {"type": type(out).__name__}
    result = {"device": str(out.device), "dtype": str(out.dtype), "shape": list(out.shape)}
    if mixed:
        result["mixed"] = mixed[0]
    return result


def _mixed_devices(found):
    """A dispatch mode that notes the first operation given both a meta tensor and a tensor
    (not a 0-dim scalar) on another device: [op name, shape, device] in found. On a GPU that
    operation fails; on the meta device some (embedding, indexing) let it through. A 0-dim
    tensor on the CPU is moved to the meta device first, as a GPU takes CPU scalars (a fill
    value kept as torch.tensor(-1e9), say)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves, tree_map

    scalar = lambda t: t.to("meta") if isinstance(t, torch.Tensor) and t.dim() == 0 and t.device.type == "cpu" else t

    class Mixed(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            ts = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            if any(t.device.type == "meta" for t in ts):
                if any(t.device.type == "cpu" and t.dim() == 0 for t in ts):  # else nothing to move
                    args, kwargs = tree_map(scalar, args), tree_map(scalar, kwargs)
                other = [t for t in ts if t.device.type != "meta" and t.dim() > 0]
                if other and not found:
                    found.append([func.overloadpacket.__name__, [int(d) for d in other[0].shape],
                                  str(other[0].device)])
            return func(*args, **kwargs)
    return Mixed()


def _run_on_meta(student, call):
    if call["kind"] == "function":
        return student(*call["args"])
    x = call["x"]  # (B, T, C), or token ids (B, T): then the module's dtype is its parameters'
    dtype = x.dtype if x.is_floating_point() else next(iter(call["params"].values())).dtype
    model = student(*call["ctor"], **call["ctor_kw"]).to(x.device, dtype)
    with torch.no_grad():
        if call["kind"] != "stream":
            return model(x)
        start = 0
        for n in call["chunks"][:3]:  # a prompt, then new tokens after what it left in the cache
            out = model(x[:, start:start + n])
            start += n
        return out


# --- plain facts about the student's code -------------------------------------------

def _describe(value):
    """A plain description of a value the student's code reads from its globals."""
    import types

    for kind in (bool, int, float):  # plain values only, never the student's subclasses
        if isinstance(value, kind):
            return {"type": kind.__name__, "value": kind(value)}
    if isinstance(value, torch.Tensor):
        return {"type": "Tensor", "shape": [int(d) for d in value.shape], "dtype": str(value.dtype),
                "device": str(value.device)}
    if isinstance(value, types.ModuleType):
        return {"type": "module", "name": str(value.__name__)}
    if isinstance(value, type):
        return {"type": "class", "name": str(value.__qualname__), "module": str(value.__module__)}
    if callable(value):
        return {"type": "function", "name": str(getattr(value, "__name__", "")),
                "module": str(getattr(value, "__module__", "") or "")}
    return {"type": str(type(value).__name__)}


def _code_objects(code):
    import types

    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


# Modules whose classes are Python's or torch's own machinery, not code of the student's.
_LIBRARY = ("torch", "builtins", "abc", "enum", "typing", "functools", "collections", "dataclasses")


def _library(klass):
    """Whether a class is Python's or torch's own: its module says so, and none of its own
    functions was written in a notebook cell (a class of the student's that sets
    ``__module__ = "torch..."`` is still the student's)."""
    if not str(getattr(klass, "__module__", "")).startswith(_LIBRARY):
        return False
    try:
        members = list(vars(klass).values())
    except TypeError:
        return True
    for member in members:
        for fn in (getattr(member, "__func__", member), getattr(member, "fget", None), getattr(member, "fset", None)):
            if _written_here(getattr(fn, "__code__", None)):
                return False
    return True


def _written_here(code):
    """Whether a code object was compiled from a notebook cell (or any text of the kernel's),
    rather than read from a file of the installed Python: library code lives under the
    installation's folders (read-only in the grading sandbox)."""
    import os
    import sysconfig
    import types

    if not isinstance(code, types.CodeType):
        return False
    global _INSTALLATION
    if _INSTALLATION is None:
        paths = sysconfig.get_paths()
        _INSTALLATION = tuple(sorted({os.path.realpath(paths[k]) + os.sep
                                      for k in ("stdlib", "platstdlib", "purelib", "platlib")}))
    name = code.co_filename
    here = _WRITTEN.get(name)
    if here is None:  # a class's every function is asked, each check: realpath once per file
        try:
            here = not os.path.realpath(name).startswith(_INSTALLATION)
        except (TypeError, ValueError, OSError):
            here = True
        _WRITTEN[name] = here
    return here


_INSTALLATION = None
_WRITTEN = {}  # code.co_filename -> _written_here's answer


def _methods(klass):
    """The plain functions defined by a class and its bases that are not library classes."""
    fns = []
    for base in getattr(klass, "__mro__", ()):
        if base is object or _library(base):
            continue
        for member in vars(base).values():
            for fn in (getattr(member, "__func__", member), getattr(member, "fget", None),
                       getattr(member, "fset", None)):
                if hasattr(fn, "__code__"):
                    fns.append(fn)
    return fns


def _functions_of(obj):
    """The plain functions that make up obj: itself; or the methods of a class and of its
    bases that are not torch's, and of its metaclass (whose __call__ runs when the class is
    called); or, for a callable object, the methods of its class."""
    import types

    if isinstance(obj, type):
        return _methods(obj) + _methods(type(obj))
    fn = getattr(obj, "__func__", obj)
    if hasattr(fn, "__code__"):
        return [fn]
    if callable(obj) and not isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)) \
            and not _library(type(obj)):
        return _methods(type(obj))
    return []


def _posing(value):
    """Code of the notebook's whose __module__ names a library's (``__module__ = "torch"``)."""
    fn = getattr(value, "__func__", value)
    if not str(getattr(fn, "__module__", "")).startswith(_LIBRARY):
        return False
    if isinstance(fn, type):
        return not _library(fn)
    return _written_here(getattr(fn, "__code__", None))


MAX_HELD = 64  # values one function or class keeps that the facts describe


def _held(item):
    """(label, value) of what a function, class or callable object keeps besides its code,
    globals and closure: default arguments and keyword defaults, what a decorator wrapped
    (__wrapped__), a class's attributes, a callable object's attributes, a partial's function
    and arguments; the items of a list, tuple or dict among them, one level deep."""
    import functools
    import types

    found = []
    fn = getattr(item, "__func__", item)  # a bound, static or class method
    if isinstance(item, functools.partial):
        found += [("func", item.func), *(("args", a) for a in item.args), *item.keywords.items()]
    elif isinstance(item, type):
        for klass in item.__mro__:
            if klass is object or _library(klass):
                continue
            for attr, value in vars(klass).items():
                value = getattr(value, "__func__", value)  # staticmethod, classmethod
                if attr.startswith("__") or isinstance(value, (types.FunctionType, property)):
                    continue
                found.append((attr, value))
    elif isinstance(getattr(fn, "__code__", None), types.CodeType):
        code = fn.__code__
        defaults = getattr(fn, "__defaults__", None) or ()
        names = code.co_varnames[:code.co_argcount][code.co_argcount - len(defaults):]
        found += list(zip(names, defaults))
        kwdefaults = getattr(fn, "__kwdefaults__", None)
        found += list(kwdefaults.items()) if isinstance(kwdefaults, dict) else []
        wrapped = vars(fn).get("__wrapped__") if hasattr(fn, "__dict__") else None
        found += [("__wrapped__", wrapped)] if wrapped is not None else []
    elif callable(item) and not _library(type(item)):
        attrs = getattr(item, "__dict__", None)
        found += [(k, v) for k, v in attrs.items() if not str(k).startswith("__")] if isinstance(attrs, dict) else []
    out = []
    for label, value in found[:MAX_HELD]:
        out.append((str(label), value))
        if type(value) in (list, tuple, set, frozenset):
            out += [(str(label), v) for v in list(value)[:16]]
        elif type(value) is dict:
            out += [(str(label), v) for v in list(value.values())[:16]]
    return out[:MAX_HELD]


def _described(value):
    """_describe, for values whose description itself could fail (a student's object)."""
    try:
        return _describe(value)
    except Exception:
        return {"type": "unknown"}


_NAMES_CACHE = {}
# Methods that return a new tensor: a statement that calls one and keeps nothing did nothing.
OUT_OF_PLACE = {"masked_fill", "softmax", "nan_to_num", "transpose", "view", "reshape", "tril", "triu",
                "to", "float", "double", "clone", "contiguous", "clamp", "where", "mul", "div", "add",
                "sub", "permute", "unsqueeze", "squeeze", "expand", "flip"}

# Calls that keep what they are given: register_buffer("mask", ones.triu(1)) throws nothing away.
KEEPERS = {"register_buffer", "register_parameter", "add_module", "append", "extend", "insert",
           "update", "copy_", "setdefault"}


def _code_names(code):
    """What a code object (and the code nested in it) uses: global names, attribute names,
    keyword names, binary operators, whether it assigns into a subscript, and the
    out-of-place methods whose result a statement throws away. Cached: code never changes."""
    import dis

    if code in _NAMES_CACHE:
        return _NAMES_CACHE[code]
    used = {"globals": [], "attributes": set(), "keywords": set(), "operators": set(),
            "discarded": set(), "stores_subscript": False}
    for co in _code_objects(code):
        statement, previous = [], None
        for ins in dis.get_instructions(co):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
                used["globals"].append(ins.argval)
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "LOAD_SUPER_ATTR") \
                    and isinstance(ins.argval, str):
                used["attributes"].add(ins.argval)
                statement.append(ins.argval)
            elif ins.opname == "STORE_SUBSCR":
                used["stores_subscript"] = True
            elif ins.opname == "BINARY_OP":
                used["operators"].add(ins.argrepr.rstrip("="))
            elif ins.opname in ("BINARY_FLOOR_DIVIDE", "INPLACE_FLOOR_DIVIDE"):  # before Python 3.11
                used["operators"].add("//")
            elif ins.opname in ("KW_NAMES", "LOAD_CONST"):
                value = co.co_consts[ins.arg] if ins.opname == "KW_NAMES" else ins.argval
                if isinstance(value, tuple) and all(isinstance(a, str) for a in value):
                    used["keywords"].update(value)
            if ins.opname == "POP_TOP" and previous is not None and previous.startswith("CALL") \
                    and not KEEPERS.intersection(statement):
                used["discarded"].update(n for n in statement if n in OUT_OF_PLACE)
            if ins.opname.startswith(("STORE_", "POP_TOP", "RETURN", "POP_JUMP", "JUMP")):
                statement = []
            previous = ins.opname
    if len(_NAMES_CACHE) > 4096:
        _NAMES_CACHE.clear()
    used["globals"] = list(dict.fromkeys(used["globals"]))
    _NAMES_CACHE[code] = used
    return used


def _read_names(fns):
    """What the functions use (as _code_names), merged, with each global name mapped to
    the function that reads it, or to (function, value) for a closure's cell."""
    glob = {}
    merged = {"attributes": set(), "keywords": set(), "operators": set(), "discarded": set(),
              "stores_subscript": False}
    for fn in fns:
        used = _code_names(fn.__code__)
        for name in used["globals"]:
            glob.setdefault(name, fn)
        for k in ("attributes", "keywords", "operators", "discarded"):
            merged[k] |= used[k]
        merged["stores_subscript"] = merged["stores_subscript"] or used["stores_subscript"]
        closure = getattr(fn, "__closure__", None) or ()
        for name, cell in zip(fn.__code__.co_freevars, closure):
            try:
                glob.setdefault(name, (fn, cell.cell_contents))
            except ValueError:  # an empty cell
                pass
    return glob, merged


def _instance_facts(model):
    """Parameters, buffers, plain tensor attributes and shared submodules of a module."""
    groups = {}
    for name, mod in model.named_modules(remove_duplicate=False):
        if name:
            groups.setdefault(id(mod), []).append(name)
    params = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        params.setdefault(id(p), []).append(name)
    plain, lists = [], []
    for prefix, mod in model.named_modules():
        for attr, val in vars(mod).items():
            name = f"{prefix}.{attr}" if prefix else attr
            if isinstance(val, torch.Tensor) and not isinstance(val, torch.nn.Parameter):
                plain.append({"name": name, "dtype": str(val.dtype), "shape": list(val.shape)})
            elif not attr.startswith("_") and isinstance(val, (list, tuple, dict)) and any(
                    isinstance(v, torch.nn.Module) for v in (val.values() if isinstance(val, dict) else val)):
                lists.append(name)  # modules in a plain container: not registered
    return {
        "parameters": [[n, list(p.shape)] for n, p in model.named_parameters()],
        "buffers": [[n, str(b.dtype)] for n, b in model.named_buffers()],
        "shared_modules": [names for names in groups.values() if len(names) > 1],
        "shared_parameters": [names for names in params.values() if len(names) > 1],
        "tensor_attributes": plain,
        "module_lists": lists,
        "submodule_types": sorted({f"{type(m).__module__}.{type(m).__qualname__}"
                                   for _, m in model.named_modules()}),
    }


def code_facts(obj, call=None):
    """Plain facts about the student's function or class (strings, numbers, bools, lists
    and dicts only, so they can cross a process boundary):

    - globals: every global (or closure) name the code reads, with a description of its
      value (an int's value, a tensor's shape, a function's module and name);
    - attributes: the attribute and method names it uses (x.cumsum, F.softmax, ...);
      keywords: the keyword argument names it passes (keepdim, dim, ...); operators: the
      binary operators it uses (//, @, ...); discarded: out-of-place methods (masked_fill,
      ...) called in a statement that keeps no result;
    - builtins: the Python builtins it calls or reads (max, sum, ...);
    - home: the module the code is defined in (a notebook's is __main__; also where the name
      is bound to something that is not the student's code, such as a library's function a
      decorator returned, which is then itself described among the globals);
    - held: what the code keeps besides its globals and closures, described as they are:
      default arguments and keyword defaults, what a decorator wrapped, class attributes, a
      callable object's attributes, a partial's function and arguments (the functions and
      classes among them are listed with the globals too, and the student's own are read
      as helpers); the methods of a class's metaclass and of a callable object's class are
      read with its own;
    - helpers: the functions and classes of the same notebook it calls, whose code is
      read too; stores_subscript: whether it assigns into a subscript (t[...] = ...);
    - module: for a class and a module call, what an instance built with the call's
      arguments holds (parameters, buffers, plain tensor attributes, shared submodules).

    With a call {"kind": "meta", "call": ...}: execute_on_meta's plain result for that call
    instead (how the grading process, whose student runs in a kernel, asks for the probe).
    """
    if call is not None and call.get("kind") == "meta":  # the meta-device probe, asked for from afar
        return execute_on_meta(obj, call["call"])
    home = getattr(obj, "__module__", None)
    glob, helpers, held = {}, [], {}
    if not isinstance(obj, type) and not _functions_of(obj):
        # not code of the student's: the name is bound to a library's function (a decorator
        # replaced the definition, or it was assigned), a partial, ...: what it is counts as
        # what the answer uses, and the notebook is where the student's code lives
        home = "__main__"
        glob[str(getattr(obj, "__name__", "") or "(the answer itself)")] = _described(obj)
    todo, seen = [obj], set()
    merged = {"attributes": set(), "keywords": set(), "operators": set(), "discarded": set(),
              "builtins": set(), "stores_subscript": False}
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        names, used = _read_names(_functions_of(item))
        for k in ("attributes", "keywords", "operators", "discarded"):
            merged[k] |= used[k]
        merged["stores_subscript"] = merged["stores_subscript"] or used["stores_subscript"]
        for name, where in names.items():
            if isinstance(where, tuple):  # a closure cell
                found, value = True, where[1]
            else:
                g = getattr(where, "__globals__", {})
                found, value = name in g, g.get(name)
            if not found and not isinstance(where, tuple) and hasattr(builtins, name):
                merged["builtins"].add(name)
            if not found or name in glob or name.startswith("__"):
                continue
            glob[name] = _describe(value)
            is_code = isinstance(value, type) or hasattr(value, "__code__")
            if is_code and value is not obj and (getattr(value, "__module__", None) == home or _posing(value)) \
                    and not str(home).startswith(("torch", "grader")):
                helpers.append(name)
                todo.append(value)
        # what it keeps besides (defaults, class attributes, ...), described like its globals:
        # code among them in globals too (where the shortcut rule reads it), and followed
        # when it is the student's
        for label, value in _held(item):
            described = _described(value)
            held.setdefault(label, described)
            if described.get("type") in ("function", "class", "module"):
                glob.setdefault(label, described)
            own = isinstance(value, type) or hasattr(getattr(value, "__func__", value), "__code__") \
                or callable(value) and not _library(type(value)) and _functions_of(value)
            if own and id(value) not in seen and (getattr(value, "__module__", None) == home or _posing(value)) \
                    and not str(home).startswith(("torch", "grader")):
                helpers.append(label)
                todo.append(value)
    facts = {"kind": "class" if isinstance(obj, type) else "function",
             "name": str(getattr(obj, "__name__", "")), "home": str(home), "globals": glob,
             **{k: sorted(merged[k]) for k in ("attributes", "keywords", "operators", "discarded", "builtins")},
             "helpers": sorted(set(helpers)), "stores_subscript": merged["stores_subscript"],
             "held": held}
    if isinstance(obj, type) and call is not None and call.get("kind") == "module":
        try:
            model = obj(*call["ctor"], **call["ctor_kw"])
            facts["module"] = _instance_facts(model)
        except Exception as err:
            facts["module_error"] = type(err).__name__
    return facts
# --- calls added for notebooks 07 and 08 ------------------------------------------------

class CallRefused(Exception):
    """The student's code ran but broke a rule of the exercise (it read a whole row at
    once, or formed the T x T matrix). The first line of the message says what it did;
    `key` names the rule (REFUSALS below: its name and hint), and travels out of
    a grading kernel as one of the exception's fields."""

    def __init__(self, key, message):
        super().__init__(message)
        self.key = key
        self.fields = {"key": key}


# The mistake each rule names when a call breaks it (CallRefused.key): its name and hint.
REFUSALS = {
    "whole_row": ("a whole row reduced at once",
                  "keep a running maximum and a running sum, updated one score at a time."),
    "fused_kernel": ("a fused attention kernel called",
                     "write the loops over tiles of queries and keys yourself."),
    "full_matrix": ("the T x T matrix formed",
                    "compare one tile of queries with one tile of keys at a time."),
    "tile_strip": ("a tile of queries against all T keys",
                   "tile the keys too, and combine the key tiles with a running max and sum."),
    "too_large": ("an intermediate larger than two tiles",
                  "keep only one tile of scores and the running statistics at a time."),
    "no_projection": ("the output projection left out",
                      "pass the joined heads (B, T_new, n_heads * head_size) through self.proj."),
    "stream_shape": ("a chunk's output of the wrong shape",
                     "return one output per new token: (B, T_new, C)."),
}


def _build(student, call, device, dtype):
    model = student(*call["ctor"], **call["ctor_kw"]).to(device, dtype)
    load_parameters(model, call["params"], call["param_hint"])
    if call.get("eval"):
        model.eval()
    return model


def _token_module(student, call):
    """A module that reads token ids, x (B, T) int64: built in its parameters' dtype."""
    idx = call["x"]  # (B, T)
    dtype = next(iter(call["params"].values())).dtype
    model = _build(student, call, idx.device, dtype)
    with torch.no_grad():
        return model(idx)


def _stream(student, call):
    """Feed x to one module a few tokens at a time (a prompt, then one token per call),
    as generation with a key/value cache does; the outputs joined along T."""
    x = call["x"]  # (B, T, C)
    model = _build(student, call, x.device, x.dtype)
    outs, start = [], 0
    with torch.no_grad():
        for n in call["chunks"]:
            out = model(x[:, start:start + n])  # (B, n, C)
            if not isinstance(out, torch.Tensor):
                return out  # the check explains what came back
            want = (x.shape[0], n, x.shape[2])
            if tuple(out.shape) != want:
                n_heads, head_size = call["ctor"][1], call["ctor"][2]
                joined = (out.dim() == 3 and tuple(out.shape[:2]) == want[:2]
                          and out.shape[2] == n_heads * head_size != x.shape[2])
                raise CallRefused(
                    "no_projection" if joined else "stream_shape", f"given {n} new token(s), x of shape {tuple(x[:, start:start + n].shape)} after "
                    f"{start} cached, forward returned shape {tuple(out.shape)}; expected {want} = "
                    "(B, T_new, C): one output per new token."
                    + (f"\n  Its last dim is n_heads * head_size = {out.shape[2]}: the heads joined but not "
                       f"passed through the output projection self.proj (back to C = {x.shape[2]})."
                       if joined else ""))
            outs.append(out)
            start += n
    if call.get("report"):  # what the module keeps after the stream, instead of its outputs
        return held_report(model, call["report"])
    return torch.cat(outs, dim=1)  # (B, T, C)


def held_report(model, sizes):
    """What a module holds besides its parameters (its cache: attributes, buffers, and
    tensors in lists, tuples, dicts and deques, each tensor counted once), as a float64
    tensor: [numbers held, those in tensors of sizes["n_heads"] heads, those in tensors of
    sizes["n_kv_heads"] heads, tensors held]. A 4-D tensor's heads are its dim 1, as in
    (B, heads, L, head_size); another tensor's are the one of the two sizes it has."""
    import collections

    params = {id(p) for p in model.parameters()}
    seen, counts = set(), [0, 0, 0, 0]

    def visit(value, depth):
        if depth > 8:
            return
        if isinstance(value, torch.Tensor):
            if id(value) in params or id(value) in seen:
                return
            seen.add(id(value))
            shape = tuple(value.shape)
            counts[0] += value.numel()
            counts[3] += 1
            heads = shape[1] if len(shape) == 4 else None  # (B, heads, L, head_size), the course's layout
            if heads == sizes["n_heads"] or (heads is None and sizes["n_heads"] in shape
                                             and sizes["n_kv_heads"] not in shape):
                counts[1] += value.numel()
            elif heads == sizes["n_kv_heads"] or (heads is None and sizes["n_kv_heads"] in shape):
                counts[2] += value.numel()
        elif isinstance(value, dict):
            for item in list(value.values()):
                visit(item, depth + 1)
        elif isinstance(value, (list, tuple, collections.deque)):
            for item in list(value):
                visit(item, depth + 1)

    for module in model.modules():
        for name, value in vars(module).items():
            if name not in ("_parameters", "_modules"):
                visit(value, 0)
    return torch.tensor(counts, dtype=torch.float64)


class StandInLM(torch.nn.Module):
    """A tiny fixed next-token model that generate() is checked with (plain tensors, no
    training). Like a GPT it has positions for block_size tokens only, and the logits at
    position t depend on the whole context up to t and on t itself:
    logits[b, t] = tok[idx[b, t]] + pos[t] + mean of mix[idx[b, s]] for s <= t."""

    def __init__(self, tok, pos, mix):
        super().__init__()
        self.tok, self.pos, self.mix = tok, pos, mix  # (V, V), (block_size, V), (V, V)
        self.block_size = pos.shape[0]

    def forward(self, idx):
        B, T = idx.shape
        if T > self.block_size:
            raise RuntimeError(f"the model got a context of {T} tokens, but it has positions for "
                               f"only {self.block_size} tokens")
        if T == 0:
            raise RuntimeError("the model got an empty context (0 tokens)")
        steps = torch.arange(1, T + 1, device=idx.device, dtype=self.mix.dtype).view(1, T, 1)
        past = self.mix[idx].cumsum(1) / steps  # (B, T, V) running mean over the context
        return self.tok[idx] + self.pos[:T] + past  # (B, T, V)


def _generate(student, call):
    model = StandInLM(**call["model"])
    idx = torch.tensor(call["idx"], dtype=torch.long)  # (B, T)
    gen = torch.Generator().manual_seed(call["seed"])
    return student(model, idx, call["max_new_tokens"], call["block_size"],
                   temperature=call["temperature"], generator=gen)


# Fused attention kernels tile internally; an exercise that asks for the tiles refuses them.
_FUSED = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention")
# Reductions, with where their dims argument sits (None: over every dim).
_REDUCTIONS = {"amax": 1, "amin": 1, "max": 1, "min": 1, "sum": 1, "mean": 1, "nansum": 1,
               "logsumexp": 1, "_softmax": 1, "_log_softmax": 1, "softmax": 1, "log_softmax": 1,
               "cumsum": 1, "cumprod": 1, "cummax": 1, "cummin": 1, "logcumsumexp": 1,
               "sort": 1, "argmax": 1, "argmin": 1, "prod": 1, "aminmax": None, "topk": 2,
               "linalg_vector_norm": 2, "norm": 2, "var": 1, "std": 1, "median": 1}


def _reduced_dims(name, args, kwargs):
    """The dims a reduction op reduces over (None: all of them)."""
    at = _REDUCTIONS[name]
    dim = kwargs.get("dim", args[at] if at is not None and len(args) > at else None)
    if isinstance(dim, torch.Tensor):  # torch.max(a, b): elementwise, not a reduction
        return []
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    return [dim] if isinstance(dim, int) else [d for d in dim if isinstance(d, int)]


def _watched(student, args, watch):
    """Run student(*args) while recording every tensor operation (a torch dispatch mode,
    so it also sees the operations inside torch functions). watch may ask for:
      "row": N      no reduction (max, sum, softmax, ...) over a dim of size N at once;
      "max_numel": no intermediate tensor with more elements than this, no fused kernel,
                   and (with "tile_size", "head_size", "leading") no floating tensor that
                   holds a tile of queries against more than tile_size keys: a strip.
    Raises CallRefused naming the first offending operation."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    seen = {"row": None, "largest": (0, None, None), "fused": None, "strip": None}

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func.overloadpacket.__name__
            if seen["fused"] is None and any(f in name for f in _FUSED):
                seen["fused"] = name
            if "row" in watch and seen["row"] is None and name in _REDUCTIONS and args \
                    and isinstance(args[0], torch.Tensor) and args[0].dim() > 0:
                shape = tuple(args[0].shape)
                dims = _reduced_dims(name, args, kwargs)
                dims = range(len(shape)) if dims is None else dims
                if any(shape[d] == watch["row"] for d in dims):
                    seen["row"] = (name, shape)
            out = func(*args, **kwargs)
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                if "head_size" in watch and seen["strip"] is None and _is_strip(t, watch):
                    seen["strip"] = (tuple(t.shape), name)
                numel, shape, made_by = seen["largest"]
                if t.numel() > numel:
                    seen["largest"] = (t.numel(), tuple(t.shape), name)
                elif t.numel() == numel and t.dim() > len(shape):
                    # the same numbers seen through the student's own view (matmul runs as
                    # bmm on (B * n_heads, T, T), then views the result as (B, n_heads, T, T))
                    seen["largest"] = (numel, tuple(t.shape), made_by)
            return out

    with Watch():
        out = student(*args)
    if "row" in watch and seen["row"]:
        name, shape = seen["row"]
        raise CallRefused(
            "whole_row", f"it read a whole row at once: aten.{name} over a tensor of shape {shape} reduces all "
            f"{watch['row']} scores of a row in one operation. Stream them instead: one score (or "
            "a few) at a time, keeping only the running maximum and the running sum.")
    if "max_numel" in watch:
        if seen["fused"]:
            raise CallRefused(
                "fused_kernel", f"it calls a fused attention kernel (aten.{seen['fused']}), which tiles for you: "
                "write the loops over tiles of queries and keys yourself.")
        numel, shape, name = seen["largest"]
        if numel > watch["max_numel"]:
            key, why = _describe_size(shape, watch)
            raise CallRefused(key, f"it made a tensor of shape {shape} ({numel} numbers, aten.{name}); {why}")
        if seen["strip"]:
            shape, name = seen["strip"]
            queries = "one query" if min(shape[-2:]) == 1 else "one tile of queries"
            if name in ("slice", "select", "narrow", "as_strided"):  # a view: something over all keys exists
                raise CallRefused(
                    "tile_strip", f"it cut a tensor of shape {shape} (aten.{name}) out of a larger one: a strip of "
                    f"{queries} against {max(shape[-2:])} keys, so something made for the whole "
                    "sequence exists (a mask or scores over all T positions?). Make what a tile needs from that "
                    f"tile's positions alone, at most tile_size={watch['tile_size']} keys at a time.")
            raise CallRefused(
                "tile_strip", f"it made a tensor of shape {shape} (aten.{name}): that is a strip of {queries} "
                f"against {max(shape[-2:])} keys at once. Tile the keys too, at most "
                f"tile_size={watch['tile_size']} at a time, combined with a running max and sum.")
    return out


def _is_strip(t, watch):
    """A floating tensor whose last two dims are a tile of queries (2..tile_size, and not
    head_size or a leading size) and more keys than a tile (tile_size + 1..T), either way round;
    or one query against more keys than a tile and fewer than T (a query row by row against the
    keys before it, no key tiles: a per-query column of all T queries, a running maximum kept
    for every query, has T)."""
    if t.dim() < 2 or not t.is_floating_point():
        return False
    tile, T = watch["tile_size"], watch["T"]
    other = {1, watch["head_size"], *watch.get("leading", ())}
    a, b = t.shape[-2:]
    return any((tile < keys <= T and 2 <= rows <= tile and rows not in other)
               or (rows == 1 and tile < keys < T and keys not in other)
               for rows, keys in ((a, b), (b, a)))


def _describe_size(shape, watch):
    """(the rule's key, what the tensor is) for a tensor over the size limit."""
    T, tile = watch["T"], watch["tile_size"]
    limit = f"at most {watch['max_numel']} numbers at once (twice the inputs, or two tiles)."
    if sum(1 for s in shape if s >= T) >= 2:
        return "full_matrix", f"that is the T x T matrix of every query against every key. Work tile by tile: {limit}"
    if T in shape and tile in shape:
        return "tile_strip", (f"that is a strip of one tile against all T={T} keys. Tile the keys too, "
                              f"combined with a running max and sum: {limit}")
    rows, keys = shape[-2:] if len(shape) >= 2 else (0, 0)
    if any(tile < k <= T and 2 <= r <= tile for r, k in ((rows, keys), (keys, rows))):
        return "tile_strip", (f"that is a strip of one tile of queries against {max(rows, keys)} keys. Tile the "
                              f"keys too, combined with a running max and sum: {limit}")
    return "too_large", limit
