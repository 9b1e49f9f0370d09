"""The exercises of the course: how to call the student's code, which inputs to
draw, which invariants hold, and which test cell checks what ("focuses")."""
import torch

from grader.checks import diagnosis, registry
from grader.checks.exercise_keys import EXERCISE_KEYS
from grader.checks.masks import causal_mask
from grader.checks.core import Exercise, Focus, Invariant, to_device
from grader.checks.core import tolerance as _tolerance


def core_tolerance(inputs):
    """The check's tolerance for these inputs (their device and floating dtype)."""
    t = next(v for v in inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point())
    return _tolerance(t.device, t.dtype)

_NOISE_SEED = 1234


def _noise_like(t):
    gen = torch.Generator().manual_seed(_NOISE_SEED)
    return torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.device, t.dtype)


def _first_change(a, b, dim, tol):
    """Index along dim of the first slice where a and b differ."""
    for i in range(a.shape[dim]):
        if not torch.allclose(a.select(dim, i), b.select(dim, i), **tol):
            return i
    return None


# --- invariants ------------------------------------------------------------------------

def causal(keys, in_dim, out_dim, what="token"):
    """Changing the inputs after position t must leave outputs 0..t unchanged."""
    def fn(ctx):
        T = ctx.out.shape[out_dim]
        t = (T - 1) // 2
        new = dict(ctx.inputs)
        for key in keys:
            x = ctx.inputs[key].clone()
            idx = [slice(None)] * x.dim()
            idx[in_dim] = slice(t + 1, None)
            x[tuple(idx)] += 3 * _noise_like(x[tuple(idx)])
            new[key] = x
        out = ctx.run(new)
        before, after = ctx.out.narrow(out_dim, 0, t + 1), out.narrow(out_dim, 0, t + 1)
        if not ctx.close(before, after):
            i = _first_change(before, after, out_dim, ctx.tol)
            return (f"not causal: changing {what}s {t + 1}..{T - 1} changed the output at "
                    f"position {i}.\n  Position {i} may only use {what}s 0..{i}.")
    return Invariant("causal", fn)


def batch_independent(keys):
    """Changing batch element 0 must leave the other batch elements unchanged."""
    def fn(ctx):
        new = dict(ctx.inputs)
        for key in keys:
            x = ctx.inputs[key].clone()
            x[0] += 3 * _noise_like(x[0])
            new[key] = x
        out = ctx.run(new)
        if not ctx.close(ctx.out[1:], out[1:]):
            return ("batch elements are not independent: changing sequence 0 changed the "
                    "others.\n  Mix information along T only, never along the batch dim B.")
    return Invariant("batch_independent", fn)


def _rows_sum_to_one(ctx):
    sums = ctx.out.sum(-1)
    want = torch.ones_like(sums)
    mask = ctx.inputs.get("mask")
    if isinstance(mask, torch.Tensor):
        want = (~mask.cpu().expand(ctx.out.shape).all(-1)).to(sums.dtype)
    if not ctx.close(sums, want):
        msg = (f"each row must sum to 1 (a distribution over the keys); row sums range from "
               f"{float(sums.min()):.4g} to {float(sums.max()):.4g}.")
        if ctx.close(ctx.out.sum(-2), torch.ones_like(ctx.out.sum(-2))):
            msg += "\n  Your columns sum to 1 instead."
        return msg


def _masked_get_zero(ctx):
    mask = ctx.inputs["mask"].cpu().expand(ctx.out.shape)
    w = ctx.out[mask].abs()
    if w.numel() and float(w.max()) > ctx.tol["atol"]:
        return (f"masked positions must get weight 0; {int((w > ctx.tol['atol']).sum())} of "
                f"{w.numel()} masked positions have weight (up to {float(w.max()):.4g}).")


def _fully_masked_rows(ctx):
    empty = ctx.inputs["mask"].cpu().expand(ctx.out.shape).all(-1)  # (B, T)
    rows = ctx.out[empty]
    if not ctx.close(rows, torch.zeros_like(rows)):
        return ("a row whose every position is masked must come out as zeros "
                f"(it may attend to nothing); got rows with values up to {float(rows.abs().max()):.4g}.")


def _future_gets_zero(ctx):
    upper = ctx.out.triu(1)
    if not ctx.close(upper, torch.zeros_like(upper)):
        idx = tuple(int(i) for i in (upper.abs() > ctx.tol["atol"]).nonzero()[0])
        return (f"weights above the diagonal (the future) must be 0; found "
                f"{float(upper[idx]):.4g} at index {idx}.")


def _first_token(ctx):
    x = ctx.inputs["x"].detach().to("cpu", torch.float64)
    if not ctx.close(ctx.out[:, 0], x[:, 0]):
        return "the first token has only itself to average: out[:, 0] must equal x[:, 0]."


def _last_token(ctx):
    x = ctx.inputs["x"].detach().to("cpu", torch.float64)
    if not ctx.close(ctx.out[:, -1], x.mean(1)):
        return "the last token sees the whole sequence: out[:, -1] must equal x.mean(1)."


def _follows_inputs(ctx):
    """The code follows its inputs: with float64 inputs it works and returns float64; with
    its inputs on another device (the meta device: no data) it creates nothing on the CPU."""
    floats = [v for v in ctx.inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if not floats:
        return None
    other = torch.float32 if floats[0].dtype == torch.float64 else torch.float64
    inputs = to_device(ctx.inputs, floats[0].device, other)
    problem = ctx.try_run(inputs)
    if problem:
        first, _, rest = problem.partition("\n")
        hint = "" if "dtype=" in rest else "\n  Create new tensors with dtype=x.dtype and device=x.device."
        return (f"with {str(other).replace('torch.', '')} inputs, {first}" + (f"\n{rest}" if rest else "")
                + hint, "follows_inputs")
    if other == torch.float64:
        problem = _float32_inside(ctx, inputs)
        if problem:
            return problem
    meta = ctx.on_meta()
    return diagnosis.device_message(meta, ctx.facts() if ctx.facts else None) if meta else None


def _float32_inside(ctx, inputs64):
    """An answer right in float32 that, given float64 inputs, is only float32-accurate:
    something inside it (a running maximum, a sum, a buffer) was created in float32."""
    cpu64 = {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs64.items()}
    want = ctx.exercise.reference(*cpu64.values()).detach().to("cpu", torch.float64)
    if not ctx.close(ctx.out, want):
        return None  # wrong already: the values check says how
    out = ctx.run(inputs64)
    tol64 = core_tolerance(inputs64)
    if torch.allclose(out, want, **tol64):
        return None
    if "scores" in cpu64:  # a softmax: an error by the same factor in each row is no rounding
        found = diagnosis.softmax_sum_finding(out, want, cpu64["scores"], lambda a, b: torch.allclose(a, b, **tol64))
        if found and found.key == "sum_epsilon":  # the other factors may be float32 rounding
            return (f"with float64 inputs your values differ from the float64 reference by up to "
                    f"{float((out - want).abs().max()):.2g}, every row by one factor.\n  Likely mistake: "
                    f"{found.name} \u2014 {found.hint}", found.key)
    return (f"with float64 inputs your values are only float32-accurate (they differ from the "
            f"float64 reference by up to {float((out - want).abs().max()):.2g}): part of the "
            "computation runs in float32.\n  Create new tensors (running maximum and sum, buffers) "
            "with dtype=x.dtype and device=x.device.", "follows_inputs")


def _stable(ctx):
    """Large scores must not overflow: the softmax of scores * 40 (up to a few hundred) is
    still a finite set of weights, and the reference's."""
    cpu64 = lambda inputs: {k: v.detach().to("cpu", torch.float64) if isinstance(v, torch.Tensor) and
                            v.is_floating_point() else v.cpu() if isinstance(v, torch.Tensor) else v
                            for k, v in inputs.items()}
    if not ctx.close(ctx.out, ctx.exercise.reference(*cpu64(ctx.inputs).values())):
        return None  # wrong already at ordinary scores: the values check says how
    new = dict(ctx.inputs)
    new["scores"] = ctx.inputs["scores"] * 40
    biggest = float(new["scores"].abs().max())
    problem = ctx.try_run(new)
    if problem is None:
        if ctx.close(ctx.run(new), ctx.exercise.reference(*cpu64(new).values())):
            return None
        problem = "the weights differ from the reference."
    return (f"with large scores (up to {biggest:.0f}) {problem.splitlines()[0]}\n"
            "  exp overflows there: subtract each row's largest score first (torch.softmax does).",
            "unstable")


def changes_with(keys, what):
    """attends(ctx) for an exercise whose output must change when the inputs in keys change
    (the scores, or the queries and keys): an output that does not ignores them."""
    def fn(ctx):
        new = dict(ctx.inputs)
        for key in keys:
            new[key] = ctx.inputs[key] + _noise_like(ctx.inputs[key])
        if ctx.close(ctx.run(new), ctx.out):
            return f"stays the same when {what} change: it never uses them"
    return fn


FOLLOWS_INPUTS = Invariant("follows_inputs", _follows_inputs)
STABLE = Invariant("stable", _stable)
ROWS_SUM_TO_ONE = Invariant("rows_sum_to_one", _rows_sum_to_one)
MASKED_GET_ZERO = Invariant("masked_get_zero", _masked_get_zero)
FULLY_MASKED_ROWS = Invariant("fully_masked_rows", _fully_masked_rows)
FUTURE_GETS_ZERO = Invariant("future_gets_zero", _future_gets_zero)


# --- calling the student's code (the calls run through grader.checks.student_call) ----------

def _call_function(*names):
    return lambda inputs: {"kind": "function", "args": [inputs[n] for n in names], "names": list(names)}


def _call_head(inputs):
    head_size, C = inputs["w_query"].shape
    return {"kind": "module", "ctor": [C, head_size, inputs["block_size"]],
            "ctor_kw": {"causal": inputs["causal"]}, "x": inputs["x"],
            "params": {"query.weight": inputs["w_query"], "key.weight": inputs["w_key"],
                       "value.weight": inputs["w_value"]},
            "param_hint": "query, key, value = nn.Linear(C, head_size, bias=False)"}


def _mha_parameters(inputs, batched):
    if batched:
        flat = lambda w: w.reshape(-1, w.shape[-1])  # (n_heads * head_size, C)
        params = {"query.weight": flat(inputs["w_query"]), "key.weight": flat(inputs["w_key"]),
                  "value.weight": flat(inputs["w_value"])}
    else:
        params = {}
        for i in range(inputs["w_query"].shape[0]):
            for name in ("query", "key", "value"):
                params[f"heads.{i}.{name}.weight"] = inputs[f"w_{name}"][i]
    params["proj.weight"], params["proj.bias"] = inputs["w_proj"], inputs["b_proj"]
    return params


def _call_mha(batched):
    proj = "proj, a linear layer from n_heads * head_size features back to C"
    hint = (f"query, key, value, linear layers from C to n_heads * head_size features without bias; {proj}"
            if batched else f"heads, an nn.ModuleList of n_heads Head modules; {proj}")

    def call(inputs):
        n_heads, head_size, C = inputs["w_query"].shape
        return {"kind": "module", "ctor": [C, n_heads, head_size, inputs["block_size"]],
                "ctor_kw": {"causal": inputs["causal"]}, "x": inputs["x"],
                "params": _mha_parameters(inputs, batched), "param_hint": hint}
    return call


# --- drawing inputs -------------------------------------------------------------------

def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _draw_bag(gen, case, d):
    return {"x": _randn(gen, d["B"], d["T"], d["C"])}


def _draw_weights(gen, case, d):
    return {"T": d["T"]}


def _draw_masked_softmax(gen, case, d):
    B, T = d["B"], d["T"]
    scores = 2 * _randn(gen, B, T, T)  # (B, T, T)
    mask = torch.rand(B, T, T, generator=gen, dtype=torch.float64) < 0.4  # (B, T, T)
    mask[..., 0] = False  # every row keeps key 0 ...
    if case == "empty_rows":  # ... except a few rows that may attend to nothing
        mask[0, 1] = True
        mask[-1, T - 1] = True
    return {"scores": scores, "mask": mask}


def _draw_causal_scores(gen, case, d):
    B, T = d["B"], d["T"]
    # half-integers in [-3, 3]: some scores in the past are exactly 0, which exposes a
    # mask built from the values; the diagonal is kept non-zero.
    scores = torch.randint(-6, 7, (B, T, T), generator=gen).double() / 2  # (B, T, T)
    diag = torch.randint(1, 7, (B, T), generator=gen).double() / 2
    scores.diagonal(dim1=-2, dim2=-1).copy_(diag)
    for b in range(B):  # at least one exact 0 in the past of every sequence
        i = int(torch.randint(1, T, (1,), generator=gen))
        scores[b, i, int(torch.randint(0, i, (1,), generator=gen))] = 0.0
    return {"scores": scores}


def _draw_head(gen, case, d):
    B, T, C, hs = d["B"], d["T"], d["C"], d["head_size"]
    x = _randn(gen, B, T, C)  # (B, T, C)
    x[:, T // 2] = 0.0  # a blank token: its scores are exactly 0
    w = lambda: _randn(gen, hs, C) * C**-0.5  # (head_size, C)
    return {"x": x, "w_query": w(), "w_key": w(), "w_value": w(),
            "causal": case != "encoder", "block_size": d["block_size"]}


def _draw_sdpa(gen, case, d):
    B, T, hs = d["B"], d["T"], d["head_size"]
    q, k, v = (_randn(gen, B, T, hs) for _ in range(3))  # (B, T, head_size)
    if case == "causal":
        mask = causal_mask(T)  # (T, T)
    elif case == "padding":
        mask = torch.rand(B, T, T, generator=gen) < 0.4  # (B, T, T)
        mask[..., 0] = False
    else:
        mask = None
    return {"q": q, "k": k, "v": v, "mask": mask}


def _draw_mha(gen, case, d):
    B, T, C, hs, nh = d["B"], d["T"], d["C"], d["head_size"], d["n_heads"]
    x = _randn(gen, B, T, C)  # (B, T, C)
    w = lambda: _randn(gen, nh, hs, C) * C**-0.5  # (n_heads, head_size, C)
    return {"x": x, "w_query": w(), "w_key": w(), "w_value": w(),
            "w_proj": _randn(gen, C, nh * hs) * (nh * hs) ** -0.5,  # (C, n_heads * head_size)
            "b_proj": 0.1 * _randn(gen, C),  # (C,)
            "causal": case != "encoder", "block_size": d["block_size"]}


# --- the exercises --------------------------------------------------------------------

def _bag_exercise(name):
    x_causal = causal(["x"], in_dim=1, out_dim=1)
    x_batch = batch_independent(["x"])
    return Exercise(
        name=name, call=_call_function("x"), reference=registry.reference("bag_of_words"), draw=_draw_bag,
        dims={"B": (3, (2, 5)), "T": (7, (4, 12)), "C": (5, (2, 9))}, distinct=("B", "T", "C"),
        shape=lambda i: (i["x"].shape, ("B", "T", "C")),
        focuses={
            "output": Focus("returns a (B, T, C) tensor like x", invariants=(FOLLOWS_INPUTS,)),
            "first_token": Focus("the first token is its own average",
                                 invariants=(Invariant("first_token", _first_token),)),
            "last_token": Focus("the last token averages the whole sequence",
                                invariants=(Invariant("last_token", _last_token),)),
            "causal": Focus("never looks at future tokens", invariants=(x_causal,)),
            "batch_independent": Focus("keeps the sequences of a batch apart", invariants=(x_batch,)),
            "values": Focus("matches the reference values", invariants=(x_causal, x_batch), values=True),
        })


MASK_CAUSAL = causal(["scores"], in_dim=-1, out_dim=-2, what="key")
HEAD_CAUSAL = causal(["x"], in_dim=1, out_dim=1)
HEAD_BATCH = batch_independent(["x"])
SDPA_CAUSAL = causal(["k", "v"], in_dim=-2, out_dim=-2, what="key")
SDPA_BATCH = batch_independent(["q", "k", "v"])

EXERCISES = {
    "bag_of_words_loop": _bag_exercise("bag_of_words_loop"),
    "bag_of_words_matmul": _bag_exercise("bag_of_words_matmul"),
    "running_average_weights": Exercise(
        name="running_average_weights", call=_call_function("T"),
        reference=registry.reference("running_average_weights"), draw=_draw_weights,
        dims={"T": (6, (3, 12))}, shape=lambda i: ((i["T"], i["T"]), ("T", "T")),
        out_dtype=lambda i: torch.float32,
        focuses={
            "output": Focus("returns a (T, T) float32 tensor"),
            "rows_sum_to_one": Focus("every row sums to 1", invariants=(ROWS_SUM_TO_ONE,)),
            "lower_triangular": Focus("gives the future no weight", invariants=(FUTURE_GETS_ZERO,)),
            "values": Focus("matches the reference values",
                            invariants=(ROWS_SUM_TO_ONE, FUTURE_GETS_ZERO), values=True),
        }),
    "masked_softmax": Exercise(
        name="masked_softmax", call=_call_function("scores", "mask"),
        reference=registry.reference("masked_softmax"), draw=_draw_masked_softmax,
        dims={"B": (3, (2, 5)), "T": (6, (3, 10))}, distinct=("B", "T"),
        shape=lambda i: (i["scores"].shape, ("B", "T", "T")),
        focuses={
            "output": Focus("returns weights shaped like the scores", invariants=(FOLLOWS_INPUTS,)),
            "rows_sum_to_one": Focus("every row sums to 1", invariants=(ROWS_SUM_TO_ONE,)),
            "masked_get_zero": Focus("masked positions get weight 0", invariants=(MASKED_GET_ZERO,)),
            "fully_masked_rows": Focus("a fully masked row comes out as zeros", case="empty_rows",
                                       invariants=(FULLY_MASKED_ROWS,)),
            "values": Focus("matches the reference values", case="empty_rows",
                            invariants=(ROWS_SUM_TO_ONE, MASKED_GET_ZERO, STABLE), values=True),
        },
        attends=changes_with(["scores"], "the scores")),
    "causal_weights": Exercise(
        name="causal_weights", call=_call_function("scores"), reference=registry.reference("causal_weights"),
        draw=_draw_causal_scores, dims={"B": (2, (2, 5)), "T": (7, (3, 10))}, distinct=("B", "T"),
        shape=lambda i: (i["scores"].shape, ("B", "T", "T")),
        focuses={
            "output": Focus("returns weights shaped like the scores", invariants=(FOLLOWS_INPUTS,)),
            "rows_sum_to_one": Focus("every row sums to 1", invariants=(ROWS_SUM_TO_ONE,)),
            "causal": Focus("gives the future no weight", invariants=(FUTURE_GETS_ZERO, MASK_CAUSAL)),
            "values": Focus("matches the reference values",
                            invariants=(ROWS_SUM_TO_ONE, FUTURE_GETS_ZERO, MASK_CAUSAL, STABLE), values=True),
        },
        attends=changes_with(["scores"], "the scores")),
    "head": Exercise(
        name="Head", call=_call_head, reference=registry.reference("head"), draw=_draw_head, module=True,
        dims={"B": (3, (2, 4)), "T": (7, (4, 10)), "C": (12, (6, 16)), "head_size": (5, (3, 9)),
              "block_size": (9, (1, 4))},  # hidden: T + 1..4
        distinct=("B", "T", "C", "head_size", "block_size"),
        shape=lambda i: ((*i["x"].shape[:2], i["w_query"].shape[0]), ("B", "T", "head_size")),
        focuses={
            "output": Focus("returns (B, T, head_size)", invariants=(FOLLOWS_INPUTS,)),
            "causal": Focus("never looks at future tokens", invariants=(HEAD_CAUSAL,)),
            "batch_independent": Focus("keeps the sequences of a batch apart", invariants=(HEAD_BATCH,)),
            "values": Focus("matches the reference values (causal)",
                            invariants=(HEAD_CAUSAL, HEAD_BATCH), values=True),
            "encoder": Focus("matches the reference values with causal=False", case="encoder",
                             invariants=(HEAD_BATCH,), values=True),
        },
        attends=changes_with(["w_query", "w_key"], "the query and key weights")),
    "scaled_dot_product_attention": Exercise(
        name="scaled_dot_product_attention", call=_call_function("q", "k", "v", "mask"),
        reference=registry.reference("scaled_dot_product_attention"), draw=_draw_sdpa,
        dims={"B": (3, (2, 4)), "T": (7, (4, 11)), "head_size": (5, (3, 9))},
        distinct=("B", "T", "head_size"),
        shape=lambda i: (i["v"].shape, ("B", "T", "head_size")),
        focuses={
            "output": Focus("returns (B, T, head_size)", case="causal", invariants=(FOLLOWS_INPUTS,)),
            "causal": Focus("with a causal mask, never looks at future keys", case="causal",
                            invariants=(SDPA_CAUSAL,)),
            "no_mask": Focus("matches the reference values without a mask", case="no_mask",
                             invariants=(SDPA_BATCH,), values=True),
            "values": Focus("matches the reference values with a causal mask", case="causal",
                            invariants=(SDPA_CAUSAL, SDPA_BATCH), values=True),
            "padding": Focus("matches the reference values with a padding mask", case="padding",
                             values=True),
        },
        attends=changes_with(["q", "k"], "q and k")),
}

_MHA_DIMS = {"B": (3, (2, 4)), "T": (7, (4, 10)), "C": (12, (6, 16)), "head_size": (5, (3, 8)),
             "n_heads": (2, (2, 4)), "block_size": (9, (1, 4))}


def _mha_exercise(name, batched):
    return Exercise(
        name=name, call=_call_mha(batched), reference=registry.reference("multi_head_attention"), draw=_draw_mha,
        module=True, dims=_MHA_DIMS, distinct=("B", "T", "C", "head_size", "n_heads", "block_size"),
        shape=lambda i: (i["x"].shape, ("B", "T", "C")),
        focuses={
            "output": Focus("returns (B, T, C)", invariants=(FOLLOWS_INPUTS,)),
            "causal": Focus("never looks at future tokens", invariants=(HEAD_CAUSAL,)),
            "values": Focus("matches the reference values (causal)",
                            invariants=(HEAD_CAUSAL, HEAD_BATCH), values=True),
            "encoder": Focus("matches the reference values with causal=False", case="encoder",
                             invariants=(HEAD_BATCH,), values=True),
        },
        attends=changes_with(["w_query", "w_key"], "the query and key weights"))


EXERCISES["multi_head_attention"] = _mha_exercise("MultiHeadAttention", batched=False)
EXERCISES["batched_multi_head_attention"] = _mha_exercise("BatchedMultiHeadAttention", batched=True)


# --- 07: the transformer block, the GPT's forward, generate ---------------------------

def _layer_weights(gen, C, lead=()):
    """One block's weights (pre-norm attention + MLP), with optional leading dims."""
    lin = lambda out, inp: _randn(gen, *lead, out, inp) * inp**-0.5  # (..., out, in) like nn.Linear
    vec = lambda n, scale: scale * _randn(gen, *lead, n)
    return {"ln1_w": 1 + vec(C, 0.3), "ln1_b": vec(C, 0.2),
            "w_query": lin(C, C), "w_key": lin(C, C), "w_value": lin(C, C),
            "w_proj": lin(C, C), "b_proj": vec(C, 0.1),
            "ln2_w": 1 + vec(C, 0.3), "ln2_b": vec(C, 0.2),
            "w_fc": lin(4 * C, C), "b_fc": vec(4 * C, 0.1), "w_out": lin(C, 4 * C), "b_out": vec(C, 0.1)}


_BLOCK_PARAMS = {"ln1.weight": "ln1_w", "ln1.bias": "ln1_b", "attn.query.weight": "w_query",
                 "attn.key.weight": "w_key", "attn.value.weight": "w_value",
                 "attn.proj.weight": "w_proj", "attn.proj.bias": "b_proj",
                 "ln2.weight": "ln2_w", "ln2.bias": "ln2_b",
                 "mlp.net.0.weight": "w_fc", "mlp.net.0.bias": "b_fc",
                 "mlp.net.2.weight": "w_out", "mlp.net.2.bias": "b_out"}
_BLOCK_HINT = ("the given __init__: ln1, attn (query, key, value, proj), ln2, "
               "mlp.net = Sequential(Linear(C, 4 * C), GELU(), Linear(4 * C, C))")


def _bump(value, taken):
    """value, moved up until it differs from every size in taken."""
    while value in taken:
        value += 1
    return value


def _draw_block(gen, case, d):
    B, T, nh, hs = d["B"], d["T"], d["n_heads"], d["head_size"]
    C = nh * hs  # the block's heads split C exactly
    block_size = _bump(d["block_size"], {C})
    return {"x": _randn(gen, B, T, C), **_layer_weights(gen, C), "n_heads": nh,
            "block_size": block_size, "dropout": 0.25 if case == "dropout" else 0.0}


def _call_block(inputs):
    C = inputs["x"].shape[-1]
    return {"kind": "module", "ctor": [C, inputs["n_heads"], inputs["block_size"]],
            "ctor_kw": {"dropout": inputs["dropout"]}, "x": inputs["x"],
            "params": {name: inputs[key] for name, key in _BLOCK_PARAMS.items()},
            "param_hint": _BLOCK_HINT, "eval": inputs["dropout"] > 0 and not inputs.get("train"),
            "grad_weight": inputs.get("grad_weight")}


def _draw_gpt(gen, case, d):
    B, T, nh, hs = d["B"], d["T"], d["n_heads"], d["head_size"]
    C = nh * hs
    V = _bump(d["vocab_size"], {C})  # logits (B, T, V) and hidden states (B, T, C) differ
    block_size = _bump(d["block_size"], {C, V})
    idx = torch.randint(0, V, (B, T), generator=gen)  # (B, T)
    inputs = {"idx": idx, "tok": _randn(gen, V, C), "pos": _randn(gen, block_size, C)}
    inputs.update(_layer_weights(gen, C, lead=(2,)))  # two blocks, stacked
    inputs.update({"lnf_w": 1 + 0.3 * _randn(gen, C), "lnf_b": 0.2 * _randn(gen, C),
                   "w_head": _randn(gen, V, C) * C**-0.5, "b_head": 0.1 * _randn(gen, V),
                   "n_heads": nh, "block_size": block_size})
    return inputs


def _call_gpt(inputs):
    V, C = inputs["tok"].shape
    n_layers = inputs["ln1_w"].shape[0]
    params = {"token_embedding.weight": inputs["tok"], "position_embedding.weight": inputs["pos"],
              "ln_f.weight": inputs["lnf_w"], "ln_f.bias": inputs["lnf_b"],
              "lm_head.weight": inputs["w_head"], "lm_head.bias": inputs["b_head"]}
    for i in range(n_layers):
        params.update({f"blocks.{i}.{name}": inputs[key][i] for name, key in _BLOCK_PARAMS.items()})
    return {"kind": "module", "ctor": [V, C, inputs["n_heads"], n_layers, inputs["block_size"]],
            "ctor_kw": {"dropout": 0.0}, "x": inputs["idx"], "params": params,
            "param_hint": "the given __init__: token_embedding, position_embedding, "
                          "blocks = Sequential of Block, ln_f, lm_head"}


def _token_causal(ctx):
    """Changing the tokens after position t leaves the logits at 0..t unchanged."""
    idx = ctx.inputs["idx"]
    T, V = idx.shape[1], ctx.inputs["tok"].shape[0]
    t = (T - 1) // 2
    new = dict(ctx.inputs)
    new["idx"] = idx.clone()
    new["idx"][:, t + 1:] = (idx[:, t + 1:] + 1) % V
    out = ctx.run(new)
    before, after = ctx.out[:, : t + 1], out[:, : t + 1]
    if not ctx.close(before, after):
        i = _first_change(before, after, 1, ctx.tol)
        return (f"not causal: changing tokens {t + 1}..{T - 1} changed the logits at position {i}.\n"
                f"  Position {i} may only use tokens 0..{i}.")


def _draw_generate(gen, case, d):
    B, T, V, block_size = d["B"], d["T"], d["vocab_size"], d["block_size"]
    total = block_size + 12  # long enough to crop the context for many steps
    tok = _randn(gen, V, V)  # (V, V)
    tok.diagonal().sub_(4.0)  # no token follows itself: the text cannot settle into one repeated id
    # the model has positions for 3 more tokens than the block_size generate is given, so
    # a context cropped to the model's own size is not the one asked for
    return {"model": {"tok": tok, "pos": _randn(gen, block_size + 3, V), "mix": 1.5 * _randn(gen, V, V)},
            "idx": torch.randint(0, V, (B, T), generator=gen).tolist(),
            "max_new_tokens": total - T, "block_size": block_size,
            "temperature": {"main": 0.5, "plain": 1.0, "hot": 1.7}[case],
            "seed": int(torch.randint(0, 2**31 - 1, (1,), generator=gen))}


def _call_generate(inputs):
    return {"kind": "generate", **inputs}


def _generate_shape(inputs):
    B, T = len(inputs["idx"]), len(inputs["idx"][0])
    return (B, T + inputs["max_new_tokens"]), ("B", "T + max_new_tokens")


def _keeps_prompt(ctx):
    prompt = torch.tensor(ctx.inputs["idx"], dtype=torch.float64)  # (B, T)
    T = prompt.shape[1]
    if not torch.equal(ctx.out[:, :T], prompt):
        return (f"the first {T} tokens of every row must be the prompt itself; return the "
                "prompt followed by the new tokens.")


def _reproducible(ctx):
    again = ctx.run(ctx.inputs)
    if not torch.equal(again, ctx.out):
        return ("two runs with the same seed gave different tokens: pass the generator on to "
                "torch.multinomial (generator=generator).")


def _same_tokens(ctx):
    expected = registry.reference("generate")(**ctx.inputs)
    T = len(ctx.inputs["idx"][0])
    diff = (ctx.out != expected).nonzero()
    if len(diff):
        b, t = (int(i) for i in diff[diff[:, 1].argmin()])
        seen = min(t, ctx.inputs["block_size"])
        return (f"the sampled tokens differ from the reference: sequence {b}, new token {t - T + 1} "
                f"(position {t}): expected id {int(expected[b, t])}, got {int(ctx.out[b, t])}; "
                f"the tokens before it agree.\n  The reference predicted it from the last {seen} "
                f"tokens (positions {t - seen}..{t - 1}).")


def _repeatable(ctx):
    """Two calls on the same input give the same output (nothing random left on)."""
    again = ctx.run(ctx.inputs)
    if not ctx.close(again, ctx.out):
        return (f"two calls on the same input gave different outputs (by up to "
                f"{float((again - ctx.out).abs().max()):.3g}): something random runs in every call.\n"
                "  Dropout must follow the module's mode: use the given nn.Dropout layers (model.eval() "
                "turns them off), or F.dropout(..., training=self.training).", "not_repeatable")


def _dropout_trains(ctx):
    """With dropout > 0, training mode changes the output that evaluation mode gives."""
    if ctx.close(ctx.run(dict(ctx.inputs, train=True)), ctx.out):
        return (f"in training mode, with dropout={ctx.inputs['dropout']}, the output is the same as in "
                "evaluation mode: dropout never runs while training.\n  Leave the mode to the caller: "
                "no .eval() (or training=False) inside forward; the given layers follow "
                "model.train() and model.eval() themselves.", "dropout_never_trains")


def _gradient_flows(ctx):
    """The gradient the student's block gives (autograd) is the derivative of its own output
    (central differences in float64): nothing in forward is cut off from backpropagation."""
    inputs = {k: v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
              for k, v in ctx.inputs.items()}
    x, gen, eps = inputs["x"], torch.Generator().manual_seed(0), 1e-6
    weight, step = (_randn(gen, *x.shape).to(x.device) for _ in range(2))  # (B, T, C) each
    try:
        grad = ctx.run(dict(inputs, grad_weight=weight))
        moved = [ctx.run(dict(inputs, x=x + sign * eps * step)) for sign in (1, -1)]
    except Exception:  # code that fails in float64 (a layer made in forward): the values check speaks
        return None
    slope = float((grad * step.cpu()).sum())
    numeric = float(((moved[0] - moved[1]) * weight.cpu()).sum()) / (2 * eps)
    if abs(slope - numeric) > 1e-5 * max(1.0, abs(numeric)):
        return ("the gradient of the output with respect to x is not the output's derivative: part "
                "of the block is cut off from backpropagation (a .detach(), .data or torch.no_grad() "
                "in forward), so training would never update it.", "gradient_blocked")


REPEATABLE = Invariant("repeatable", _repeatable)
DROPOUT_TRAINS = Invariant("dropout_trains", _dropout_trains)
GRADIENT_FLOWS = Invariant("gradient_flows", _gradient_flows)
GPT_CAUSAL = Invariant("causal", _token_causal)


def _gpt_reads_tokens(ctx):
    new = dict(ctx.inputs)
    new["idx"] = (ctx.inputs["idx"] + 1) % ctx.inputs["tok"].shape[0]
    if ctx.close(ctx.run(new), ctx.out):
        return "stays the same when the tokens change: the logits never read the input"


def _follows_the_model(ctx):
    """Given a model that puts almost all its probability on one token, generate samples it."""
    model = ctx.inputs["model"]
    V = model["tok"].shape[0]
    for c in (V - 1, V // 2):
        tok = torch.zeros_like(model["tok"])
        tok[:, c] = 60.0  # every context: logit 60 for token c, 0 for the others
        new = dict(ctx.inputs, model={"tok": tok, "pos": torch.zeros_like(model["pos"]),
                                      "mix": torch.zeros_like(model["mix"])})
        T = len(ctx.inputs["idx"][0])
        if not bool((ctx.run(new)[:, T:] == c).all()):
            return (f"does not follow the model: given a model that puts all its probability on "
                    f"token {c}, it sampled other tokens")


def _reads_the_cache(ctx):
    """The outputs after the prompt change when the prompt changes: the cache is read."""
    prompt = ctx.inputs["chunks"][0]
    new = dict(ctx.inputs)
    x = ctx.inputs["x"].clone()
    x[:, :prompt] += _noise_like(x[:, :prompt])
    new["x"] = x
    if ctx.close(ctx.run(new)[:, prompt:], ctx.out[:, prompt:]):
        return ("after the prompt stays the same when the prompt changes: the cached keys and "
                "values are never read")
def _samples_every_token(ctx):
    """Given a model whose prediction spreads over many tokens, generate samples the unlikely
    ones too: nothing cuts the distribution down to its most likely tokens (top-k)."""
    V = 64
    logits = -0.02 * torch.arange(V, dtype=torch.float64)  # token c: logit -0.02 c, in every context
    model = ctx.inputs["model"]
    flat = {"tok": logits.expand(V, V).clone(), "pos": torch.zeros(model["pos"].shape[0], V, dtype=torch.float64),
            "mix": torch.zeros(V, V, dtype=torch.float64)}
    new = dict(ctx.inputs, model=flat, temperature=1.0)
    T = len(ctx.inputs["idx"][0])
    got, expected = ctx.run(new)[:, T:], registry.reference("generate")(**new)[:, T:]
    top = int(got.max()) + 1
    beyond = int((expected >= top).sum())  # the reference's draws among tokens it never sampled
    if beyond < 8 or top == 1:  # too few to tell a filter from chance; an argmax is catalogued
        return None
    return (f"given a model that spreads its prediction over {V} tokens, it only ever sampled "
            f"the {top} most likely ones (token ids 0..{top - 1}), while sampling from the whole "
            f"distribution drew {beyond} of {expected.numel()} tokens beyond them.\n  A top-k (or "
            "top-p) filter? This exercise samples from the full softmax.", "top_k_filter")


KEEPS_PROMPT = Invariant("keeps_prompt", _keeps_prompt)
EVERY_TOKEN = Invariant("every_token", _samples_every_token)
REPRODUCIBLE = Invariant("reproducible", _reproducible)
SAME_TOKENS = Invariant("same_tokens", _same_tokens)
BLOCK_CAUSAL = causal(["x"], in_dim=1, out_dim=1)
BLOCK_BATCH = batch_independent(["x"])

EXERCISES["block"] = Exercise(
    name="Block", call=_call_block, reference=registry.reference("block"), draw=_draw_block, module=True,
    dims={"B": (2, (2, 4)), "T": (7, (4, 8)), "n_heads": (3, (2, 4)), "head_size": (4, (3, 6)),
          "block_size": (9, (1, 4))},
    distinct=("B", "T", "n_heads", "head_size", "block_size"),
    shape=lambda i: (i["x"].shape, ("B", "T", "C")),
    focuses={
        "output": Focus("returns (B, T, C)"),
        "causal": Focus("never looks at future tokens", invariants=(REPEATABLE, BLOCK_CAUSAL)),
        "values": Focus("matches the reference values (pre-norm)",
                        invariants=(REPEATABLE, BLOCK_CAUSAL, BLOCK_BATCH, GRADIENT_FLOWS), values=True),
        "eval": Focus("matches the reference in evaluation mode, dropout=0.25", case="dropout",
                      invariants=(REPEATABLE, DROPOUT_TRAINS), values=True),
    },
    repeatable=False,  # REPEATABLE names dropout left on
    attends=changes_with(["w_query", "w_key"], "the attention's query and key weights"))

EXERCISES["gpt"] = Exercise(
    name="GPT", call=_call_gpt, reference=registry.reference("gpt"), draw=_draw_gpt, module=True,
    dims={"B": (2, (2, 4)), "T": (7, (4, 8)), "n_heads": (3, (2, 4)), "head_size": (4, (3, 6)),
          "vocab_size": (10, (9, 16)), "block_size": (11, (1, 4))},
    distinct=("B", "T", "n_heads", "head_size", "vocab_size", "block_size"),
    shape=lambda i: ((*i["idx"].shape, i["tok"].shape[0]), ("B", "T", "vocab_size")),
    focuses={
        "output": Focus("returns logits (B, T, vocab_size)", invariants=(FOLLOWS_INPUTS,)),
        "causal": Focus("never looks at future tokens", invariants=(REPEATABLE, GPT_CAUSAL)),
        "values": Focus("matches the reference logits", invariants=(REPEATABLE, GPT_CAUSAL), values=True),
    },
    repeatable=False, attends=_gpt_reads_tokens)

# generate() runs on the CPU in float64 whatever the check's device and dtype: it is
# compared token by token, and sampled tokens depend on the device's random stream. The
# check's inputs hold no tensors at the top level, so they stay as drawn.
EXERCISES["generate"] = Exercise(
    name="generate", call=_call_generate, reference=registry.reference("generate"), draw=_draw_generate,
    dims={"B": (2, (2, 4)), "T": (3, (1, 4)), "vocab_size": (11, (7, 13)), "block_size": (6, (3, 6))},
    distinct=("B", "T", "vocab_size", "block_size"), shape=_generate_shape,
    out_dtype=lambda i: torch.int64,
    focuses={
        "output": Focus("returns the prompt and max_new_tokens new tokens, reproducibly",
                        case="plain", invariants=(KEEPS_PROMPT, REPRODUCIBLE)),
        "cropped": Focus("samples the reference's tokens at temperature 1, past block_size",
                         case="plain", invariants=(KEEPS_PROMPT, SAME_TOKENS), values=True),
        "values": Focus("samples the reference's tokens at temperature 0.5", case="main",
                        invariants=(KEEPS_PROMPT, REPRODUCIBLE, EVERY_TOKEN, SAME_TOKENS), values=True),
        "hot": Focus("samples the reference's tokens at temperature 1.7", case="hot",
                     invariants=(KEEPS_PROMPT, EVERY_TOKEN, SAME_TOKENS), values=True),
    },
    repeatable=False, attends=_follows_the_model)


# --- 08: online softmax, tiled attention, key/value cache -----------------------------

def _draw_online_softmax(gen, case, d):
    B, T, N = d["B"], d["T"], d["N"]
    scores = 3 * _randn(gen, B, T, N)  # (B, T, N)
    scores[0, 0] = torch.sort(scores[0, 0]).values  # a new maximum at every step
    if case == "main":
        scores[0, 1] = -1000 + _randn(gen, N)  # exp underflows unless the max is subtracted
        scores[-1, -1] = 1000 + _randn(gen, N)  # exp overflows unless the max is subtracted
        hidden = torch.rand(B, T, N, generator=gen) < 0.2
        hidden[1, 0, :2] = True  # rows that start with masked (-inf) scores
        hidden[-1, 1, :3] = True
        hidden[..., -1] = False  # every row keeps at least one score
        hidden[0, :2] = False
        scores = scores.masked_fill(hidden, float("-inf"))
    return {"scores": scores}


def _call_online_softmax(inputs):
    call = {"kind": "function", "args": [inputs["scores"]], "names": ["scores"]}
    if "watch" in inputs:
        call["watch"] = inputs["watch"]
    return call


def _one_pass(ctx):
    """Run again while recording every operation: no reduction may cover a whole row."""
    ctx.run({**ctx.inputs, "watch": {"row": ctx.inputs["scores"].shape[-1]}})


def _draw_tiled(gen, case, d):
    B, nh, hs = d["B"], d["n_heads"], d["head_size"]
    tile = max(d["tile_size"], 2 * hs + 1)  # a tile of scores outweighs a head_size row
    T = max(d["T"], 2 * tile + 1)  # and a strip of tile x T outweighs the inputs
    T += T % tile == 0  # the last tile is a shorter one
    q, k, v = (_randn(gen, B, nh, T, hs) for _ in range(3))  # (B, n_heads, T, head_size)
    # one head whose scores all lie far below 0 (about -900 to -1200): exp(s) underflows to 0
    # there, in float32 and in float64, unless the running maximum starts at -inf and is
    # subtracted
    k[0, -1, :, 0] = 40.0
    q[0, -1, :, 0] = -50.0
    v[0, -1] *= 0.01  # float32 rounds scores that large to about 1e-4: keep the outputs small
    return {"q": q, "k": k, "v": v, "tile_size": tile}


def _call_tiled(inputs):
    call = {"kind": "function", "args": [inputs["q"], inputs["k"], inputs["v"], inputs["tile_size"]],
            "names": ["q", "k", "v", "tile_size"]}
    if "watch" in inputs:
        call["watch"] = inputs["watch"]
    return call


def _never_full_matrix(ctx):
    """Run again while recording every operation: no intermediate may hold more than twice
    the inputs (B, n_heads, T, head_size) or two tiles of scores."""
    B, nh, T, hs = ctx.inputs["q"].shape
    tile = ctx.inputs["tile_size"]
    limit = 2 * B * nh * max(T * hs, tile * tile)
    ctx.run({**ctx.inputs, "watch": {"max_numel": limit, "T": T, "tile_size": tile, "head_size": hs,
                                     "leading": (B, nh, B * nh)}})


def _skips_future_tiles(ctx):
    """Keys and values from the end of the first query tile on set to NaN: the first tile's
    outputs must not change. A query tile that visits a key tile lying wholly in its future
    multiplies those NaN values by weights of 0, and 0 * NaN is NaN."""
    tile, T = ctx.inputs["tile_size"], ctx.inputs["q"].shape[-2]
    new = dict(ctx.inputs)
    for name in ("k", "v"):
        new[name] = ctx.inputs[name].clone()
        new[name][..., tile:, :] = float("nan")
    out = ctx.run_raw(new)[..., :tile, :]
    if not ctx.close(out.nan_to_num(1e9), ctx.out[..., :tile, :]):
        return (f"queries 0..{tile - 1} read the key tiles after them: with keys and values "
                f"{tile}..{T - 1} set to NaN, their outputs changed (0 * NaN is NaN).\n"
                "  Skip the key tiles that start after the query tile ends: they are wholly in the "
                "future and contribute nothing.", "future_tiles_visited")


def _draw_cache(gen, case, d):
    B, C, nh, hs, block_size = d["B"], d["C"], d["n_heads"], d["head_size"], d["context"]
    taken = {B, C, nh, hs, block_size}
    prompt = d["prompt"]  # at most block_size - 2, and no other size: an error's numbers say which
    while prompt > block_size - 2 or (prompt in taken and prompt > 1):
        prompt -= 1
    if case == "main":  # past the cache's size
        T = _bump(block_size + 5, taken | {prompt})
        chunks = [prompt] + [1] * (T - prompt)
        if prompt == 1:  # every size below block_size taken: a chunk of several tokens after it
            n = next((m for m in range(2, block_size - 1) if m not in taken | {T}), 2)
            chunks = [1, n] + [1] * (T - 1 - n)  # (a mask or a head split needs two new tokens to show)
    else:  # within it: after the prompt, a chunk of several tokens into a non-empty cache
        T = block_size - 1
        n = 2  # the chunk's size, no other size either
        while n in taken | {T} and n < T - 2:
            n += 1
        prompt = min(prompt, T - n - 1)
        while prompt in taken | {T, n} and prompt > 1:
            prompt -= 1
        chunks = [prompt, n] + [1] * (T - prompt - n)
    w = lambda: _randn(gen, nh * hs, C) * C**-0.5  # (n_heads * head_size, C)
    return {"x": _randn(gen, B, T, C), "w_query": w(), "w_key": w(), "w_value": w(),
            "w_proj": _randn(gen, C, nh * hs) * (nh * hs) ** -0.5, "b_proj": 0.1 * _randn(gen, C),
            "n_heads": nh, "block_size": block_size, "chunks": chunks}


def _call_cache(inputs):
    n_heads, C = inputs["n_heads"], inputs["x"].shape[-1]
    head_size = inputs["w_query"].shape[0] // n_heads
    return {"kind": "stream", "ctor": [C, n_heads, head_size, inputs["block_size"]], "ctor_kw": {},
            "x": inputs["x"], "chunks": inputs["chunks"],
            "params": {"query.weight": inputs["w_query"], "key.weight": inputs["w_key"],
                       "value.weight": inputs["w_value"], "proj.weight": inputs["w_proj"],
                       "proj.bias": inputs["b_proj"]},
            "param_hint": "the given __init__: query, key, value, linear layers from C to "
                          "n_heads * head_size features without bias; proj, from n_heads * head_size "
                          "back to C"}


ONE_PASS = Invariant("one_pass", _one_pass)
NEVER_FULL_MATRIX = Invariant("never_full_matrix", _never_full_matrix)
SKIPS_FUTURE_TILES = Invariant("skips_future_tiles", _skips_future_tiles)
TILED_CAUSAL = causal(["k", "v"], in_dim=-2, out_dim=-2, what="key")
TILED_BATCH = batch_independent(["q", "k", "v"])

EXERCISES["online_softmax"] = Exercise(
    name="online_softmax", call=_call_online_softmax, reference=registry.reference("online_softmax"),
    draw=_draw_online_softmax, dims={"B": (3, (2, 4)), "T": (5, (3, 7)), "N": (11, (8, 16))},
    distinct=("B", "T", "N"), shape=lambda i: (i["scores"].shape, ("B", "T", "N")),
    focuses={
        "output": Focus("returns probabilities shaped like the scores", case="plain",
                        invariants=(FOLLOWS_INPUTS,)),
        "rows_sum_to_one": Focus("every row sums to 1", case="plain", invariants=(ROWS_SUM_TO_ONE,)),
        "plain": Focus("matches torch.softmax on ordinary scores", case="plain",
                       invariants=(ROWS_SUM_TO_ONE,), values=True),
        "values": Focus("matches torch.softmax on scores of ±1000 and -inf", values=True),
        "one_pass": Focus("reads each row once, a score at a time", case="plain",
                          invariants=(ONE_PASS,), values=True),
    },
    attends=changes_with(["scores"], "the scores"))

EXERCISES["tiled_attention"] = Exercise(
    name="tiled_attention", call=_call_tiled, reference=registry.reference("tiled_attention"), draw=_draw_tiled,
    dims={"B": (2, (2, 3)), "n_heads": (3, (2, 4)), "T": (41, (30, 50)), "head_size": (4, (3, 5)),
          "tile_size": (9, (7, 13))},
    distinct=("B", "n_heads", "T", "head_size", "tile_size"),
    shape=lambda i: (i["q"].shape, ("B", "n_heads", "T", "head_size")),
    focuses={
        "output": Focus("returns (B, n_heads, T, head_size)", invariants=(FOLLOWS_INPUTS,)),
        "causal": Focus("never looks at future keys, nor visits their tiles",
                        invariants=(TILED_CAUSAL, SKIPS_FUTURE_TILES)),
        "values": Focus("matches causal attention", invariants=(TILED_CAUSAL, TILED_BATCH), values=True),
        "memory": Focus("never forms the T x T matrix (and still matches)",
                        invariants=(NEVER_FULL_MATRIX,), values=True),
    },
    attends=changes_with(["q", "k"], "q and k"))

EXERCISES["cached_attention"] = Exercise(
    name="CachedSelfAttention", call=_call_cache, reference=registry.reference("cached_attention"), draw=_draw_cache,
    module=True,
    dims={"B": (2, (2, 3)), "C": (12, (10, 16)), "n_heads": (3, (2, 4)), "head_size": (5, (3, 6)),
          "context": (9, (5, 9)), "prompt": (7, (2, 7))},
    distinct=("B", "C", "n_heads", "head_size", "context", "prompt"),
    shape=lambda i: (i["x"].shape, ("B", "T", "C")),
    focuses={
        "output": Focus("returns (B, T_new, C) for every chunk of new tokens", invariants=(FOLLOWS_INPUTS,)),
        "short": Focus("matches attention without a cache, within block_size tokens", case="short",
                       values=True),
        "values": Focus("matches attention without a cache, past block_size (cropped cache)",
                        values=True),
    },
    attends=_reads_the_cache)


def _keyed(defined):
    """The definitions in the order of EXERCISE_KEYS, each knowing its key and its catalogued
    mistakes (from the answers, grader/answers/mistakes.py); a key without a definition, or a
    definition whose key grader/checks/exercise_keys.py does not list, is an error."""
    missing, unlisted = set(EXERCISE_KEYS) - set(defined), set(defined) - set(EXERCISE_KEYS)
    problems = [f"no Exercise defined for {', '.join(sorted(missing))}"] if missing else []
    problems += [f"defined but not listed: {', '.join(sorted(unlisted))}"] if unlisted else []
    if problems:
        raise LookupError("grader/checks/exercise_keys.py lists the exercises: " + "; ".join(problems))
    for key, exercise in defined.items():
        exercise.key = key
        exercise.mistakes = registry.Catalogue(key)
    return {key: defined[key] for key in EXERCISE_KEYS}


EXERCISES = _keyed(EXERCISES)
