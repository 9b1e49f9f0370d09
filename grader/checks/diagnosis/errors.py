"""Findings from an error the student's code raised: a table of rules over its message."""
import re
from dataclasses import dataclass

from grader.checks.diagnosis.facts import _attrs, _how, globals_finding
from grader.checks.diagnosis.findings import PLAIN, Diagnosis, Finding
from grader.checks.diagnosis.shapes import _sizes_text, name_number, size_numbers


REDUCTIONS = {"sum", "mean", "amax", "max", "logsumexp", "norm", "count_nonzero"}


@dataclass
class _ErrorContext:
    """What an error rule sees besides its match: the error's type, the check's sizes, facts
    about the student's code, the names of the output's dims and the check's inputs that
    are None."""
    type_name: str
    sz: dict
    facts: object
    hooks: Diagnosis = PLAIN
    names: tuple = ()
    none_inputs: tuple = ()

    def nm(self, n):
        """n, with the size it equals when it equals exactly one ("7 = T")."""
        return f"{n} = {name_number(n, self.sz)}" if name_number(n, self.sz) else str(n)

    def size(self, n):
        """The one size of the check that is n (not a product of sizes), or None."""
        named = [k for k, v in self.sz.items() if v == n]
        return named[0] if len(named) == 1 else None

    def how(self, name):
        """How the exercise's code reads the size called name ("T = x.shape[1]")."""
        return _how(self.hooks, name)


def _size_mixup(a, b, ctx, prefer=("T",)):
    """Two numbers that had to agree: one of them a size of the inputs, the other no size at all
    (a size written as a number) or the size of another axis of the same input (a size read
    from the wrong dim). The size in prefer is taken as the right one where both are sizes.
    Only where the student writes the whole computation (no given code, whose tiles and
    crops make numbers of their own)."""
    if ctx.hooks.given_code:
        return None
    sa, sb = ctx.size(a), ctx.size(b)
    if (sa is None) == (sb is None):
        if sa is None or sa == sb:
            return None
        right = next((s for s in prefer if s in (sa, sb)), None)
        if right is None or not {sa, sb} <= set(ctx.hooks.reads):  # both read off the same input
            return None
        wrong = sb if right == sa else sa
        have = b if right == sa else a
        want = a if right == sa else b
        return Finding("size_from_wrong_dim", f"{wrong} = {have} where {right} = {want} belongs",
                       f"{right} read from the wrong dim (the one that holds {wrong}): {ctx.how(right)}.")
    right, want, have = (sa, a, b) if sa else (sb, b, a)
    if name_number(have, ctx.sz) or have <= 1:
        return None  # a product of sizes, or 1: no hard-coded size
    return Finding("hard_coded_size", f"{have} where {right} = {want} belongs: {have} is none of this check's sizes",
                   f"a size written as a number (or taken from elsewhere) fits one input only: {ctx.how(right)}.")


def _last_two(ctx):
    """The sizes of the output's last two dims, by name, where they are named."""
    return tuple(ctx.names[-2:]) if len(ctx.names) >= 2 else ()


def _broadcast(m, ctx):
    a, b, d = map(int, m.groups())
    reduced = sorted(REDUCTIONS & _attrs(ctx.facts))
    if reduced and "keepdim" not in set((ctx.facts or {}).get("keywords", ())):
        article = "an" if reduced[0][0] in "aeiou" else "a"
        hint = f"{article} {reduced[0]}(...) without keepdim=True lost its dim; keep it with keepdim=True"
    elif ({name_number(a, ctx.sz), name_number(b, ctx.sz)} == {"B", "T"}
          and not {"unsqueeze", "view", "reshape", "transpose", "permute", "mT", "expand"} & _attrs(ctx.facts)):
        # nothing moved a dim: a tensor was built with B where T belongs
        return Finding("size_from_wrong_dim", f"shapes do not line up: {ctx.nm(a)} meets {ctx.nm(b)} "
                       f"(dimension {d}), and no dim was moved",
                       f"a tensor was built with B where T belongs: T read from the wrong dim? {ctx.how('T')}.")
    elif {name_number(a, ctx.sz), name_number(b, ctx.sz)} == {"B", "T"}:
        hint = (f"one tensor has T where the other has B: T read from the wrong dim ({ctx.how('T')})? "
                "Or an unsqueeze, view or transpose that put T in front of another dim: a (T, C) "
                "tensor lines up with (B, T, C) from the right as it is")
    elif len(_last_two(ctx)) == 2 and {ctx.size(a), ctx.size(b)} == set(_last_two(ctx)) \
            and d == len(ctx.names) - 1 and "unsqueeze" not in _attrs(ctx.facts):
        first, last = _last_two(ctx)
        return Finding("missing_unsqueeze", f"a tensor without its last dim: its {first} lines up against "
                       f"the {last} of a ({', '.join(ctx.names)}) tensor",
                       f"tensors line up from the right: give it a size-1 last dim (.unsqueeze(-1), or "
                       f"keepdim=True on the reduction that made it), shape (..., {first}, 1).")
    elif {name_number(a, ctx.sz), name_number(b, ctx.sz)} == {"n_heads", "T"}:
        hint = ("one tensor has its heads where the other has time: each of q, k and v transposed exactly "
                "once, (B, T, n_heads, head_size) -> (B, n_heads, T, head_size)? A (T, T) mask lines up "
                "with the (B, n_heads, T, T) scores from the right as it is, with no unsqueeze")
    elif d == 0:
        hint = "the leading dims disagree: a transpose or view moved a dim to the front; transpose the last two dims only (-2, -1)"
    else:
        found = _size_mixup(a, b, ctx)
        if found:
            return found
        hint = ("one of the two was built with another size, or lacks a dim ((T, 1) for a (T,) "
                "vector, keepdim=True after a sum): follow each tensor's shape")
    return Finding("broadcast", f"shapes do not line up: {ctx.nm(a)} meets {ctx.nm(b)} (dimension {d})", hint + ".")


def _expanded(m, ctx):
    """torch says this for .expand() asked to stretch a dim that is not of size 1, and for a
    value assigned into a slot (out[b, t] = ...) whose shape does not fit it."""
    a, b, d = map(int, m.groups())
    target = re.search(r"Target sizes: \[([^\]]*)\]", m.string)
    if (target and "-1" in target.group(1).replace(" ", "").split(",")) or "expand" in _attrs(ctx.facts):
        hint = ("expand only stretches a dim of size 1 (it copies nothing): a dim of "
                f"{ctx.nm(b)} cannot become {ctx.nm(a)}")
        if (ctx.size(b), ctx.size(a)) == ("n_kv_heads", "n_heads"):
            hint += (": to give each query head its key/value head, repeat each along dim 1 "
                     "(repeat_interleave), or add a group dim of size 1 first and expand that")
        return Finding("expand_non_singleton", f"expand asked to turn a dim of size {ctx.nm(b)} into "
                       f"{ctx.nm(a)} (dimension {d})", hint + ".")
    return Finding("broadcast", f"a slot of size {ctx.nm(a)} given a tensor of size {ctx.nm(b)} (dimension {d})",
                   "the value assigned has the wrong shape: check which dim the reduction "
                   "(mean, sum) runs over.")


def _matmul(m, ctx):
    a, b, c, d = map(int, m.groups())
    labels = " ".join(name_number(n, ctx.sz) or "" for n in (a, b, c, d))
    rows = set((name_number(a, ctx.sz) or "").split("\u00b7"))
    one_head = ctx.size(b) == "head_size" and "n_heads" in ctx.sz and c == ctx.sz["n_heads"] * ctx.sz["head_size"]
    if {"n_heads", "T"} <= rows or one_head:  # one head's features where all heads' belong
        return Finding("cat_dim", "the heads joined along the batch or the time dim instead of the features",
                       "torch.cat(outs, dim=0) stacks them along the batch, dim=1 along time; each token's "
                       "heads belong side by side in its features, the last dim: torch.cat(outs, dim=-1).")
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
    found = _size_mixup(b, d, ctx)
    if found:
        return found
    return Finding("matmul_sizes", f"a batched matmul whose first operand has {ctx.nm(b)} columns "
                   f"while the second has {ctx.nm(d)} rows",
                   "the inner sizes must agree: a size read from the wrong dim, a slice taken over "
                   "another range (a key tile cut with the query tile's positions), or an operand that "
                   "needs .mT (transpose(-2, -1)).")


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


def _none_used(m, ctx):
    if not ctx.none_inputs:
        return None
    name = ctx.none_inputs[0]
    return Finding("none_used", f"{name} used while it is None",
                   f"{name} is optional and this call passes None: use it only when it is given "
                   f"(if {name} is not None: ...).")


def _fixed(key, name, hint):
    return lambda m, ctx: Finding(key, name, hint)


# (pattern searched in the error's message, rule(match, context) -> Finding or None), in
# order: the first rule whose pattern matches and which returns a Finding names the error.
ERROR_RULES = (
    (r"NoneType", _none_used),
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
    (r"Tensor must have a last dimension of size 2",  # torch.view_as_complex on unpaired numbers
     _fixed("complex_unpaired", "torch.view_as_complex given a tensor whose last dim is not a pair",
            "view_as_complex reads each complex number from a last dim of size 2 (real, imaginary): "
            "view the head_size numbers as head_size // 2 pairs first.")),
    (r"(?s)(?=.*masked_fill)(?=.*bool)",
     _fixed("mask_dtype", "a mask that is not boolean", "masked_fill needs a bool mask: use tril == 0, or .bool().")),
    (r"same dtype|expected scalar type|dtype", _dtype),
    (r"device", _fixed("device_mixed", "tensors on two devices mixed",
                       "create new tensors with device=x.device, or register them as buffers in a module.")),
    (r"Sizes of tensors must match except in dimension (\d+)\. Expected size (\d+) but got "
     r"size (\d+)", _cat),
)


def error_finding(type_name, message, sz, facts=None, hooks=PLAIN, names=(), none_inputs=()):
    """A Finding for an error the student's code raised, from the sizes in its message.
    names: the output's dims by name; none_inputs: the check's inputs that are None."""
    numbers = [int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", message)]
    found = globals_finding(facts, sz, error_numbers=set(numbers), hooks=hooks)
    if found:
        return found
    ctx = _ErrorContext(type_name, sz, facts, hooks, tuple(names or ()), tuple(none_inputs))
    if hooks.error_finding:
        found = hooks.error_finding(size_numbers(message) or numbers, sz, message)
        if found:
            return found
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
