"""07: the transformer block, the GPT's forward, generate."""
import torch

from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis
from grader.checks.exercise import Exercise, Focus, Invariant
from grader.checks.exercises.common import (FOLLOWS_INPUTS, X_READS, batch_independent, bump,
                                            causal, changes_with, crop_x, first_change, randn)


def _layer_weights(gen, C, lead=()):
    """One block's weights (pre-norm attention + MLP), with optional leading dims."""
    lin = lambda out, inp: randn(gen, *lead, out, inp) * inp**-0.5  # (..., out, in) like nn.Linear
    vec = lambda n, scale: scale * randn(gen, *lead, n)
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


def _draw_block(gen, case, d):
    B, T, nh, hs = d["B"], d["T"], d["n_heads"], d["head_size"]
    C = nh * hs  # the block's heads split C exactly
    block_size = bump(d["block_size"], {C})
    return {"x": randn(gen, B, T, C), **_layer_weights(gen, C), "n_heads": nh,
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
    V = bump(d["vocab_size"], {C})  # logits (B, T, V) and hidden states (B, T, C) differ
    block_size = bump(d["block_size"], {C, V})
    idx = torch.randint(0, V, (B, T), generator=gen)  # (B, T)
    inputs = {"idx": idx, "tok": randn(gen, V, C), "pos": randn(gen, block_size, C)}
    inputs.update(_layer_weights(gen, C, lead=(2,)))  # two blocks, stacked
    inputs.update({"lnf_w": 1 + 0.3 * randn(gen, C), "lnf_b": 0.2 * randn(gen, C),
                   "w_head": randn(gen, V, C) * C**-0.5, "b_head": 0.1 * randn(gen, V),
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
        i = first_change(before, after, 1, ctx.tol)
        return (f"not causal: changing tokens {t + 1}..{T - 1} changed the logits at position {i}.\n"
                f"  Position {i} may only use tokens 0..{i}.")


_TEMPERATURE = {"main": 0.5, "plain": 1.0, "hot": 1.7}  # a case's temperature
_GREEDY = 1e-6  # a temperature that leaves only the most likely token: taking the argmax


def _draw_generate(gen, case, d):
    """The stand-in model, the prompt and the sampler's seed. Their tokens must show the
    temperature: some models settle into a short cycle of near-certain tokens, where the
    same draws give the same tokens at another temperature (about 1 seed in 300 at 0.5 against
    0.25). Such a draw is replaced by the next one, so that sampling at the case's temperature
    gives other tokens than sampling at its square (the logits divided twice), at 1 (the
    temperature applied after the softmax) and near 0 (the most likely token each step).
    Whether a draw is kept depends on the seed alone."""
    for _ in range(100):
        inputs = _draw_generate_once(gen, case, d)
        t = inputs["temperature"]
        if t == 1.0 or _shows_temperature(inputs, (t * t, 1.0, _GREEDY)):
            return inputs
    raise RuntimeError("could not draw a model whose tokens show the temperature")


def _shows_temperature(inputs, others):
    tokens = registry.reference("generate")(**inputs)
    return all(not torch.equal(tokens, registry.reference("generate")(**{**inputs, "temperature": other}))
               for other in others)


def _draw_generate_once(gen, case, d):
    B, T, V, block_size = d["B"], d["T"], d["vocab_size"], d["block_size"]
    total = block_size + 12  # long enough to crop the context for many steps
    tok = randn(gen, V, V)  # (V, V)
    tok.diagonal().sub_(4.0)  # no token follows itself: the text cannot settle into one repeated id
    # the model has positions for 3 more tokens than the block_size generate is given, so
    # a context cropped to the model's own size is not the one asked for
    return {"model": {"tok": tok, "pos": randn(gen, block_size + 3, V), "mix": 1.5 * randn(gen, V, V)},
            "idx": torch.randint(0, V, (B, T), generator=gen).tolist(),
            "max_new_tokens": total - T, "block_size": block_size,
            "temperature": _TEMPERATURE[case],
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
    """With dropout > 0, training mode changes the output that evaluation mode gives, and only
    through the attention's dropout: the residual stream is added to, never dropped, so no entry
    of the output is exactly 0 (a dropout on x itself zeroes about a share dropout of them)."""
    trained = ctx.run(dict(ctx.inputs, train=True))
    if ctx.close(trained, ctx.out):
        return (f"in training mode, with dropout={ctx.inputs['dropout']}, the output is the same as in "
                "evaluation mode: dropout never runs while training.\n  Leave the mode to the caller: "
                "no .eval() (or training=False) inside forward; the given layers follow "
                "model.train() and model.eval() themselves.", "dropout_never_trains")
    zeros = int((trained == 0).sum())
    if zeros and not bool((ctx.out == 0).any()):
        return (f"in training mode, with dropout={ctx.inputs['dropout']}, {zeros} of {trained.numel()} entries "
                "of the output are exactly 0: a dropout runs on the residual stream itself.\n  The stream "
                "is only ever added to; the block's one dropout is the attention's, on its weights.",
                "stream_dropout")


def _gradient_flows(ctx):
    """The gradient the student's block gives (autograd) is the derivative of its own output
    (central differences in float64): nothing in forward is cut off from backpropagation."""
    inputs = {k: v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
              for k, v in ctx.inputs.items()}
    x, gen, eps = inputs["x"], torch.Generator().manual_seed(0), 1e-6
    weight, step = (randn(gen, *x.shape).to(x.device) for _ in range(2))  # (B, T, C) each
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


BLOCK_CAUSAL = causal(["x"], in_dim=1, out_dim=1, batch_keys=["x"])


BLOCK_BATCH = batch_independent(["x"])


def _block_sizes(inputs):
    B, T, C = inputs["x"].shape
    nh = int(inputs["n_heads"])
    return {"B": B, "T": T, "C": C, "n_heads": nh, "head_size": C // nh,
            "block_size": int(inputs["block_size"])}


def _gpt_sizes(inputs):
    B, T = inputs["idx"].shape
    V, C = inputs["tok"].shape
    nh = int(inputs["n_heads"])
    return {"B": B, "T": T, "C": C, "n_heads": nh, "head_size": C // nh,
            "block_size": int(inputs["block_size"]), "vocab_size": V}


def _generate_error(numbers, sz, message):
    """torch.cat of the prompt (B rows) with T rows of new ids: the model's logits[-1], the last
    sequence's T positions, sampled as if they were the batch. (With T = 1 this error is also
    that of ids appended as a row, so then it names nothing.)"""
    B, T = sz["B"], sz["T"]
    if T > 1 and sorted(set(numbers) & {B, T}) == sorted({B, T}) and 1 not in numbers[:2]:
        return diagnosis.Finding("last_sequence", "logits[-1]: the last sequence of the batch instead of each "
                                 "sequence's last position",
                                 "the model's logits are (B, T, vocab_size): every sequence's next-token logits "
                                 "are logits[:, -1, :].")
    return None


def _generate_sizes(inputs):
    return {"B": len(inputs["idx"]), "T": len(inputs["idx"][0]),
            "vocab_size": int(inputs["model"]["tok"].shape[0]), "block_size": int(inputs["block_size"])}


EXERCISES = {}  # key -> Exercise, in the notebook's order
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
    attends=changes_with(["w_query", "w_key"], "the attention's query and key weights"),
    # 07's given attention is PyTorch's own; the block exercise is its norms and residuals
    shortcuts=("nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer"),
    diagnosis=Diagnosis(
        sizes=_block_sizes, crop=crop_x, reads=X_READS, given_code=True,
        task="add attention, then the MLP, each of a normalised copy, to the residual stream"))


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
    repeatable=False, attends=_gpt_reads_tokens,
    shortcuts=("nn.TransformerEncoder", "nn.TransformerDecoder", "nn.Transformer"),
    diagnosis=Diagnosis(
        sizes=_gpt_sizes, crop=lambda i, L: {**i, "idx": i["idx"][:, :L]}, reads=diagnosis.reads("idx", C=None), given_code=True,
        task="token and position embeddings, the blocks, ln_f, then lm_head"))


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
    repeatable=False, attends=_follows_the_model,
    diagnosis=Diagnosis(
        sizes=_generate_sizes, picture="ids", reads=diagnosis.reads("idx", C=None), given_code=True,  # (B, T + max_new_tokens) ids
        task="crop the context, softmax the last logits / temperature, sample, append", error_finding=_generate_error,
        analysis=diagnosis.context_length_finding))
