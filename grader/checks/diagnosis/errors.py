"""Findings from an error the student's code raised: a table of rules over its message."""
import re
from dataclasses import dataclass

from grader.checks.diagnosis.facts import _attrs, globals_finding
from grader.checks.diagnosis.findings import PLAIN, Diagnosis, Finding
from grader.checks.diagnosis.shapes import _sizes_text, name_number, size_numbers


REDUCTIONS = {"sum", "mean", "amax", "max", "logsumexp", "norm", "count_nonzero"}


@dataclass
class _ErrorContext:
    """What an error rule sees besides its match: the error's type, the check's sizes and
    facts about the student's code."""
    type_name: str
    sz: dict
    facts: object
    hooks: Diagnosis = PLAIN

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


def _embedding_index(m, ctx):
    if "block_size" in ctx.sz and ctx.sz.get("vocab_size", 0) > ctx.sz["block_size"]:
        what = (f"an embedding table looked up past its last row: token ids go up to vocab_size - 1 = "
                f"{ctx.sz['vocab_size'] - 1}, the position table has block_size = {ctx.sz['block_size']} rows")
    else:
        what = "an embedding table looked up past its last row"
    return Finding("embedding_index", what,
                   "token ids index the token table; the position table is looked up with the "
                   "positions 0..T-1 (torch.arange(T) on idx's device), never with the token ids.")


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
            "elementwise with torch.where, torch.maximum or &, |." if ctx.hooks.given_code  # no optional argument
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
    (re.escape("index out of range in self"), _embedding_index),  # nn.Embedding, F.embedding
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


def error_finding(type_name, message, sz, facts=None, hooks=PLAIN):
    """A Finding for an error the student's code raised, from the sizes in its message."""
    numbers = [int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", message)]
    found = globals_finding(facts, sz, error_numbers=set(numbers), hooks=hooks)
    if found:
        return found
    ctx = _ErrorContext(type_name, sz, facts, hooks)
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
