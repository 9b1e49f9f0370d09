"""08: online softmax, tiled attention, key/value cache."""
import re

import torch

from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis
from grader.checks.exercise import Exercise, Focus, Invariant
from grader.checks.exercises.common import (ATTENTION_SHORTCUTS, FOLLOWS_INPUTS, ROWS_SUM_TO_ONE,
                                            X_READS, batch_independent, bump, causal, changes_with,
                                            HELD, held, noise_like, randn, reference64, wrong_already)


def _draw_online_softmax(gen, case, d):
    B, T, N = d["B"], d["T"], d["N"]
    scores = 3 * randn(gen, B, T, N)  # (B, T, N)
    scores[0, 0] = torch.sort(scores[0, 0]).values  # a new maximum at every step
    if case == "main":
        scores[0, 1] = -1000 + randn(gen, N)  # exp underflows unless the max is subtracted
        scores[-1, -1] = 1000 + randn(gen, N)  # exp overflows unless the max is subtracted
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


def _scores_far_below(ctx):
    """Softmax does not depend on the level of a row's scores: each row's scores moved to about
    -1.3e30, kept in their order 2**80 apart (float32 holds those exactly, and exp of a gap
    that large is 0, so each row's distribution is all on its largest score; -inf stays -inf),
    must give the reference's output. A running maximum started at a finite number (-1e9,
    -1e4) instead of -inf stays above every score of such a row, so its running sum underflows
    to 0. Asked only of an answer right on the scores themselves, so that it names no other
    mistake."""
    if wrong_already(ctx):
        return None  # wrong on the scores themselves: the values check names that
    scores = ctx.inputs["scores"]
    rank = scores.argsort(-1, descending=True).argsort(-1)  # (B, T, N): 0 for a row's largest
    low = (-(2.0 ** 100) - (2.0 ** 80) * rank.to(scores.dtype)).masked_fill(scores == float("-inf"), float("-inf"))
    out = ctx.run_raw({**ctx.inputs, "scores": low})
    want = reference64(ctx.exercise, {**ctx.inputs, "scores": low})
    if not ctx.close(out.nan_to_num(-1.0), want):
        bad = int((~torch.isclose(out.nan_to_num(-1.0), want, rtol=1e-3, atol=1e-4)).any(-1).sum())
        return (f"rows whose scores all lie far below 0 (about -1e30) come out wrong ({bad} of "
                f"{want[..., 0].numel()} rows{', NaN among them' if out.isnan().any() else ''}): softmax "
                "is the same whatever the level of a row's scores.\n  Start the running maximum at -inf: "
                "a finite start (-1e9, say) stays above every score of such a row, and the running sum "
                "underflows to 0.", "finite_running_max")


def _draw_tiled(gen, case, d):
    B, nh, hs = d["B"], d["n_heads"], d["head_size"]
    tile = max(d["tile_size"], 2 * hs + 1)  # a tile of scores outweighs a head_size row
    T = max(d["T"], 2 * tile + 1)  # and a strip of tile x T outweighs the inputs
    T += T % tile == 0  # the last tile is a shorter one
    q, k, v = (randn(gen, B, nh, T, hs) for _ in range(3))  # (B, n_heads, T, head_size)
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
        T = bump(block_size + 5, taken | {prompt})
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
    w = lambda: randn(gen, nh * hs, C) * C**-0.5  # (n_heads * head_size, C)
    return {"x": randn(gen, B, T, C), "w_query": w(), "w_key": w(), "w_value": w(),
            "w_proj": randn(gen, C, nh * hs) * (nh * hs) ** -0.5, "b_proj": 0.1 * randn(gen, C),
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
                          "back to C",
            "eval": True,  # evaluation mode: a dropout the student adds is off
            **({"report": inputs["report"]} if "report" in inputs else {})}


def _cache_stays_cropped(ctx):
    """Past block_size tokens, more tokens make the module hold no more: its cache itself is
    cropped to the last block_size keys and values, not only what the attention reads. Asked
    only of an answer right on the stream (the catalogue's stand-ins keep every token)."""
    T, block = ctx.inputs["x"].shape[1], int(ctx.inputs["block_size"])
    early = T - 2
    if early <= block or wrong_already(ctx):
        return None
    first, last = (held(ctx, _crop_cache(ctx.inputs, L), ctx.inputs["n_heads"])["held"] for L in (early, T))
    if last > first:
        return (f"your module holds {first} numbers after {early} tokens and {last} after {T}: the "
                f"cache keeps growing past block_size = {block}.\n  Store the cropped keys and values "
                "(the last block_size of each) as the cache, not only use them for the attention.",
                "cache_not_cropped")


def _reads_the_cache(ctx):
    """The outputs after the prompt change when the prompt changes: the cache is read."""
    prompt = ctx.inputs["chunks"][0]
    new = dict(ctx.inputs)
    x = ctx.inputs["x"].clone()
    x[:, :prompt] += noise_like(x[:, :prompt])
    new["x"] = x
    if ctx.close(ctx.run(new)[:, prompt:], ctx.out[:, prompt:]):
        return ("after the prompt stays the same when the prompt changes: the cached keys and "
                "values are never read")


def _online_softmax_sizes(inputs):
    B, T, N = inputs["scores"].shape
    return {"B": B, "T": T, "N": N}


def _tiled_sizes(inputs):
    B, nh, T, hs = inputs["q"].shape
    return {"B": B, "n_heads": nh, "T": T, "head_size": hs, "tile_size": int(inputs["tile_size"])}


def _tiled_tail_finding(inp, actual, expected, close):
    """Diagnosis.first_finding of tiled attention: right up to the last, shorter tile and wrong
    inside it, whatever it holds (zeros, NaN, or whatever torch.empty found there, which can be
    the same from call to call): T not a multiple of tile_size, the ragged tile left out."""
    T, tile_size = inp["q"].shape[-2], int(inp["tile_size"])
    start = T - T % tile_size
    if start in (0, T) or actual.shape != expected.shape:
        return None
    head, tail = (slice(0, start), slice(start, T))
    if not close(actual[..., head, :], expected[..., head, :]) or close(actual[..., tail, :], expected[..., tail, :]):
        return None
    mistake = next((m for m in registry.Catalogue("tiled_attention") if m.key == "last_tile_dropped"), None)
    if mistake is None:
        return None
    span = diagnosis.at_indices("T", f"{start}..{T - 1}" if T - start > 1 else start)
    return diagnosis.Finding(mistake.key, f"{mistake.name}: only {span} are wrong "
                             f"(T = {T} is not a multiple of tile_size = {tile_size})", mistake.hint)


def _crop_tiled(inputs, L):
    return {**inputs, **{n: inputs[n][..., :L, :] for n in ("q", "k", "v")}}


def _cache_sizes(inputs):
    B, T, C = inputs["x"].shape
    nh = int(inputs["n_heads"])
    return {"B": B, "T": T, "C": C, "n_heads": nh, "head_size": inputs["w_query"].shape[0] // nh,
            "block_size": int(inputs["block_size"]), "prompt": int(inputs["chunks"][0])}


def _cache_error(numbers, sz, message):
    """An error whose sizes hold block_size and a length past it: the cache outgrew block_size
    (a mask or a position table of block_size no longer fits it). Or an index past the end of a
    dim of block_size: a cache of block_size slots, full, written at a pointer never moved back."""
    block_size = sz["block_size"]
    grown = sorted(n for n in set(numbers) if block_size < n <= sz["T"])
    if block_size in numbers and grown:
        return diagnosis.Finding("cache_not_cropped", f"the cache grew to {grown[0]} entries, past block_size = {block_size}",
                                 "after appending, keep only the last block_size entries: the model attends "
                                 "to at most block_size tokens.")
    bmm = re.search(r"batch2 tensor to be: \[\d+, (\d+)\] but got: \[\d+, (\d+)\]", message)
    if bmm and sz["head_size"] not in (int(bmm.group(1)), int(bmm.group(2))):
        keys, values = int(bmm.group(1)), int(bmm.group(2))  # weights (.., T_new, keys) @ v (.., values, hs)
        return diagnosis.Finding("kv_out_of_step", f"the weights cover {keys} keys but there are {values} values",
                                 "the key and value caches must hold the same positions: append to both "
                                 "and crop both alike (the same slice).")
    past = re.search(r"index (\d+) is out of bounds for dimension \d+ with size (\d+)", message)
    if past and int(past.group(2)) == block_size and int(past.group(1)) >= block_size:
        return diagnosis.Finding("cache_not_cropped", f"index {int(past.group(1))} written past the end of a cache of "
                                 f"block_size = {block_size} slots: a full cache is never cropped",
                                 "once the cache holds block_size entries, drop the oldest for each new one "
                                 "(shift the entries left, or append and keep the last block_size): the "
                                 "model attends to at most block_size tokens.")
    return None


def _crop_cache(inputs, L):
    prompt = min(inputs["chunks"][0], L)
    return {**inputs, "x": inputs["x"][:, :L], "chunks": [prompt] + [1] * (L - prompt)}


ONE_PASS = Invariant("one_pass", _one_pass)


NEVER_FULL_MATRIX = Invariant("never_full_matrix", _never_full_matrix)


SKIPS_FUTURE_TILES = Invariant("skips_future_tiles", _skips_future_tiles)


TILED_CAUSAL = causal(["k", "v"], in_dim=-2, out_dim=-2, what="key", batch_keys=["q", "k", "v"])


TILED_BATCH = batch_independent(["q", "k", "v"])


EXERCISES = {}  # key -> Exercise, in the notebook's order
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
        "values": Focus("matches torch.softmax on scores of ±1000 and -inf", values=True,
                        invariants=(Invariant("scores_far_below", _scores_far_below),)),
        "one_pass": Focus("reads each row once, a score at a time", case="plain",
                          invariants=(ONE_PASS,), values=True),
    },
    attends=changes_with(["scores"], "the scores"),
    shortcuts=("torch.softmax", "F.softmax", "torch.logsumexp",  # and the same under other names:
               "F.softmin", "F.log_softmax", "torch.log_softmax", "nn.Softmax", "nn.Softmin", "nn.LogSoftmax"),
    diagnosis=Diagnosis(
        sizes=_online_softmax_sizes, crop=lambda i, L: {**i, "scores": i["scores"][..., :L, :]},
        reads=diagnosis.reads("scores", N="-1"), picture="weights",  # a row of scores per query, over keys
        given_code=True, running_max=True,
        task="one pass with a running maximum and a running sum, then normalise",
        first_finding=diagnosis.online_softmax_finding))


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
    attends=changes_with(["q", "k"], "q and k"), shortcuts=("F.scaled_dot_product_attention",),
    diagnosis=Diagnosis(
        sizes=_tiled_sizes, crop=_crop_tiled, reads=diagnosis.reads("q", n_heads="1", T="-2", head_size="-1"), given_code=True, running_max=True,
        task="causal attention, one tile of queries against one tile of keys at a time",
        first_finding=_tiled_tail_finding))


EXERCISES["cached_attention"] = Exercise(
    name="CachedSelfAttention", call=_call_cache, reference=registry.reference("cached_attention"), draw=_draw_cache,
    module=True,
    dims={"B": (2, (2, 3)), "C": (12, (10, 16)), "n_heads": (3, (2, 4)), "head_size": (5, (3, 6)),
          "context": (9, (5, 9)), "prompt": (7, (2, 7))},
    distinct=("B", "C", "n_heads", "head_size", "context", "prompt"),
    shape=lambda i: ((len(HELD),), ("report",)) if "report" in i else (i["x"].shape, ("B", "T", "C")),
    focuses={
        "output": Focus("returns (B, T_new, C) for every chunk of new tokens", invariants=(FOLLOWS_INPUTS,)),
        "short": Focus("matches attention without a cache, within block_size tokens", case="short",
                       values=True),
        "values": Focus("matches attention without a cache, past block_size (cropped cache)",
                        values=True, invariants=(Invariant("cache_stays_cropped", _cache_stays_cropped),)),
    },
    attends=_reads_the_cache, shortcuts=ATTENTION_SHORTCUTS,
    diagnosis=Diagnosis(
        sizes=_cache_sizes, crop=_crop_cache, reads=X_READS, given_code=True, error_finding=_cache_error,
        task="append the new keys and values to the cache, then attend over it"))
