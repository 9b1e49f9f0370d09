"""Findings from plain facts about the student's code (grader.checks.student_call.code_facts):
sizes and tensors read from the notebook's globals, modules built wrong, inputs changed in
place, devices mixed, shortcuts; and catalogued mistakes said more precisely."""
import re

from grader.checks import shortcuts
from grader.checks.diagnosis.findings import PLAIN, Finding
from grader.checks.diagnosis.shapes import _sizes_text


SIZE_NAMES = ("B", "T", "C", "head_size", "n_heads", "block_size")


def _globals(facts):
    return (facts or {}).get("globals", {})


def _attrs(facts):
    return set((facts or {}).get("attributes", ()))


def _how(hooks, name):
    """How to read a size from the inputs of this exercise."""
    if name in hooks.reads:
        read = hooks.reads[name]
        return f"use the argument {name}" if read == name else f"{name} = {read}"
    if name in ("n_heads", "block_size", "head_size"):
        return f"keep {name} from __init__ (self.{name} = {name})"
    return "compute every size from the inputs' shapes"


TENSOR_NAMES = ("mask", "tril", "wei", "x", "q", "k", "v", "scores", "weights", "xbow", "out")


def globals_finding(facts, sz, error_numbers=(), hooks=PLAIN):
    """A size or tensor read from the notebook's globals that does not fit this check."""
    check_values = set(sz.values())
    for name, d in _globals(facts).items():
        if d.get("type") == "int" and not isinstance(d.get("value"), bool):
            value = d["value"]
            wrong = (name in sz and value != sz[name]) or (
                name not in sz and value > 1 and value not in check_values
                and (not error_numbers or value in error_numbers))
            if wrong:
                here = f"here {name} = {sz[name]}" if name in sz else f"here {_sizes_text(sz)}"
                how = _how(hooks, name)
                return Finding("global_size", f"size taken from the notebook's global {name} = {value}",
                               f"take it from the inputs ({how}); {here}.")
        elif d.get("type") == "Tensor":
            shape = tuple(d.get("shape", ()))
            if name in TENSOR_NAMES or any(s not in check_values for s in shape if s > 1):
                return Finding("global_tensor",
                               f"uses the notebook's global tensor {name} {shape}",
                               f"build it inside your function from the inputs' sizes ({_sizes_text(sz)}).")
    return None


def globals_note(facts):
    """A one-line note for a passing check whose code reads sizes or tensors from the
    notebook's globals (other sizes, as in graded runs, would break it), or None."""
    read = [f"{name} = {d['value']}" if d.get("type") == "int" else f"{name} {tuple(d.get('shape', ()))}"
            for name, d in _globals(facts).items()
            if (d.get("type") == "int" and name in SIZE_NAMES) or (d.get("type") == "Tensor" and name in TENSOR_NAMES)]
    if read:
        return (f"note: your code reads the notebook's global {', '.join(read)}; graded runs use other "
                "sizes, so take them from the inputs.")
    return None


def parameter_finding(expected, yours, facts, used=None):
    """Why the module's parameters ({name: shape} yours) are not the ones the exercise
    asks for ({name: shape} expected)."""
    found = module_finding(facts)
    if found and found.key == "shared_module":
        return found
    mod = (facts or {}).get("module") or {}
    want, have = sorted(expected), sorted(yours)
    for name in mod.get("module_lists", ()):
        return Finding("unregistered", f"self.{name} is a plain Python list of modules",
                       f"their weights are not registered; use self.{name} = nn.ModuleList([...]).")
    missing = sorted({n.split(".")[0] for n in want} - {n.split(".")[0] for n in have})
    if used:
        return Finding("shortcut", f"{used} does the whole exercise",
                       "graded runs refuse it; build the layers the exercise asks for.")
    if missing and len(have) < len(want) and not any(n.split(".")[0] in missing for n in have):
        if len(want) - len(have) == len([n for n in want if n.split(".")[0] in missing]):
            return Finding("unregistered", f"no parameters under {', '.join(missing)}",
                           "layers created in forward, or kept in a plain list, are not registered: "
                           "create them in __init__ (nn.ModuleList for a list).")
    if any(n.endswith(".bias") and n[:-5] + ".weight" in want for n in set(have) - set(want)):
        return Finding("bias", "layers with a bias", "nn.Linear(..., bias=False): the exercise's "
                       "query, key and value layers have weights only.")
    gone = [n for n in set(want) - set(have) if n.endswith(".bias")]
    if gone and set(want) - set(have) == set(gone):
        return Finding("bias_missing", f"{gone[0][:-5]} has no bias",
                       f"keep the default bias of {gone[0][:-5]} (nn.Linear(..., bias=True)).")
    shape = lambda s: str(tuple(s))
    differ = [n for n in want if n in yours and list(expected[n]) != list(yours[n])]
    if differ and set(want) == set(have):
        n = sorted(differ)[0]
        mine, theirs = list(yours[n]), list(expected[n])
        if ("proj" in n and len(mine) == 2 == len(theirs) and mine[0] == theirs[0] and 0 < mine[1] < theirs[1]
                and theirs[1] % mine[1] == 0):
            return Finding("heads_not_concatenated", f"{n} takes {mine[1]} inputs, not {theirs[1]}",
                           f"the {theirs[1] // mine[1]} heads' outputs are concatenated along the last "
                           f"dim (torch.cat) into {theirs[1]} features before {n.rsplit('.', 1)[0]}, "
                           "not summed or averaged into one head's size.")
        return Finding("parameter_shapes", f"{n} is {shape(yours[n])}, not {shape(expected[n])}",
                       "build the layers from the sizes you are given, in the order of the "
                       "exercise's signature.")
    raw = sorted(n for n in have if "." not in n)  # tensors held directly, not layers' weights
    layers = sorted({n.split(".")[0] for n in want if n.endswith(".weight")})
    if raw and layers and len(raw) >= len(layers):
        return Finding("raw_parameters", f"nn.Parameter tensors ({', '.join(raw[:3])}) instead of "
                       f"nn.Linear layers", f"make {', '.join(layers)} nn.Linear layers, as the "
                       "exercise says: each holds its weight as (out_features, in_features) and "
                       "applies it as x @ weight.T.")
    if len(want) == len(have) and sorted(want) != sorted(have):
        return Finding("parameter_names", "the right kind of layers under other names",
                       "the check loads weights by name: use the attribute names the exercise gives.")
    return None


def module_finding(facts):
    """One submodule shared by several names, or a tensor kept as a plain attribute."""
    mod = (facts or {}).get("module") or {}
    for names in mod.get("shared_modules", ()):
        if len(names) > 1:
            if all(re.fullmatch(r".*\.\d+", n) for n in names):
                return Finding("shared_module",
                               f"one module shared by {', '.join(names[:3])}{'...' if len(names) > 3 else ''}",
                               "[Head(...)] * n repeats the same head n times (one set of weights); "
                               "build a new one each time: nn.ModuleList([Head(...) for _ in range(n_heads)]).")
            return Finding("shared_module", f"{' and '.join(names[:2])} are one and the same module",
                           "a = b = nn.Linear(...) shares one layer; create a separate nn.Linear for each.")
    for attr in mod.get("tensor_attributes", ()):
        return Finding("plain_attribute",
                       f"self.{attr['name']} is a plain tensor attribute, not a buffer",
                       "module.to(device or dtype) leaves it behind; "
                       f"use self.register_buffer(\"{attr['name'].split('.')[-1]}\", ...).")
    return None


def passing_note(exercise, inputs, facts):
    """The exercise's note for a check that passes (Diagnosis.passing_note), or None.
    facts() is the instance's."""
    hook = exercise.diagnosis.passing_note
    return hook(inputs, facts) if hook else None


def mask_buffer_note(inputs, facts):
    """A note for a causal Head that passes without the registered mask buffer the text
    asks for (a mask built in forward on every call), or None. facts() is the instance's."""
    if not inputs.get("causal"):
        return None
    mod = (facts() or {}).get("module")
    if not mod or mod.get("buffers"):  # a registered buffer under any name (mask, tril, ...)
        return None
    return ("note: Head registers no mask buffer; the text asks for one, registered once in __init__ "
            "(self.register_buffer(...)), instead of a mask built in forward on every call.")


IN_PLACE = re.compile(r"^(?!__)\w+_$")


def mutation_message(name, changed, facts=None, values_right=None):
    """The check's message when the call changed its inputs in place."""
    what = ", ".join(f"{c['name']} ({c['changed']} of {c['total']} values)" for c in changed)
    methods = sorted(a for a in _attrs(facts) if IN_PLACE.match(a) and a not in ("requires_grad_",))
    how = f" by {', '.join(m + '()' for m in methods[:3])}" if methods else \
        " by assigning into it (t[...] = ...)" if (facts or {}).get("stores_subscript") else ""
    values = {True: "The values you return are right, but", False: "This also changes what you compute, and",
              None: "This destroys"}[values_right]
    first = changed[0]["name"]
    copy = f"{first}.clone()" if first.isidentifier() else "a copy made with .clone()"
    tail = "the caller's tensor is destroyed" if values_right is not None else "the caller's tensor"
    return (f"{name} changed its input {what} in place{how}.\n"
            f"  {values} {tail}: work on new tensors (an out-of-place op, or {copy} first).")


VALUE_READ = r"item\(\) cannot be called on meta|Cannot access data pointer|data-dependent|meta tensors"


def device_message(result, facts, reads_no_values=False):
    """(message, finding key) for the problem in a run on the meta device
    (grader.checks.student_call.execute_on_meta), or None.

    Only errors that are about devices count: code whose Python branches read values
    cannot run on the meta device at all, and says nothing about devices; except where the
    notebook asks for no value read (reads_no_values): then such an error is that mistake."""
    mod = (facts or {}).get("module") or {}
    plain = module_finding({"module": {"tensor_attributes": mod.get("tensor_attributes", ())}})
    extra = f"\n  Likely mistake: {plain.name} \u2014 {plain.hint}" if plain else \
        "\n  Create new tensors with device=x.device (in a module: register_buffer)."
    key = plain.key if plain else "follows_inputs"
    if "error" in result:
        msg = result["message"]
        if reads_no_values and "Cannot copy out of meta" in msg:  # .tolist(), .numpy(), .cpu()
            return (f"on the meta device, which has no values, your code reads values or moves a tensor to "
                    f"the CPU: {result['error']}: {msg[:100]}.\n  Read no value from a tensor (.item(), "
                    ".tolist(), .numpy(), int(...)) and keep every tensor on x's device: turn positions into "
                    "angles all at once, as tensors.", "follows_inputs")
        if re.search(r"device|Cannot copy out of meta", msg):
            return (f"with its inputs on another device (the meta device), your code mixes devices: "
                    f"{result['error']}: {msg[:100]}{extra}", key)
        if reads_no_values and re.search(VALUE_READ, msg):
            return (f"on the meta device, which has no values, your code reads a value: {result['error']}: "
                    f"{msg[:100]}.\n  Read no value from a tensor (.item(), int(...), float(...)): keep counts "
                    "such as self.seen as Python ints, and turn positions into angles all at once, as "
                    "tensors.", "follows_inputs")
        return None
    if result.get("mixed"):
        op, shape, device = result["mixed"]
        return (f"with its inputs on another device (the meta device), your code hands aten.{op} a "
                f"tensor of shape {tuple(shape)} made on {device}: on a GPU this fails.{extra}", key)
    if result.get("device") not in (None, "meta"):
        return (f"with its inputs on another device (the meta device), your code returned a "
                f"tensor on {result['device']}.{extra}", key)
    return None


def refine(mistake, facts):
    """A catalogued mistake said more precisely when the code shows how it came about."""
    attrs = _attrs(facts)
    key = getattr(mistake, "key", None)
    if key == "finite_fill" and "nan_to_num" in attrs:
        return Finding("nan_to_num_early", "nan_to_num before the softmax",
                       "it turns -inf into a finite number, so a fully masked row comes out uniform: "
                       "call nan_to_num(0.0) on the weights, after the softmax.")
    if key == "inverted_mask" and "scaled_dot_product_attention" in attrs:
        return Finding(key, mistake.name, "F.scaled_dot_product_attention reads a boolean attn_mask "
                       "the other way round (True = may attend), while the course's mask hides with "
                       "True: pass ~mask.")
    if key == "mask_ignored" and "masked_fill" in (facts or {}).get("discarded", ()):
        return Finding("not_assigned", "the mask has no effect: is masked_fill's result kept?",
                       "masked_fill returns a new tensor and leaves wei as it was: wei = wei.masked_fill(...).")
    return mistake


def shortcut(exercise, facts, forbidden):
    """The name of a function forbidden in the exercise (shortcuts.listed: forbidden is the
    instructor's table, or None), or from the course's own grader, that the student's code
    uses, or None. A function defined where the student's code is (its home: a notebook's
    __main__) is the student's own, whatever that module is called."""
    if not facts:
        return None
    names = shortcuts.listed(exercise, forbidden)
    attrs = _attrs(facts)
    home = facts.get("home", "__main__")
    for name, d in _globals(facts).items():
        if d.get("type") in ("function", "class") and str(d.get("module", "")).startswith("grader") \
                and d.get("module") != home:
            return f"{name} (from the course's {d['module']})"
    for full in names:
        last = full.split(".")[-1]
        if last in attrs:
            return full
        for name, d in _globals(facts).items():
            if d.get("type") in ("function", "class") and (d.get("name") == last or name == last) \
                    and d.get("module") != home:  # not the student's own function of that name
                return full
    return None
