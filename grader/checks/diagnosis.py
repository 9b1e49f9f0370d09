"""What went wrong, inferred from data.

The catalogue in ``grader.answers.mistakes`` recognises single known wrong answers. The analyses
here name whole families of mistakes, and work from data only: the inputs a check chose,
the student's output on them (or the error it raised), the expected output, and plain
facts about the student's code (``grader.checks.student_call.code_facts``: the global names it
reads, the attributes it uses, what an instance of a module holds). They never need the
student's Python object, so they can run in a process that never runs student code.

Families:
- input mutation: an input tensor changed in place by the call;
- trivial answers: an input returned unchanged or merely projected, zeros, uniform or
  identity weights (they earn nothing);
- flags and arguments: causal=False ignored, always causal, a given mask ignored;
- scale: the output is attention with another scale factor, said in terms of the sizes;
- layout: the right numbers after a permutation or a wrong reshape (heads merged without
  transposing back, time and heads mixed, operands of a matmul swapped, weights
  transposed);
- sizes from notebook globals, and the sizes named in an error (or in a wrong shape);
- broadcasting: a normaliser without keepdim, a (T,) where (T, 1) was meant, a factor
  that changes along one dim, slices never written, NaN/inf confined to one position;
- modules: one submodule shared by every head, a mask kept as a plain attribute,
  layers in a plain list or built in forward, parameters of other sizes.

Catalogued mistakes are said more precisely when the code shows how they came about
(``refine``); a function that does the whole exercise is a shortcut (``shortcut``).

The variants that compute attention live here, with the instructor, never in the code
that runs next to the student's.
"""
import itertools
import math
import re
from dataclasses import dataclass

import torch

from grader.checks import registry
from grader.checks.masks import causal_mask

ATTENTION = ("head", "scaled_dot_product_attention", "multi_head_attention",
             "batched_multi_head_attention")
WEIGHTS = ("masked_softmax", "causal_weights")
BAG = ("bag_of_words_loop", "bag_of_words_matmul")
MHA = ("multi_head_attention", "batched_multi_head_attention")
SIZE_NAMES = ("B", "T", "C", "head_size", "n_heads", "block_size")
# notebooks 07 and 08: their inputs are laid out differently (see grader.checks.exercises)
LATER = ("block", "gpt", "generate", "online_softmax", "tiled_attention", "cached_attention")


@dataclass(frozen=True)
class Finding:
    """A named mistake: shown as 'Likely mistake: {name} — {hint}'."""
    key: str
    name: str
    hint: str


# --- sizes -----------------------------------------------------------------------------

def sizes(key, inputs):
    """The sizes of a check's inputs, by their course names."""
    if key == "running_average_weights":
        return {"T": int(inputs["T"])}
    if key in BAG:
        B, T, C = inputs["x"].shape
        return {"B": B, "T": T, "C": C}
    if key in WEIGHTS:
        B, T, _ = inputs["scores"].shape
        return {"B": B, "T": T}
    if key == "scaled_dot_product_attention":
        B, T, hs = inputs["q"].shape
        return {"B": B, "T": T, "head_size": hs}
    if key in LATER:
        return _later_sizes(key, inputs)
    B, T, C = inputs["x"].shape
    out = {"B": B, "T": T, "C": C, "block_size": int(inputs["block_size"])}
    if key == "head":
        out["head_size"] = inputs["w_query"].shape[0]
    else:
        out["n_heads"], out["head_size"] = inputs["w_query"].shape[:2]
    return out


def _later_sizes(key, inputs):
    if key == "block":
        B, T, C = inputs["x"].shape
        nh = int(inputs["n_heads"])
        return {"B": B, "T": T, "C": C, "n_heads": nh, "head_size": C // nh,
                "block_size": int(inputs["block_size"])}
    if key == "gpt":
        B, T = inputs["idx"].shape
        V, C = inputs["tok"].shape
        nh = int(inputs["n_heads"])
        return {"B": B, "T": T, "C": C, "n_heads": nh, "head_size": C // nh,
                "block_size": int(inputs["block_size"]), "vocab_size": V}
    if key == "generate":
        return {"B": len(inputs["idx"]), "T": len(inputs["idx"][0]),
                "vocab_size": int(inputs["model"]["tok"].shape[0]), "block_size": int(inputs["block_size"])}
    if key == "online_softmax":
        B, T, N = inputs["scores"].shape
        return {"B": B, "T": T, "N": N}
    if key == "tiled_attention":
        B, nh, T, hs = inputs["q"].shape
        return {"B": B, "n_heads": nh, "T": T, "head_size": hs, "tile_size": int(inputs["tile_size"])}
    B, T, C = inputs["x"].shape  # cached_attention
    nh = int(inputs["n_heads"])
    return {"B": B, "T": T, "C": C, "n_heads": nh, "head_size": inputs["w_query"].shape[0] // nh,
            "block_size": int(inputs["block_size"]), "prompt": int(inputs["chunks"][0])}


def _products(sz):
    """Names for the numbers that only one thing can be: a size that no other size equals,
    or, for a number that is no size, the one product of two to four sizes that gives it.
    A number two sizes (or two products) share gets no name: naming it would be a guess."""
    singles = {}
    for k, v in sz.items():
        singles.setdefault(v, []).append(k)
    names = {v: ks[0] for v, ks in singles.items() if len(ks) == 1 and v > 1}
    items = [(k, v) for k, v in sz.items() if k != "block_size" and v > 1]
    products = {}
    for r in (2, 3, 4):
        for combo in itertools.combinations_with_replacement(items, r):
            if any(combo.count(c) > 2 for c in combo):
                continue  # B·B·B: no shape multiplies a size by itself three times
            value = math.prod(v for _, v in combo)
            if value not in singles:
                products.setdefault(value, set()).add("\u00b7".join(k for k, _ in combo))
    names.update({value: labels.pop() for value, labels in products.items() if len(labels) == 1})
    return names


def name_number(n, sz):
    """'T' for 7 when T = 7, 'B·T' for 21 when B = 3 and T = 7; None when no size fits, or
    when more than one does."""
    return _products(sz).get(int(n))


def name_shape(shape, sz):
    """'(B, n_heads, T, head_size)' when every dim is exactly one size; None otherwise."""
    single = {}
    for k, v in sz.items():
        single.setdefault(v, []).append(k)
    names = [single.get(int(d), [None, None]) for d in shape]
    if len(shape) == 0 or any(len(n) != 1 for n in names):
        return None
    return "(" + ", ".join(n[0] for n in names) + ")"


def _sizes_text(sz, only=None):
    return ", ".join(f"{k} = {v}" for k, v in sz.items() if only is None or k in only)


# --- facts about the student's code ------------------------------------------------------

def _globals(facts):
    return (facts or {}).get("globals", {})


def _attrs(facts):
    return set((facts or {}).get("attributes", ()))


def _how(key, name):
    """How to read a size from the inputs of this exercise."""
    first = {"scaled_dot_product_attention": "q", "masked_softmax": "scores",
             "causal_weights": "scores"}.get(key, "x")
    dims = {"B": "0", "T": "-2" if first == "scores" else "1", "C": "-1"}
    if first == "q":
        dims["head_size"] = "-1"
    if name in dims and key != "running_average_weights":
        return f"{name} = {first}.shape[{dims[name]}]"
    if name in ("n_heads", "block_size", "head_size"):
        return f"keep {name} from __init__ (self.{name} = {name})"
    return "compute every size from the inputs' shapes"


TENSOR_NAMES = ("mask", "tril", "wei", "x", "q", "k", "v", "scores", "weights", "xbow", "out")


def globals_finding(facts, sz, error_numbers=(), key=""):
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
                how = _how(key, name)
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
        return Finding("parameter_shapes", f"{n} is {shape(yours[n])}, not {shape(expected[n])}",
                       "build the layers from the sizes you are given, in the order of the "
                       "signature (C, head_size, block_size, causal).")
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


def mask_buffer_note(key, inputs, facts):
    """A note for a causal Head that passes without the registered mask buffer the text
    asks for (a mask built in forward on every call), or None. facts() is the instance's."""
    if key != "head" or not inputs.get("causal"):
        return None
    mod = (facts() or {}).get("module")
    if not mod or mod.get("buffers"):  # a registered buffer under any name (mask, tril, ...)
        return None
    return ("note: Head registers no mask buffer; the text asks for one, registered once in __init__ "
            "(self.register_buffer(...)), instead of a mask built in forward on every call.")


# --- input mutation ----------------------------------------------------------------------

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


# --- trivial answers -----------------------------------------------------------------------

def _project(x, w):
    return x @ w.mT


def _uniform_weights(T, mask, dtype=torch.float64):
    """Uniform weights over the visible keys: softmax of zeros with the mask."""
    zeros = torch.zeros(T, T, dtype=dtype, device=mask.device if mask is not None else None)
    if mask is None:
        return torch.softmax(zeros, -1)
    return registry.reference("masked_softmax")(zeros.expand(mask.shape), mask)


def baselines(key, inp):
    """(description, tensor) pairs: answers that skip the exercise."""
    out = []
    if key in BAG:
        x = inp["x"]
        out += [("x returned unchanged", x), ("zeros", torch.zeros_like(x)),
                ("the mean of the whole sequence (uniform weights 1/T everywhere)",
                 x.mean(1, keepdim=True).expand_as(x))]
    elif key == "running_average_weights":
        T = int(inp["T"])
        out += [("torch.eye(T): every token keeps only itself", torch.eye(T, dtype=torch.float64)),
                ("zeros", torch.zeros(T, T, dtype=torch.float64)),
                ("uniform weights 1/T everywhere", torch.full((T, T), 1.0 / T, dtype=torch.float64))]
    elif key in WEIGHTS:
        s = inp["scores"]
        T = s.shape[-1]
        mask = inp["mask"] if key == "masked_softmax" else causal_mask(T, s.device)
        eye = torch.eye(T, dtype=s.dtype, device=s.device).expand_as(s)
        out += [("the scores returned unchanged", s), ("zeros", torch.zeros_like(s)),
                ("uniform weights over the visible keys (the scores ignored)",
                 _uniform_weights(T, mask, s.dtype).expand_as(s)),
                ("uniform weights 1/T everywhere", torch.full_like(s, 1.0 / T)),
                ("identity weights (torch.eye)", eye)]
    elif key == "scaled_dot_product_attention":
        q, k, v, mask = inp["q"], inp["k"], inp["v"], inp["mask"]
        out += [("v returned unchanged (identity weights, no attention)", v),
                ("q returned unchanged", q), ("k returned unchanged", k),
                ("zeros", torch.zeros_like(v)),
                ("uniform weights over the visible keys (q and k ignored)",
                 _uniform_weights(v.shape[-2], mask, v.dtype) @ v)]
    elif key == "head":
        x = inp["x"]
        T = x.shape[1]
        v = _project(x, inp["w_value"])
        mask = causal_mask(T, x.device) if inp["causal"] else None
        out += [("self.value(x) (identity weights, no attention)", v),
                ("self.query(x), merely projected", _project(x, inp["w_query"])),
                ("self.key(x), merely projected", _project(x, inp["w_key"])),
                ("zeros", torch.zeros_like(v)),
                ("uniform weights over the visible tokens (queries and keys ignored)",
                 _uniform_weights(T, mask, x.dtype) @ v)]
    elif key in MHA:
        x = inp["x"]
        B, T, C = x.shape
        proj = lambda t: t @ inp["w_proj"].mT + inp["b_proj"]
        flat = lambda w: _project(x, w.reshape(-1, C))  # (B, T, n_heads * head_size)
        mask = causal_mask(T, x.device) if inp["causal"] else None
        v = flat(inp["w_value"])
        out += [("x returned unchanged", x), ("zeros", torch.zeros_like(x)),
                ("proj of zeros (only the bias)", proj(torch.zeros_like(v))),
                ("the values merely projected, proj(value(x)) (identity weights)", proj(v)),
                ("the queries merely projected", proj(flat(inp["w_query"]))),
                ("the keys merely projected", proj(flat(inp["w_key"]))),
                ("uniform weights over the visible tokens (queries and keys ignored)",
                 proj(_uniform_weights(T, mask, x.dtype) @ v))]
    return out


def trivial(key, inp, actual, close):
    """The description of the trivial answer the output equals, or None."""
    for description, tensor in baselines(key, inp):
        tensor = tensor.detach().to("cpu", torch.float64)
        if tensor.shape == actual.shape and close(actual, tensor):
            return description
    return None


TRIVIAL_TASK = {
    "bag_of_words_loop": "average tokens 0..t of each sequence",
    "bag_of_words_matmul": "average tokens 0..t with one (T, T) @ (B, T, C) matmul",
    "running_average_weights": "row t holds 1/(t+1) in columns 0..t",
    "masked_softmax": "softmax the scores over the keys, masked positions removed",
    "causal_weights": "softmax the scores over the keys, the future removed",
    "head": "wei = softmax(q @ k^T, masked); return wei @ v",
    "scaled_dot_product_attention": "softmax(q @ k^T * head_size ** -0.5, masked) @ v",
    "multi_head_attention": "run every head, concatenate, then self.proj",
    "batched_multi_head_attention": "split q, k, v into heads, attend, merge, then self.proj",
    "block": "add attention, then the MLP, each of a normalised copy, to the residual stream",
    "gpt": "token and position embeddings, the blocks, ln_f, then lm_head",
    "generate": "crop the context, softmax the last logits / temperature, sample, append",
    "online_softmax": "one pass with a running maximum and a running sum, then normalise",
    "tiled_attention": "causal attention, one tile of queries against one tile of keys at a time",
    "cached_attention": "append the new keys and values to the cache, then attend over it",
}


def no_attention_message(key, description):
    return (f"your output {description}: an answer that does no attention earns no points "
            f"here.\n  The task: {TRIVIAL_TASK.get(key, 'see the exercise text')}.")


def trivial_message(key, description):
    return (f"your output equals {description}: an answer that skips the exercise earns no "
            f"points here.\n  The task: {TRIVIAL_TASK.get(key, 'see the exercise text')}.")


# --- attention with every knob a learner can turn (grader/answers/knobs.py) ----------------

DEFAULT_FACTOR = {"head": lambda sz: 1.0, "masked_softmax": lambda sz: 1.0,
                  "causal_weights": lambda sz: 1.0}


def _default_factor(key, sz):
    return DEFAULT_FACTOR[key](sz) if key in DEFAULT_FACTOR else sz["head_size"] ** -0.5


def forward(key, inp, **knobs):
    """The exercise's output with the knobs turned; the defaults give the reference. The
    answers hand it in (grader/answers/knobs.py), through the registry."""
    return registry.knob("forward")(key, inp, **knobs)


# --- the variant families --------------------------------------------------------------------

def _factor_candidates(key, sz):
    """(expression, value) for scale factors a learner might use, in terms of the sizes."""
    out = [("no scale", 1.0)]
    hs = sz.get("head_size")
    if hs:
        out += [("1/sqrt(head_size)", hs**-0.5), ("1/head_size", 1 / hs), ("sqrt(head_size)", hs**0.5),
                ("head_size", float(hs))]
    if "n_heads" in sz:
        nh = sz["n_heads"]
        out += [("1/sqrt(n_heads\u00b7head_size)", (nh * hs) ** -0.5), ("1/(n_heads\u00b7head_size)", 1 / (nh * hs)),
                ("1/sqrt(n_heads)", nh**-0.5), ("1/n_heads", 1 / nh)]
    if "C" in sz:
        out += [("1/sqrt(C)", sz["C"] ** -0.5), ("1/C", 1 / sz["C"]), ("sqrt(C)", sz["C"] ** 0.5)]
    out += [("1/sqrt(T)", sz["T"] ** -0.5), ("1/T", 1 / sz["T"]), ("sqrt(T)", sz["T"] ** 0.5)]
    return out


CORRECT_SCALE = {"head": "no scale (that is notebook 05's subject)",
                 "masked_softmax": "no scale", "causal_weights": "no scale"}


def _scale_variants(key, sz):
    right = _default_factor(key, sz)
    want = CORRECT_SCALE.get(key, "head_size ** -0.5 = 1/sqrt(head_size)")
    for expr, value in _factor_candidates(key, sz):
        if math.isclose(value, right, rel_tol=1e-9):
            continue
        yield (Finding("scale", f"scores scaled by {expr} (= {value:.4g})",
                       f"use {want}; here {_sizes_text(sz, ('T', 'C', 'head_size', 'n_heads'))}."),
               dict(factor=value))


def _flag_variants(key, inp):
    if key in ("head", *MHA):
        if inp["causal"]:
            yield (Finding("causal_ignored", "causal=True ignored: the future is visible",
                           "store the flag in __init__ (self.causal = causal) and mask when it is True."),
                   dict(mask="none"))
        else:
            yield (Finding("always_causal", "causal=False ignored: the future is always hidden",
                           "store the flag in __init__ (self.causal = causal) and mask only when it is True."),
                   dict(mask="causal"))
    elif key == "scaled_dot_product_attention":
        if inp["mask"] is not None:
            yield (Finding("mask_ignored", "the mask argument is ignored",
                           "when mask is given, fill those scores with -inf before the softmax."),
                   dict(mask="none"))
            yield (Finding("always_causal", "a causal mask used instead of the given mask",
                           "use the mask you are given (True = hidden); it is not always causal."),
                   dict(mask="causal"))
        else:
            yield (Finding("always_causal", "a causal mask applied although mask is None",
                           "mask only when a mask is given: if mask is not None: ..."),
                   dict(mask="causal"))
    elif key == "masked_softmax":
        yield (Finding("always_causal", "a causal mask used instead of the given mask",
                       "use the mask argument (True = hidden), whatever its pattern."), dict(mask="causal"))
        yield (Finding("mask_plus_causal", "the given mask combined with a causal one",
                       "use the mask argument alone; it already says what is hidden."),
               dict(mask="given+causal"))
    elif key == "causal_weights":
        for offset, name in ((2, "mask shifted: token t also sees token t+1"),
                             (-1, "mask shifted: token t sees neither itself nor token t-1")):
            yield (Finding("mask_offset", name,
                           "hide exactly the positions above the diagonal: triu(ones(T, T), diagonal=1)."),
                   dict(mask=f"offset{offset}"))


ORDER_NAMES = {("nh", "T", "hs"): "(B, n_heads, T, head_size)", ("T", "nh", "hs"): "(B, T, n_heads, head_size)",
               ("T", "hs", "nh"): "(B, T, head_size, n_heads)", ("nh", "hs", "T"): "(B, n_heads, head_size, T)",
               ("hs", "T", "nh"): "(B, head_size, T, n_heads)", ("hs", "nh", "T"): "(B, head_size, n_heads, T)"}
MERGE_HINT = ("move the heads' dim back next to head_size, then reshape to (B, T, n_heads * head_size) "
              "(reshape, since a transpose is not contiguous)")
SPLIT_HINT = ("a view as (B, T, n_heads, head_size), then T and n_heads swapped: head h owns "
              "features h*head_size..(h+1)*head_size-1")


def _layout_variants(key):
    if key in ("head", "scaled_dot_product_attention"):
        yield (Finding("operands_swapped", "queries and keys swapped (k @ q^T)",
                       "the scores are the queries times the keys (transposed), not the other way "
                       "round: row t holds what query t finds in every key."),
               dict(order="kq"))
        yield (Finding("weights_transposed", "the weights transposed before they meet v (wei.mT @ v)",
                       "out = wei @ v: row t of wei (query t) mixes the values of the keys."),
               dict(apply="wTv"))
    if key not in MHA:
        return
    right = ("T", "nh", "hs")
    for merge in itertools.permutations(right):
        for split in itertools.permutations(right):
            if split == right and merge == right:
                continue
            if split == ("nh", "T", "hs") and merge == right:
                continue  # the catalogue's heads_without_transpose
            if split == right and merge == ("nh", "T", "hs"):
                f = Finding("merge_without_transpose", "heads merged without transposing back",
                            f"(B, n_heads, T, head_size).reshape(B, T, -1) mixes time steps and heads; use {MERGE_HINT}.")
            elif split == right:
                f = Finding("merge_order", f"heads merged as {ORDER_NAMES[merge]} before the reshape",
                            f"concatenate head by head: torch.cat(outs, dim=-1), or {MERGE_HINT}.")
            elif merge == right:
                f = Finding("split_order", f"heads split as {ORDER_NAMES[split]}", f"use {SPLIT_HINT}.")
            else:
                f = Finding("split_merge_order",
                            f"heads split as {ORDER_NAMES[split]} and merged as {ORDER_NAMES[merge]}",
                            f"split with {SPLIT_HINT}; merge with {MERGE_HINT}.")
            yield f, dict(split=split, merge=merge)
    for merge in (("T", "nh", "hs"), ("nh", "T", "hs")):
        yield (Finding("heads_over_time", "attention across the heads instead of across time",
                       "after view(B, T, n_heads, head_size), transpose(1, 2) so the softmax runs over T."),
               dict(heads_over_time=True, merge=merge))


def _weights_variants(key):
    if key in BAG + ("running_average_weights",):
        use = "wei @ x with wei = torch.tril(...) normalised by rows" if key in BAG else \
            "torch.tril, each row divided by its own sum"
        yield (Finding("weights_transposed", "the averaging weights transposed (upper-triangular)",
                       f"row t of the weights averages tokens 0..t: {use}."), dict(weights="transposed"))
        yield (Finding("normalised_columns", "the weights' columns normalised instead of their rows",
                       "divide each row by its own sum: wei.sum(1, keepdim=True)."), dict(weights="columns"))
        yield (Finding("missing_keepdim", "row sums divided without keepdim=True",
                       "tril.sum(1) has shape (T,) and divides column j by row j's sum; "
                       "use tril.sum(1, keepdim=True), shape (T, 1)."), dict(weights="keepdim"))
        yield (Finding("zero_fill", "a softmax of the 0/1 tril pattern",
                       "the zeros above the diagonal still get weight exp(0) = 1: fill them with "
                       "-inf before the softmax, or divide tril(ones) by its row sums."), dict(weights="softmax"))
    if key in BAG:
        yield (Finding("batch_flattened", "the batch flattened into one long sequence",
                       "each sequence is averaged on its own: a (T, T) weight matrix times the "
                       "(B, T, C) batch, no reshape."), dict(along="flat"))
        for along, name in ((0, "B"), (2, "C")):
            yield (Finding("wrong_dim", f"the running mean taken along {name} instead of T",
                           f"average over the tokens (dim 1, T) of each sequence, not over {name}."),
                   dict(along=along))
            yield (Finding("wrong_dim", f"a mean over {name} instead of a running mean over T",
                           "token t averages tokens 0..t of its own sequence, along T."),
                   dict(along=f"mean {along}"))


def _fill_variants(key):
    if key in WEIGHTS + ATTENTION:
        yield (Finding("zero_fill", "masked scores set to 0 instead of -inf",
                       "a score of 0 still gets weight exp(0) after the softmax; fill with float('-inf') "
                       "(torch.tril on the scores does the same harm)."), dict(fill=0.0))


def _variants(key, inp, sz):
    yield from _weights_variants(key)
    if key not in ATTENTION + WEIGHTS:
        return
    yield from _flag_variants(key, inp)
    yield from _fill_variants(key)
    yield from _scale_variants(key, sz)
    yield from _layout_variants(key)


# --- comparing ------------------------------------------------------------------------------

def _matches(actual, guess, close):
    guess = guess.detach().to("cpu", torch.float64)
    return guess.shape == actual.shape and (close(actual, guess) or close(
        actual.nan_to_num(0.0), guess.nan_to_num(0.0)))


def _fit_scale(key, inp, actual, close):
    """The scale factor that reproduces the output, searched over a log grid, then refined."""
    def err(logf):
        try:
            out = forward(key, inp, factor=math.exp(logf)).to("cpu", torch.float64)
        except Exception:
            return float("inf")
        return float((out - actual).abs().max()) if out.shape == actual.shape else float("inf")
    grid = [i / 4 for i in range(-40, 21)]
    best = min(grid, key=err)
    lo, hi = best - 0.25, best + 0.25
    g = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if err(a) < err(b):
            hi = b
        else:
            lo = a
    f = math.exp((lo + hi) / 2)
    out = forward(key, inp, factor=f)
    return f if _matches(actual, out, close) else None


def _say_number(f, sz=None):
    """0.25 -> '1/sqrt(16)'; 1/sqrt(10) with head_size = 5 -> '1/sqrt(10 = 2·head_size)'; 0.3 -> '0.3'."""
    def said(n):
        if not sz:
            return str(n)
        name = name_number(n, sz) or (f"2\u00b7{name_number(n // 2, sz)}" if n % 2 == 0 and name_number(n // 2, sz) else None)
        return f"{n} = {name}" if name else str(n)
    inv = 1 / f
    if abs(inv**2 - round(inv**2)) < 1e-3 * inv**2 and round(inv**2) > 1:
        return f"1/sqrt({said(round(inv ** 2))})"
    if abs(inv - round(inv)) < 1e-3 * inv and round(inv) > 1:
        return f"1/{said(round(inv))}"
    return f"{f:.4g}"


def layout_finding(actual, expected, close, names):
    """The right numbers in the wrong layout: a permutation or a reshape of the expected."""
    if actual.numel() != expected.numel() or actual.dim() == 0:
        return None
    dims = list(range(expected.dim()))
    label = lambda perm: "(" + ", ".join(names[i] for i in perm) + ")" if names else str(perm)
    for perm in itertools.permutations(dims):
        if list(perm) == dims:
            continue
        e = expected.permute(perm)
        if e.shape == actual.shape and close(actual, e):
            if expected.dim() >= 2 and list(perm) == dims[:-2] + [dims[-1], dims[-2]]:
                return Finding("transposed", "the last two dims swapped (the result transposed)",
                               f"expected {label(dims)}; yours is {label(perm)}: "
                               "check which side of each matmul or transpose is which.")
            return Finding("permuted", f"the right numbers with dims ordered {label(perm)}",
                           f"expected {label(dims)}: put the dims back with .permute/.transpose.")
    for perm in itertools.permutations(dims):
        e = expected.permute(perm).reshape(actual.shape)
        if close(actual, e):
            how = "without a permute" if list(perm) == dims else f"from {label(perm)}"
            return Finding("reshaped", f"the right numbers in the wrong places: a view/reshape {how}",
                           "view and reshape never move numbers between dims; transpose first, then reshape.")
    return None


def _express_factor(c, sz):
    """The factor c said in the sizes ('1/T', 'sqrt(head_size)', 'T'), or None."""
    for expr, value in _factor_candidates("", sz):
        if value != 1.0 and math.isclose(c, value, rel_tol=1e-4):
            return expr
    for name, v in sz.items():
        if math.isclose(c, v, rel_tol=1e-4):
            return name
    return None


def unfilled_finding(actual, expected, close, names):
    """Right everywhere except whole slices left at zero (a loop that stops early, a return
    inside a loop)."""
    for d in range(actual.dim()):
        zero = [i for i in range(actual.shape[d]) if not actual.select(d, i).any()
                and expected.select(d, i).abs().max() > 1e-6]
        if not zero or len(zero) == actual.shape[d]:
            continue
        keep = [i for i in range(actual.shape[d]) if i not in zero]
        idx = torch.tensor(keep)
        if close(actual.index_select(d, idx), expected.index_select(d, idx)):
            name = names[d] if names and d < len(names) else f"dim {d}"
            where = ", ".join(map(str, zero[:4])) + (", ..." if len(zero) > 4 else "")
            return Finding("unfilled", f"right everywhere except {name} = {where}, left at 0",
                           "those were never written: a loop that stops early (range(T - 1)?) "
                           "or a return inside the loop.")
    return None


def ratio_finding(actual, expected, close, tol, names, sz):
    """Right up to a factor: constant, changing along one dim, or u[i]/u[j] (a row
    normaliser read along the columns: a sum without keepdim=True)."""
    atol = tol["atol"]
    support = expected.abs() > 1e-6
    if not support.any() or actual.shape != expected.shape:
        return None
    if (actual[~support].abs() > atol * 10).any():
        return None
    r = torch.where(support, actual / expected.where(support, torch.ones_like(expected)),
                    torch.full_like(expected, float("nan")))
    vals = r[support]
    if (vals.max() - vals.min()).abs() <= 1e-3 * vals.abs().max():
        c = float(vals.mean())
        if abs(c - 1) < 1e-3:
            return None
        expr = _express_factor(c, sz) if sz else None
        return Finding("constant_factor", f"every value is {c:.4g} times the expected one"
                       + (f" (a factor {expr})" if expr else ""),
                       "the pattern is right; look for an extra or a missing division or scale.")
    if expected.dim() >= 2 and expected.shape[-1] == expected.shape[-2] and bool(support[..., :, 0].all()):
        u = r[..., :, 0]  # (..., T)
        pred = u.unsqueeze(-1) / u.unsqueeze(-2)  # (..., T, T)
        if torch.allclose(r[support], pred[support], rtol=1e-3, atol=1e-6):
            return Finding("missing_keepdim", "a row normaliser broadcast along the columns",
                           "wei.sum(-1) has shape (..., T) and divides column j by row j's sum; keep "
                           "the dim: wei.sum(-1, keepdim=True).")
    for d in range(expected.dim()):
        moved = r.movedim(d, 0).reshape(r.shape[d], -1)
        sup = support.movedim(d, 0).reshape(r.shape[d], -1)
        ok = True
        for i in range(moved.shape[0]):
            row = moved[i][sup[i]]
            if row.numel() and (row.max() - row.min()).abs() > 1e-3 * row.abs().max():
                ok = False
                break
        if ok:
            name = names[d] if names and d < len(names) else f"dim {d}"
            factors = []
            for i in range(min(3, moved.shape[0])):
                row = moved[i][sup[i]]
                factors.append(f"{float(row.mean()):.3g}" if row.numel() else "?")
            return Finding("factor_along_dim", f"values right up to a factor that changes along {name}",
                           f"at {name} = 0, 1, 2 yours are {', '.join(factors)} times the expected ones: "
                           f"the count or sum you divide by is wrong for each {name}.")
    return None


def nonfinite_finding(actual, names, key=""):
    """Where NaN/inf values sit: everywhere, or all at one index of one dim."""
    bad = ~torch.isfinite(actual)
    if not bad.any():
        return None
    if key in ("online_softmax", "tiled_attention") and bool((actual == float("inf")).all()):
        return Finding("max_not_updated", "every value is +inf: the maximum subtracted at the end is still -inf",
                       "after each step store the new running maximum (m = m_new), so that exp(x - m) "
                       "is at most 1.")
    if bad.all() and key in LATER:  # no mask argument here: say where, not how
        return Finding("all_nan", "every value is NaN or inf",
                       "follow one row by hand on a few scores: print the running maximum m and sum "
                       "l after each step, and look for inf - inf, 0 * inf or 0 / 0.")
    if bad.all():
        return Finding("all_nan", "every value is NaN or inf",
                       "an inf met a 0 early on (0 * -inf, or inf - inf): hide scores with "
                       "masked_fill(mask, float('-inf')), never by arithmetic with inf.")
    where = bad.nonzero()
    for d in range(actual.dim()):
        idx = where[:, d].unique()
        if idx.numel() == 1 and actual.shape[d] > 1 and (d > 0 or actual.dim() == 2):
            name = names[d] if names and d < len(names) else f"dim {d}"
            i = int(idx)
            if key in BAG or key == "running_average_weights":
                hint = ("a division by zero at the first position (a count of t instead of t + 1?)"
                        if i == 0 else "a division by zero (or a row with nothing to average) there")
            elif i == 0 and name == "T":
                hint = ("the first query sees no key at all: a causal mask that also hides the "
                        "diagonal (key >= query) leaves it nothing to attend to; hide only key > query")
            else:
                hint = "a division by zero (or a row with nothing to attend to) there"
            return Finding("nonfinite_at", f"the NaN/inf values all sit at {name} = {i}", hint + ".")
    return None


def softmax_sum_finding(actual, expected, scores, close):
    """For a softmax computed with a running sum: rows that are the softmax times a factor
    (the exps right, the sum they are divided by wrong), and what the factors say."""
    sums = actual.sum(-1, keepdim=True)
    if not torch.isfinite(sums).all() or bool((sums <= 0).any()) or not close(actual, expected * sums):
        return None
    if close(sums, torch.ones_like(sums)) and close(actual, expected):
        return None
    lo, hi = float(sums.min()), float(sums.max())
    if bool((sums >= 1).all()):
        return Finding("scores_skipped", f"each row is the softmax times {lo:.4g} to {hi:.4g}: the running "
                       "sum misses some scores",
                       "the exps are right but l is too small: the loop must add every score of the row "
                       "to l, the first (index 0) to the last (N - 1).")
    if not bool((sums < 1).all()):
        return None
    top = scores.amax(-1, keepdim=True)
    l_true = torch.exp(scores - top).sum(-1, keepdim=True)  # the right running sum
    eps = l_true * (1 / sums - 1)  # what was added to it
    if float(eps.max() - eps.min()) <= 1e-3 * float(eps.max()):
        return Finding("sum_epsilon", f"a constant {float(eps.mean()):.2g} added to the running sum before dividing",
                       "l is at least 1 (the largest score's own term is exp(0) = 1), so nothing can divide "
                       "by zero: divide by l alone.")
    return Finding("sum_too_large", f"each row is the softmax times {lo:.4g} to {hi:.4g}: the running sum "
                   "comes out too large",
                   "each step adds exp(x_j - m_new), against the maximum after this score, to the old sum "
                   "rescaled by exp(m - m_new).")


def overflow_finding(key):
    """Right on the check's inputs, NaN/inf once they change: something overflows."""
    if key not in ("online_softmax", "tiled_attention"):
        return None
    return Finding("maximum_decreases", "right on these inputs, NaN/inf once the keys change: an exp overflows",
                   "exp(m - m_new) overflows when m_new can be lower than m: the running maximum must never go "
                   "down, m_new = torch.maximum(m, the new scores' maximum).")


def analyse(key, inp, *, actual=None, expected=None, close=None, tol=None, facts=None,
            names=None, error=None):
    """A Finding that explains this output (or this error), or None.

    inp: the check's inputs (float64); actual: the student's output (float64, CPU) or
    None; expected: the reference output (float64, CPU); error: (type name, message);
    facts: grader.checks.student_call.code_facts of the student's code, or None."""
    sz = sizes(key, inp)
    if error is not None:
        return error_finding(error[0], error[1], sz, facts, key)
    finding = module_finding(facts) if (facts or {}).get("module", {}).get("shared_modules") else None
    if finding:
        return finding
    finding = globals_finding(facts, sz, key=key)
    if finding or actual is None:
        return finding
    if not torch.isfinite(actual).all():
        return nonfinite_finding(actual, names, key)
    if expected is not None and _matches(actual, expected, close):
        return None  # right values: whatever failed, the values say nothing about it
    if key == "generate":
        return context_length_finding(inp, actual, expected)
    if expected is not None and actual.shape != expected.shape:
        return shape_finding(key, actual.shape, expected, close, names, sz)
    if key == "online_softmax" and expected is not None:
        finding = softmax_sum_finding(actual, expected, inp["scores"], close)
        if finding:
            return finding
    for finding, knobs in _variants(key, inp, sz):
        try:
            guess = forward(key, inp, **knobs)
        except Exception:
            continue
        if expected is not None and _matches(expected, guess, close):
            continue  # the same as the right answer on these inputs: says nothing
        if _matches(actual, guess, close):
            return finding
    if expected is None:
        return None
    finding = layout_finding(actual, expected, close, names) or unfilled_finding(
        actual, expected, close, names) or ratio_finding(actual, expected, close, tol or {"atol": 1e-5}, names, sz)
    if finding:
        return finding
    if key in LATER:  # their modules are built from given code (C // n_heads, buffers): its
        return None   # patterns say nothing about the part the student wrote
    thrown = sorted((facts or {}).get("discarded", ()))
    if thrown:
        return Finding("not_assigned", f"the result of {thrown[0]}(...) is thrown away",
                       f"{thrown[0]} returns a new tensor and leaves its input as it was: assign it "
                       f"(wei = wei.{thrown[0]}(...)).")
    if "//" in (facts or {}).get("operators", ()):
        return Finding("floor_division", "floor division //",
                       "a // b rounds down to a whole number; divide with / for averages.")
    if key in ATTENTION + WEIGHTS:
        f = _fit_scale(key, inp, actual, close)
        if f is not None:
            want = CORRECT_SCALE.get(key, "head_size ** -0.5")
            return Finding("scale", f"scores scaled by {_say_number(f, sz)}",
                           f"use {want}, computed from the inputs; here {_sizes_text(sz, ('T', 'C', 'head_size', 'n_heads'))}.")
    return None


def context_length_finding(inp, actual, expected):
    """generate's tokens, when they are those of a model always given the last L tokens
    for one L other than block_size: how long the context was."""
    _generate = registry.knob("generate")  # grader/answers/mistakes.py's generate with knobs
    block_size, T = int(inp["block_size"]), len(inp["idx"][0])
    args = (inp["model"], inp["idx"], inp["max_new_tokens"], block_size, inp["temperature"], inp["seed"])
    for L in range(1, inp["model"]["pos"].shape[0] + 1):
        try:
            guess = _generate(*args, crop=L).to(actual.dtype)
        except Exception:
            continue
        if L == block_size or (expected is not None and torch.equal(guess, expected.to(guess.dtype))):
            continue
        if torch.equal(guess, actual):
            if L == T:
                why = (f"the prompt's length T = {T}: a length read before the loop (idx.shape[1] "
                       "of the prompt) stays fixed while idx grows")
            elif abs(L - block_size) == 1:
                why = f"block_size {'+' if L > block_size else '-'} 1: the crop is off by one"
            else:
                why = f"not block_size = {block_size}"
            return Finding("context_length", f"the model was given the last {L} tokens each step",
                           f"{L} is {why}. Keep the last block_size tokens of the growing "
                           "sequence at every step.")
    return None


def shape_finding(key, shape, expected, close, names, sz):
    """Why the output has this shape, said in the sizes."""
    named = name_shape(shape, sz)
    want = name_shape(expected.shape, sz)
    if named is None or want is None:
        return None
    parts = named.strip("()").split(", ")
    if "n_heads" in parts and "head_size" in parts:
        return Finding("heads_not_merged", f"the output is {named}: the heads are still separate",
                       f"merge them back: {MERGE_HINT}, then self.proj.")
    if sorted(parts) == sorted(want.strip("()").split(", ")):
        return Finding("dims_order", f"the output is {named}, not {want}",
                       "the right sizes in the wrong order: a transpose or view swapped two dims.")
    if parts[-2:] == ["T", "T"] and want.endswith("T, T)") is False:
        return Finding("returned_weights", f"the output is {named}: the attention weights",
                       "return the weights applied to the values: wei @ v.")
    return Finding("shape_named", f"the output is {named}; expected {want}",
                   "follow the shape of each step with a comment like # (B, T, head_size).")


# --- errors: the sizes they name ---------------------------------------------------------------

SIZE_CONTEXT = re.compile(r"[\[(]\s*(\d+(?:\s*,\s*\d+)+)\s*,?\s*[\])]|torch\.Size\(\[([\d, ]+)\]\)"
                          r"|\bsizes? \(?(\d+)\)?|\bshape \[?(\d+)")


def size_numbers(message):
    """The numbers an error message gives as sizes (in a shape like (2, 3, 5) or [2, 3], or
    after "size"), not the dims, positions, counts and indices it also mentions."""
    out = []
    for m in SIZE_CONTEXT.finditer(message):
        text = next(g for g in m.groups() if g is not None)
        out += [int(n) for n in re.findall(r"\d+", text)]
    return out


REDUCTIONS = {"sum", "mean", "amax", "max", "logsumexp", "norm", "count_nonzero"}


@dataclass
class _ErrorContext:
    """What an error rule sees besides its match: the error's type, the check's sizes and
    facts about the student's code."""
    type_name: str
    sz: dict
    facts: object
    key: str = ""

    def nm(self, n):
        """n, with the size it equals when it equals exactly one ("7 = T")."""
        return f"{n} = {name_number(n, self.sz)}" if name_number(n, self.sz) else str(n)


def _broadcast(m, ctx):
    a, b, d = map(int, m.groups())
    reduced = sorted(REDUCTIONS & _attrs(ctx.facts))
    if reduced and "keepdim" not in set((ctx.facts or {}).get("keywords", ())):
        article = "an" if reduced[0][0] in "aeiou" else "a"
        hint = f"{article} {reduced[0]}(...) without keepdim=True lost its dim; keep it with keepdim=True"
    elif {name_number(a, ctx.sz), name_number(b, ctx.sz)} == {"B", "T"}:
        hint = ("one tensor has T where the other has B: a (T, C) tensor lines up with (B, T, C) "
                "from the right as it is; an unsqueeze, view or transpose that puts T in front of "
                "another dim breaks that")
    elif d == 0:
        hint = "the leading dims disagree: a transpose or view moved a dim to the front; transpose the last two dims only (-2, -1)"
    else:
        hint = ("one of the two was built from the wrong size (T = x.shape[1], not shape[0] or "
                "[-1]), or lacks a dim ((T, 1) for a (T,) vector, keepdim=True after a sum)")
    return Finding("broadcast", f"shapes do not line up: {ctx.nm(a)} meets {ctx.nm(b)} (dimension {d})", hint + ".")


def _expanded(m, ctx):
    a, b, d = map(int, m.groups())
    return Finding("broadcast", f"a slot of size {ctx.nm(a)} given a tensor of size {ctx.nm(b)} (dimension {d})",
                   "the value assigned has the wrong shape: check which dim the reduction "
                   "(mean, sum) runs over.")


def _matmul(m, ctx):
    a, b, c, d = map(int, m.groups())
    labels = " ".join(name_number(n, ctx.sz) or "" for n in (a, b, c, d))
    if re.search(r"n_heads\u00b7T|T\u00b7n_heads", labels):
        return Finding("cat_dim", "the heads stacked along time instead of along the features",
                       "concatenate the heads' outputs on the last dim: torch.cat(outs, dim=-1).")
    if d == b:
        hint = "the second matrix looks transposed: nn.Linear keeps its weight as (out, in); call the layer, or use W.T"
    elif c > 1 and a % c == 0 and a != c:
        hint = "the operands look swapped: the weights go first (wei @ x), each row mixing the tokens"
    else:
        hint = "the inner sizes of a matmul must agree"
    nm = ctx.nm
    return Finding("matmul_sizes", f"a matmul of ({nm(a)}, {nm(b)}) by ({nm(c)}, {nm(d)})", hint + ".")


def _batched_matmul(m, ctx):
    a, b, c, d = map(int, m.groups())
    return Finding("matmul_sizes", f"a batched matmul whose first operand has {ctx.nm(b)} columns "
                   f"while the second has {ctx.nm(d)} rows",
                   "the inner sizes must agree: a size read from the wrong dim, or an operand "
                   "that needs .mT (transpose(-2, -1)).")


def _not_stored(m, ctx):
    n = m.group(1)
    if n not in ("C", "head_size", "block_size", "causal", "n_heads"):
        return None
    return Finding("not_stored", f"forward reads {n}, an argument of __init__",
                   f"__init__'s arguments are gone once it returns: keep it (self.{n} = {n}) and "
                   f"read self.{n}.")


def _reshape(m, ctx):
    want = [int(s) for s in m.group(1).split(",")]
    have = int(m.group(2))
    shown = ", ".join(ctx.nm(w) if w > 0 else str(w) for w in want)
    return Finding("reshape_sizes", f"a view/reshape to ({shown}) of {ctx.nm(have)} numbers",
                   "the sizes of a view must multiply to the tensor's size; take them from x.shape.")


def _index(m, ctx):
    i, d, s = map(int, m.groups())
    return Finding("index_range", f"index {i} past the end of a dim of size {ctx.nm(s)}",
                   "loop over range(size) with the size read from the tensor's shape.")


def _dim_range(m, ctx):
    lo, hi, got = map(int, m.groups())
    return Finding("dim_range", f"dim {got} of a tensor with {hi + 1} dims",
                   "count dims from the end (-1 the last, -2 the one before) so any batch shape works.")


def _unpack(m, ctx):
    return Finding("unpack", "unpacking a shape with the wrong number of names",
                   f"the input here has sizes {_sizes_text(ctx.sz)}; unpack as many names as it has dims.")


def _dtype(m, ctx):
    if ctx.type_name not in ("RuntimeError", "TypeError"):
        return None
    return Finding("dtype_mixed", "tensors of two dtypes mixed",
                   "create new tensors with dtype=x.dtype (and device=x.device), or .to(x).")


def _cat(m, ctx):
    d, a, b = map(int, m.groups())
    return Finding("cat_sizes", f"torch.cat along dim {d} of tensors whose other dims differ "
                   f"({ctx.nm(a)} against {ctx.nm(b)})",
                   "torch.cat joins along one dim and every other dim must agree: check that "
                   "dim is the one that grows (for keys and values, the time dim).")


def _tensor_truth(m, ctx):
    compared = sorted({"max", "min"} & set((ctx.facts or {}).get("builtins", ())))
    if compared:
        name = compared[0]
        return Finding("python_max", f"Python's {name}() on tensors",
                       f"{name}(a, b) asks whether a > b as one True/False; for an elementwise "
                       f"{'maximum' if name == 'max' else 'minimum'} use torch.{name}imum(a, b).")
    hint = ("if, and, or, not (and Python's max/min) need one True/False: compare tensors "
            "elementwise with torch.where, torch.maximum or &, |." if ctx.key in LATER  # no optional argument
            else "to ask whether an argument was given, test `if mask is not None:`.")
    return Finding("tensor_truth", "a tensor used as a True/False condition", hint)


def _fixed(key, name, hint):
    return lambda m, ctx: Finding(key, name, hint)


# (pattern searched in the error's message, rule(match, context) -> Finding or None), in
# order: the first rule whose pattern matches and which returns a Finding names the error.
ERROR_RULES = (
    (r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at "
     r"non-singleton dimension (\d+)", _broadcast),
    (r"expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\) at "
     r"non-singleton dimension (\d+)", _expanded),
    (r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", _matmul),
    (r"Expected size for first two dimensions of batch2 tensor to be: \[(\d+), (\d+)\] "
     r"but got: \[(\d+), (\d+)\]", _batched_matmul),
    (r"name '(\w+)' is not defined", _not_stored),
    (re.escape("Boolean value of Tensor with more than one value is ambiguous"), _tensor_truth),
    (re.escape("view size is not compatible with input tensor's size and stride"),
     _fixed("view_after_transpose", ".view on a transposed (non-contiguous) tensor",
            "after a transpose use .reshape(...) (or .contiguous().view(...)).")),
    (r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)", _reshape),
    (r"index (\d+) is out of bounds for dimension (\d+) with size (\d+)", _index),
    (r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], but got (-?\d+)\)", _dim_range),
    (r"not enough values to unpack \(expected (\d+), got (\d+)\)|too many values to unpack "
     r"\(expected (\d+)", _unpack),
    (r"(?s)(?=.*masked_fill)(?=.*bool)",
     _fixed("mask_dtype", "a mask that is not boolean", "masked_fill needs a bool mask: use tril == 0, or .bool().")),
    (r"same dtype|expected scalar type|dtype", _dtype),
    (r"device", _fixed("device_mixed", "tensors on two devices mixed",
                       "create new tensors with device=x.device, or register them as buffers in a module.")),
    (r"Sizes of tensors must match except in dimension (\d+)\. Expected size (\d+) but got "
     r"size (\d+)", _cat),
)


def error_finding(type_name, message, sz, facts=None, key=""):
    """A Finding for an error the student's code raised, from the sizes in its message."""
    numbers = [int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", message)]
    found = globals_finding(facts, sz, error_numbers=set(numbers), key=key)
    if found:
        return found
    ctx = _ErrorContext(type_name, sz, facts, key)
    for pattern, rule in ERROR_RULES:
        m = re.search(pattern, message)
        found = rule(m, ctx) if m else None
        if found:
            return found
    given = size_numbers(message)
    if given:
        named = [ctx.nm(n) for n in dict.fromkeys(given) if name_number(n, sz)]
        if named:
            return Finding("sizes", f"the sizes in the error are {', '.join(named)}",
                           "follow each step's shape with a comment like # (B, T, C).")
    return None


# --- device and dtype -----------------------------------------------------------------------------

def device_message(result, facts):
    """(message, finding key) for the problem in a run on the meta device
    (grader.checks.student_call.execute_on_meta), or None.

    Only errors that are about devices count: code whose Python branches read values
    cannot run on the meta device at all, and says nothing about devices."""
    mod = (facts or {}).get("module") or {}
    plain = module_finding({"module": {"tensor_attributes": mod.get("tensor_attributes", ())}})
    extra = f"\n  Likely mistake: {plain.name} \u2014 {plain.hint}" if plain else \
        "\n  Create new tensors with device=x.device (in a module: register_buffer)."
    key = plain.key if plain else "follows_inputs"
    if "error" in result:
        msg = result["message"]
        if re.search(r"device|Cannot copy out of meta", msg):
            return (f"with its inputs on another device (the meta device), your code mixes devices: "
                    f"{result['error']}: {msg[:100]}{extra}", key)
        return None
    if result.get("mixed"):
        op, shape, device = result["mixed"]
        return (f"with its inputs on another device (the meta device), your code hands aten.{op} a "
                f"tensor of shape {tuple(shape)} made on {device}: on a GPU this fails.{extra}", key)
    if result.get("device") not in (None, "meta"):
        return (f"with its inputs on another device (the meta device), your code returned a "
                f"tensor on {result['device']}.{extra}", key)
    return None


# --- shortcuts ----------------------------------------------------------------------------------

def refine(mistake, facts):
    """A catalogued mistake said more precisely when the code shows how it came about."""
    attrs = _attrs(facts)
    key = getattr(mistake, "key", None)
    if key == "finite_fill" and "nan_to_num" in attrs:
        return Finding("nan_to_num_early", "nan_to_num before the softmax",
                       "it turns -inf into a finite number, so a fully masked row comes out uniform: "
                       "call nan_to_num(0.0) on the weights, after the softmax.")
    if key == "mask_ignored" and "masked_fill" in (facts or {}).get("discarded", ()):
        return Finding("not_assigned", "the mask has no effect: is masked_fill's result kept?",
                       "masked_fill returns a new tensor and leaves wei as it was: wei = wei.masked_fill(...).")
    return mistake


def shortcut(key, facts, forbidden):
    """The name of a function from the forbidden list (or from the course's own grader)
    that the student's code uses, or None. A function defined where the student's code is
    (its home: a notebook's __main__) is the student's own, whatever that module is called."""
    if not facts:
        return None
    names = forbidden.get(key, ())
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


# --- the smallest failing case, as a picture ------------------------------------------------------

def crop(key, inp, L):
    """The check's inputs cut to the first L time steps (all exercises are causal-safe to cut)."""
    out = dict(inp)
    if key == "running_average_weights":
        out["T"] = L
    elif key in BAG or key == "head" or key in MHA:
        out["x"] = inp["x"][:, :L]
    elif key in WEIGHTS:
        out["scores"] = inp["scores"][..., :L, :L]
        if key == "masked_softmax":
            out["mask"] = inp["mask"][..., :L, :L]
    elif key == "scaled_dot_product_attention":
        for n in ("q", "k", "v"):
            out[n] = inp[n][:, :L]
        if inp["mask"] is not None:
            out["mask"] = inp["mask"][..., :L, :L]
    elif key == "block" or key == "cached_attention":
        out["x"] = inp["x"][:, :L]
        if key == "cached_attention":
            prompt = min(inp["chunks"][0], L)
            out["chunks"] = [prompt] + [1] * (L - prompt)
    elif key == "gpt":
        out["idx"] = inp["idx"][:, :L]
    elif key == "online_softmax":
        out["scores"] = inp["scores"][..., :L, :]
    elif key == "tiled_attention":
        for n in ("q", "k", "v"):
            out[n] = inp[n][..., :L, :]
    return out


def time_steps(key, inp):
    if key == "generate":  # sampled ids are not cut shorter: the picture shows them whole
        return 0
    return sizes(key, inp)["T"]


AXES = {"weights": ("key", "query"), "output": ("feature", "token"), "ids": ("position", "sequence")}


def picture(expected, actual, title, kind="output"):
    """PNG bytes: expected | yours | difference heatmaps of one 2-D slice."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    expected, actual = expected.detach().cpu().double(), actual.detach().cpu().double()
    diff = actual - expected
    lo = float(min(expected.min(), actual.min()))
    hi = float(max(expected.max(), actual.max()))
    span = float(diff.abs().max()) or 1.0
    fig = Figure(figsize=(8.4, 2.8), dpi=80)
    FigureCanvasAgg(fig)
    xlabel, ylabel = AXES[kind]
    panels = [("expected", expected, "viridis", lo, hi), ("yours", actual, "viridis", lo, hi),
              ("yours \u2212 expected", diff, "RdBu_r", -span, span)]
    for i, (name, data, cmap, vmin, vmax) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        im = ax.imshow(data.numpy(), cmap=cmap, vmin=vmin, vmax=vmax,
                       interpolation="nearest", aspect="auto")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        if i == 0:
            ax.set_ylabel(ylabel, fontsize=9)
        rows, cols = data.shape
        ax.set_xticks(range(0, cols, max(1, cols // 8)))
        ax.set_yticks(range(0, rows, max(1, rows // 8)))
        ax.tick_params(labelsize=7)
        if rows * cols <= 36 and cols <= 8:  # few cells: write the numbers in
            for r in range(rows):
                for c in range(cols):
                    v = float(data[r, c])
                    shade = (v - vmin) / ((vmax - vmin) or 1.0)
                    ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if (shade < 0.5 if cmap == "viridis" else abs(shade - 0.5) > 0.3) else "black")
        if i in (1, 2):
            fig.colorbar(im, ax=ax, fraction=0.05, pad=0.03).ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def slice_2d(key, expected, actual):
    """(expected 2-D, actual 2-D, where) of the batch element that differs most."""
    if expected.dim() == 2:
        return expected, actual, ""
    err = (actual - expected).abs().reshape(expected.shape[0], -1).amax(1)
    b = int(err.argmax())
    expected, actual, where = expected[b], actual[b], f"batch {b}, "
    if expected.dim() == 3:  # (n_heads, T, head_size): the head that differs most
        h = int((actual - expected).abs().reshape(expected.shape[0], -1).amax(1).argmax())
        expected, actual, where = expected[h], actual[h], f"{where}head {h}, "
    return expected, actual, where


def picture_kind(key):
    if key == "generate":  # (B, T + max_new_tokens) token ids
        return "ids"
    return "weights" if key in WEIGHTS or key == "running_average_weights" else "output"
