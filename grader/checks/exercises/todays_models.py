"""09: rotary positions, grouped key/value heads, a sliding window with a rolling cache."""
import torch

from grader.checks import diagnosis, registry
from grader.checks.exercise import Exercise, Focus, Invariant
from grader.checks.diagnosis import Diagnosis
from grader.checks.diagnosis.findings import Finding
from grader.checks.exercises.common import ATTENTION_SHORTCUTS, FOLLOWS_INPUTS, HELD, bump, held, noise_like, randn


# --- apply_rope(x, positions) --------------------------------------------------------

def _draw_rope(gen, case, d):
    B, nh, T = d["B"], d["n_heads"], d["T"]
    head_size = 2 * d["half"]  # rotary positions turn pairs of dims
    positions = torch.arange(d["first"], d["first"] + T)  # (T,) never 0: position 0 is no rotation at all
    return {"x": randn(gen, B, nh, T, head_size), "positions": positions}


def _rope_sizes(inputs):
    B, nh, T, hs = inputs["x"].shape
    return {"B": B, "n_heads": nh, "T": T, "head_size": hs}


def _rope_error(numbers, sz, message):
    """A table of angles (or of cos and sin) that meets x's heads with its positions: it was
    built with a dim too many, or unsqueezed in the wrong place."""
    if "must match the size of tensor" in message and {sz["n_heads"], sz["T"]} <= set(numbers):
        return Finding("angle_table_dims", f"a table of angles with its {sz['T']} = T positions against "
                       f"x's {sz['n_heads']} = n_heads heads",
                       "tensors line up from the right: a (T, head_size // 2) table of angles lines up with "
                       "x's (B, n_heads, T, head_size // 2) pairs as it is; a (T, 1, head_size // 2) one puts "
                       "T where the heads are.")
    return None


def _crop_rope(inputs, L):
    return {"x": inputs["x"][..., :L, :], "positions": inputs["positions"][:L]}


def _keeps_lengths(ctx):
    """A rotation keeps the length of every vector (any pairing, any angles)."""
    x = ctx.inputs["x"].detach().to("cpu", torch.float64)
    before, after = x.norm(dim=-1), ctx.out.norm(dim=-1)  # (B, n_heads, T)
    if not ctx.close(after, before):
        idx = tuple(int(i) for i in torch.unravel_index((after - before).abs().argmax(), before.shape))
        return (f"a rotation keeps the length of every vector; at index {idx} (B, n_heads, T) the length "
                f"goes from {float(before[idx]):.4g} to {float(after[idx]):.4g}.\n"
                "  Turn each pair of dims by one angle: new = (a cos - b sin, a sin + b cos), both from "
                "the same pair (see Hint 2 above the exercise).")


def _shift(inputs, by):
    return {**inputs, "positions": inputs["positions"] + by}


SHIFT = 7  # positions moved by this much: relative distances stay the same


def _relative(ctx):
    """Scores between rotated vectors depend on the distance between their positions only:
    moving every position by the same amount leaves out @ out.mT as it was. Compared as
    cosines (each score over the two input vectors' lengths, which a rotation keeps): in
    float32 an angle's error grows with its position, and a score near 0 between two long
    vectors carries that error beyond any absolute tolerance (a correct answer's scores moved
    by 2e-5 where its cosines moved by 2e-6)."""
    x = ctx.inputs["x"].detach().to("cpu", torch.float64)
    lengths = x.norm(dim=-1)  # (B, n_heads, T)
    scale = lengths.unsqueeze(-1) * lengths.unsqueeze(-2)  # (B, n_heads, T, T)
    cosines = ctx.out @ ctx.out.mT / scale  # (B, n_heads, T, T)
    moved = ctx.run(_shift(ctx.inputs, SHIFT))
    diff = float((moved @ moved.mT / scale - cosines).abs().max())
    if not diff <= ctx.tol["rtol"]:  # NaN fails
        return (f"the dot product of two rotated vectors must depend only on the distance between their "
                f"positions; with every position moved by {SHIFT}, the cosine between two of them "
                f"(out @ out.mT over their lengths) changed by up to {diff:.3g}.\n"
                "  Each pair's angle is position * frequency, with one fixed frequency per pair.")


def _moves_with_positions(ctx):
    """attends: the output changes when the positions change."""
    if ctx.close(ctx.run(_shift(ctx.inputs, 3)), ctx.out):
        return "stays the same when the positions change: it never uses them"


def _rope_baselines(inputs):
    x = inputs["x"]
    return [("x returned unchanged (no rotation)", x), ("zeros", torch.zeros_like(x))]


KEEPS_LENGTHS = Invariant("keeps_lengths", _keeps_lengths)


RELATIVE = Invariant("relative", _relative)


# --- grouped_query_attention(q, k, v, n_kv_heads, mask) ------------------------------

def _gqa_heads(d):
    """(n_kv_heads, group, n_heads): group never equals n_kv_heads, so that a mapping by
    h // n_kv_heads and one by h // group differ."""
    n_kv, group = d["n_kv_heads"], d["group"]
    group += group == n_kv
    return n_kv, group, n_kv * group


def _random_mask(gen, T_q, T_k, hidden_columns=()):
    """(T_q, T_k) bool, True = hidden: random, with the given key columns hidden from every
    query; every row keeps at least one visible key and hides at least one."""
    hide = torch.rand(T_q, T_k, generator=gen) < 0.4
    hide[:, list(hidden_columns)] = True
    free = [j for j in range(T_k) if j not in hidden_columns]
    for i in range(T_q):
        if hide[i].all():
            hide[i, free[i % len(free)]] = False
        if not hide[i].any():
            hide[i, (i + 1) % T_k] = True
    return hide


def _window_band(T_q, T_k, window):
    """(T_q, T_k) bool, True = hidden: the queries are the last T_q of T_k positions, each
    seeing itself and the window - 1 keys before it."""
    rows = torch.arange(T_k - T_q, T_k).view(-1, 1)  # (T_q, 1) the queries' positions
    cols = torch.arange(T_k).view(1, -1)  # (1, T_k) the keys' positions
    return (cols > rows) | (cols <= rows - window)


def _draw_gqa(gen, case, d):
    B, T, hs = d["B"], d["T"], d["head_size"]
    n_kv, group, nh = _gqa_heads(d)
    T = bump(T, {B, nh, n_kv, hs})
    hs = bump(hs, {B, nh, n_kv, T})
    if case == "rectangular":  # fewer queries than keys: the queries come last, as with a cache
        T_q = bump(max(2, T // 2), {B, nh, n_kv, hs, T})
        T_q = T_q if T_q < T else T - 1
        mask = _window_band(T_q, T, max(2, T_q - 2))
    else:
        T_q = T
        mask = _random_mask(gen, T, T, hidden_columns=(1, T - 3))  # two keys no query may see
    return {"q": randn(gen, B, nh, T_q, hs), "k": randn(gen, B, n_kv, T, hs), "v": randn(gen, B, n_kv, T, hs),
            "n_kv_heads": n_kv, "mask": mask}


def _call_gqa(inputs):
    return {"kind": "function", "names": ["q", "k", "v", "n_kv_heads", "mask"],
            "args": [inputs["q"], inputs["k"], inputs["v"], inputs["n_kv_heads"], inputs["mask"]]}


def _gqa_sizes(inputs):
    B, nh, T_q, hs = inputs["q"].shape
    sz = {"B": B, "n_heads": nh, "n_kv_heads": int(inputs["n_kv_heads"]), "T": inputs["k"].shape[2],
          "head_size": hs}
    if T_q != sz["T"]:
        sz["T_q"] = T_q
    return sz


def _crop_gqa(inputs, L):
    T_q, T = inputs["q"].shape[2], inputs["k"].shape[2]
    Lq = max(1, L - (T - T_q))  # the queries are the last T_q of the T positions
    mask = inputs["mask"][-Lq:, :L] if T_q < T else inputs["mask"][:L, :L]
    return {**inputs, "q": inputs["q"][..., -Lq:, :] if T_q < T else inputs["q"][..., :L, :],
            "k": inputs["k"][..., :L, :], "v": inputs["v"][..., :L, :], "mask": mask}


def _heads_changed(ctx, j):
    """The query heads whose output changes when key/value head j changes."""
    new = dict(ctx.inputs)
    for name in ("k", "v"):
        t = ctx.inputs[name].clone()
        t[:, j] += 3 * noise_like(t[:, j])
        new[name] = t
    out = ctx.run(new)
    return [h for h in range(out.shape[1]) if not ctx.close(out[:, h], ctx.out[:, h])]


def _contiguous_groups(ctx):
    """Key/value head j reaches exactly the query heads j * group .. (j + 1) * group - 1."""
    nh, n_kv = ctx.out.shape[1], int(ctx.inputs["n_kv_heads"])
    group = nh // n_kv
    for j in range(n_kv):
        want = list(range(j * group, (j + 1) * group))
        got = _heads_changed(ctx, j)
        if got != want:
            said = ", ".join(map(str, got)) if got else "none of them"
            return (f"changing key/value head {j} changed query heads {said}; with n_heads = {nh} and "
                    f"n_kv_heads = {n_kv}, key/value head {j} serves query heads {want[0]}..{want[-1]}.\n"
                    f"  Each key/value head serves a contiguous group of n_heads // n_kv_heads = {group} "
                    "query heads (see Hint 3 above the exercise).")


def _hidden_keys_unread(ctx):
    """Keys and values that the mask hides from every query change nothing."""
    hidden = ctx.inputs["mask"].all(0).nonzero().flatten().tolist()  # key positions no query may see
    if not hidden:
        return None
    new = dict(ctx.inputs)
    for name in ("k", "v"):
        t = ctx.inputs[name].clone()
        t[..., hidden, :] += 3 * noise_like(t[..., hidden, :])
        new[name] = t
    if not ctx.close(ctx.run(new), ctx.out):
        said = (f"keys {', '.join(map(str, hidden))} are hidden from every query (the mask is True in their "
                "whole column), yet changing them changed the output.\n"
                "  mask is True where a query may NOT attend: those scores become -inf before the softmax.")
        if ctx.close(ctx.run({**ctx.inputs, "mask": torch.zeros_like(ctx.inputs["mask"])}), ctx.out):
            return (f"{said}\n  Likely mistake: the mask argument never used (the output is the same with "
                    "no key hidden) — fill the scores where the given mask is True; do not build a mask "
                    "of your own.", "mask_unused")
        return said


def _gqa_baselines(inputs):
    q, v, mask = inputs["q"], inputs["v"], inputs["mask"]
    group = q.shape[1] // int(inputs["n_kv_heads"])
    v_all = v.repeat_interleave(group, dim=1)  # (B, n_heads, T, head_size)
    uniform = registry.reference("masked_softmax")(torch.zeros(mask.shape, dtype=v.dtype), mask)
    out = [("zeros", torch.zeros_like(q)), ("q returned unchanged", q),
           ("uniform weights over the visible keys (q and k ignored)", uniform @ v_all)]
    if q.shape[2] == v.shape[2]:
        out.append(("v returned, repeated to n_heads heads (no attention)", v_all))
    return out


GROUPS = Invariant("contiguous_groups", _contiguous_groups)


HIDDEN_KEYS = Invariant("hidden_keys_unread", _hidden_keys_unread)


def _changes_with_q_and_k(ctx):
    new = {**ctx.inputs, "q": ctx.inputs["q"] + noise_like(ctx.inputs["q"]),
           "k": ctx.inputs["k"] + noise_like(ctx.inputs["k"])}
    if ctx.close(ctx.run(new), ctx.out):
        return "stays the same when q and k change: it never uses them"


# --- SlidingWindowAttention: a rolling key/value cache --------------------------------

def _window_chunks(T_prompt, window, taken):
    """A prompt longer than the window; single tokens past the window; a chunk longer than
    the window into the full cache; single tokens for two windows more."""
    n = bump(window + 2, taken | {T_prompt})
    return [T_prompt] + [1] * (window + 1) + [n] + [1] * (2 * window)


def _draw_window(gen, case, d):
    B, C, n_kv, (_, group, nh) = d["B"], d["C"], d["n_kv_heads"], _gqa_heads(d)
    window = bump(d["window"], {B, n_kv, nh})
    hs = 2 * d["half"]  # rotary positions turn pairs of dims
    while hs in {B, n_kv, nh, window}:
        hs += 2
    taken = {B, nh, n_kv, hs, window}
    C = bump(C, taken | {nh * hs})
    taken.add(C)
    if case == "prompt":  # one prompt, three windows and more, no cache read
        chunks = [bump(3 * window + 2, taken)]
    else:
        chunks = _window_chunks(bump(window + 4, taken), window, taken)
    T = sum(chunks)
    w = lambda n: randn(gen, n * hs, C) * C**-0.5  # (n * head_size, C)
    return {"x": randn(gen, B, T, C), "w_query": w(nh), "w_key": w(n_kv), "w_value": w(n_kv),
            "w_proj": randn(gen, C, nh * hs) * (nh * hs) ** -0.5, "b_proj": 0.1 * randn(gen, C),
            "n_heads": nh, "n_kv_heads": n_kv, "window": window, "chunks": chunks}


def _call_window(inputs):
    n_heads, n_kv = inputs["n_heads"], inputs["n_kv_heads"]
    C, head_size = inputs["x"].shape[-1], inputs["w_query"].shape[0] // n_heads
    call = {"kind": "stream", "ctor": [C, n_heads, n_kv, head_size, inputs["window"]], "ctor_kw": {},
            "x": inputs["x"], "chunks": inputs["chunks"],
            "params": {"query.weight": inputs["w_query"], "key.weight": inputs["w_key"],
                       "value.weight": inputs["w_value"], "proj.weight": inputs["w_proj"],
                       "proj.bias": inputs["b_proj"]},
            "param_hint": "the given __init__: query from C to n_heads * head_size features, key and value "
                          "from C to n_kv_heads * head_size, all without bias; proj from n_heads * head_size "
                          "back to C",
            "eval": True}  # evaluation mode, as every module's check: a dropout the student adds is off
    if "report" in inputs:
        call["report"] = inputs["report"]
    return call


def _window_shape(inputs):
    if "report" in inputs:
        return (len(HELD),), ("report",)
    return inputs["x"].shape, ("B", "T", "C")


def _window_sizes(inputs):
    B, T, C = inputs["x"].shape
    nh = int(inputs["n_heads"])
    return {"B": B, "T": T, "C": C, "n_heads": nh, "n_kv_heads": int(inputs["n_kv_heads"]),
            "head_size": inputs["w_query"].shape[0] // nh, "window": int(inputs["window"]),
            "prompt": int(inputs["chunks"][0])}


def _cut_chunks(chunks, L):
    out, total = [], 0
    for n in chunks:
        if total >= L:
            break
        out.append(min(n, L - total))
        total += out[-1]
    return out


def _crop_window(inputs, L):
    return {**inputs, "x": inputs["x"][:, :L], "chunks": _cut_chunks(inputs["chunks"], L)}


def _report(ctx, T, inputs=None):
    """What the student's module holds besides its parameters after the first T tokens of
    inputs (the check's by default) (grader.checks.student_call's report): {name: number}."""
    return held(ctx, _crop_window(inputs or ctx.inputs, T), ctx.inputs["n_kv_heads"])


def _keeps_the_window(ctx):
    """After many tokens, the module holds at most `window` keys and values per key/value
    head, of n_kv_heads heads, and holds no more after more tokens."""
    sz = _window_sizes(ctx.inputs)
    B, n_kv, nh, hs, window, T = (sz[k] for k in ("B", "n_kv_heads", "n_heads", "head_size", "window", "T"))
    early, late = T - window - 1, T
    first, last = _report(ctx, early), _report(ctx, late)
    bound = 2 * B * n_kv * window * hs  # keys and values of the window, n_kv_heads heads
    if last["held"] > first["held"]:
        return (f"your module holds {first['held']} numbers after {early} tokens and {last['held']} after "
                f"{late}: the cache grows with the text.\n"
                f"  Keep only the last window = {window} keys and values (at most {bound} numbers here), "
                "dropping the oldest as new ones come.", "cache_grows")
    if last["with n_heads"] >= B * nh * hs:
        return (f"your cache holds {last['with n_heads']} numbers in tensors with n_heads = {nh} heads: it keeps "
                "the key/value heads after repeating them.\n  Cache the n_kv_heads heads as they are and repeat "
                f"them only for the attention step: {nh // n_kv} times less memory.", "cache_repeated_heads")
    if last["with n_kv_heads"] > bound:
        return (f"your cache holds {last['with n_kv_heads']} numbers after {late} tokens, more than the "
                f"{bound} of window = {window} keys and values.\n  Drop each key and value as soon as no new "
                "token can see it.", "cache_too_long")
    one = {**ctx.inputs, "window": 1}  # each token sees only itself: nothing needs keeping
    first, last = _report(ctx, early, one), _report(ctx, late, one)
    if last["held"] > first["held"]:
        return (f"with window = 1 (a token sees only itself), your module holds {first['held']} numbers after "
                f"{early} tokens and {last['held']} after {late}: the cache grows with the text.\n  Check the "
                "crop at window = 1: a slice such as [..., -(window - 1):, :] is [..., -0:, :], which keeps "
                "everything.", "cache_grows")


def _reads_the_cache(ctx):
    """attends: the first token after the prompt sees the end of the prompt, from the cache."""
    prompt, window = ctx.inputs["chunks"][0], int(ctx.inputs["window"])
    if len(ctx.inputs["chunks"]) < 2:
        return None
    x = ctx.inputs["x"].clone()
    seen = slice(prompt - window + 1, prompt)  # the prompt's tokens the next token may see
    x[:, seen] += 3 * noise_like(x[:, seen])
    if ctx.close(ctx.run({**ctx.inputs, "x": x})[:, prompt], ctx.out[:, prompt]):
        return (f"at the first token after the prompt stays the same when the prompt's last {window - 1} tokens "
                "change, which it may see: it does not read them from the cache (is the cache kept, "
                "and are its last entries the ones kept?)")


def _window_baselines(inputs):
    x, n_heads, n_kv = inputs["x"], int(inputs["n_heads"]), int(inputs["n_kv_heads"])
    B, T, C = x.shape
    hs = inputs["w_query"].shape[0] // n_heads
    proj = lambda t: t @ inputs["w_proj"].mT + inputs["b_proj"]  # (B, T, C)
    v = (x @ inputs["w_value"].mT).view(B, T, n_kv, hs).repeat_interleave(n_heads // n_kv, dim=2)
    v = v.reshape(B, T, n_heads * hs)  # (B, T, n_heads * head_size)
    band = registry.reference("sliding_window_mask")(T, int(inputs["window"]))
    uniform = registry.reference("masked_softmax")(torch.zeros(T, T, dtype=x.dtype), band)  # (T, T)
    return [("x returned unchanged", x), ("zeros", torch.zeros_like(x)),
            ("proj of zeros (only the bias)", proj(torch.zeros_like(v))),
            ("the values merely projected: each token sees only itself", proj(v)),
            ("uniform weights over the window (queries and keys ignored)", proj(uniform @ v))]


KEEPS_THE_WINDOW = Invariant("keeps_the_window", _keeps_the_window)


EXERCISES = {}  # key -> Exercise, in the notebook's order
EXERCISES["apply_rope"] = Exercise(
    name="apply_rope", call=lambda i: {"kind": "function", "args": [i["x"], i["positions"]],
                                       "names": ["x", "positions"]},
    reference=registry.reference("apply_rope"), draw=_draw_rope,
    dims={"B": (3, (3, 4)), "n_heads": (5, (4, 5)), "T": (37, (30, 45)), "half": (4, (3, 6)),
          "first": (11, (3, 60))},  # no size of 2, the size of a pair (in an error, a 2 names no size)
    distinct=("B", "n_heads", "T"), shape=lambda i: (i["x"].shape, ("B", "n_heads", "T", "head_size")),
    focuses={
        "output": Focus("returns x's shape, dtype and device", invariants=(FOLLOWS_INPUTS,)),
        "rotation": Focus("keeps the length of every vector (a rotation)", invariants=(KEEPS_LENGTHS,)),
        "relative": Focus("gives dot products that depend only on the distance between positions",
                          invariants=(RELATIVE,)),
        "values": Focus("matches rotary positions with interleaved pairs", invariants=(KEEPS_LENGTHS,),
                        values=True),
    },
    attends=_moves_with_positions, shortcuts=(),
    diagnosis=Diagnosis(
        sizes=_rope_sizes, crop=_crop_rope, reads=diagnosis.reads("x", n_heads="1", T="-2", head_size="-1"),
        baselines=_rope_baselines, given_code=True, error_finding=_rope_error, reads_no_values=True,
        task="turn each pair of dims (2i, 2i + 1) by the angle position * base ** (-2i / head_size)"))


EXERCISES["grouped_query_attention"] = Exercise(
    name="grouped_query_attention", call=_call_gqa, reference=registry.reference("grouped_query_attention"),
    draw=_draw_gqa,
    dims={"B": (4, (2, 5)), "n_kv_heads": (3, (2, 3)), "group": (2, (2, 4)), "T": (11, (9, 15)),
          "head_size": (5, (4, 7))},
    distinct=("B", "n_kv_heads", "T", "head_size"),
    shape=lambda i: (i["q"].shape, ("B", "n_heads", "T_q", "head_size")),
    focuses={
        "output": Focus("returns (B, n_heads, T_q, head_size)", invariants=(FOLLOWS_INPUTS,)),
        "groups": Focus("gives each key/value head a contiguous group of query heads", invariants=(GROUPS,)),
        "masked": Focus("never reads the keys the mask hides", invariants=(HIDDEN_KEYS,)),
        "values": Focus("matches grouped-query attention", invariants=(GROUPS,), values=True),
        "rectangular": Focus("matches with fewer queries than keys (the queries last, as with a cache)",
                             case="rectangular", values=True),
    },
    attends=_changes_with_q_and_k, shortcuts=ATTENTION_SHORTCUTS,
    diagnosis=Diagnosis(
        sizes=_gqa_sizes, crop=_crop_gqa, picture="output", baselines=_gqa_baselines, given_code=True,
        reads=diagnosis.reads("q", n_heads="1", T="-2", head_size="-1"),
        task="repeat each key/value head for its group of query heads, then scaled, masked attention"))


EXERCISES["sliding_window_attention"] = Exercise(
    name="SlidingWindowAttention", call=_call_window, reference=registry.reference("sliding_window_attention"),
    draw=_draw_window, module=True,
    dims={"B": (4, (3, 4)), "C": (14, (12, 18)), "n_kv_heads": (3, (3, 4)), "group": (2, (2, 3)),
          "half": (4, (2, 5)), "window": (5, (3, 7))},  # no size of 2, the size of a pair
    distinct=("B", "C", "n_kv_heads", "window"), shape=_window_shape,
    focuses={
        "output": Focus("returns (B, T_new, C) for every chunk of new tokens", invariants=(FOLLOWS_INPUTS,)),
        "prompt": Focus("matches windowed attention on a prompt several windows long", case="prompt",
                        values=True),
        "values": Focus("matches windowed attention at every step, fed a prompt and then a few tokens at a "
                        "time, past the window", values=True),
        "memory": Focus("keeps at most window keys and values per key/value head", invariants=(KEEPS_THE_WINDOW,)),
    },
    attends=_reads_the_cache, shortcuts=(),
    diagnosis=Diagnosis(
        sizes=_window_sizes, crop=_crop_window, reads=diagnosis.reads("x"), baselines=_window_baselines,
        given_code=True, reads_no_values=True,
        task="rotate the new queries and keys at their positions in the text, attend over the cached keys "
             "and the new ones within the window, keep the last keys and values"))
