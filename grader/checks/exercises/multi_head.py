"""06: several heads, a list with torch.cat (MultiHeadAttention), then one batched
projection (BatchedMultiHeadAttention)."""
from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis
from grader.checks.exercise import Exercise, Focus
from grader.checks.exercises.common import FOLLOWS_INPUTS, X_READS, changes_with, crop_x, randn
from grader.checks.exercises.single_head import HEAD_BATCH, HEAD_CAUSAL


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
                "params": _mha_parameters(inputs, batched), "param_hint": hint,
                "eval": True}  # evaluation mode: a dropout the student adds is off
    return call


def _draw_mha(gen, case, d):
    B, T, C, hs, nh = d["B"], d["T"], d["C"], d["head_size"], d["n_heads"]
    x = randn(gen, B, T, C)  # (B, T, C)
    w = lambda: randn(gen, nh, hs, C) * C**-0.5  # (n_heads, head_size, C)
    return {"x": x, "w_query": w(), "w_key": w(), "w_value": w(),
            "w_proj": randn(gen, C, nh * hs) * (nh * hs) ** -0.5,  # (C, n_heads * head_size)
            "b_proj": 0.1 * randn(gen, C),  # (C,)
            "causal": case != "encoder", "block_size": d["block_size"]}


def _mha_sizes(inputs):
    B, T, C = inputs["x"].shape
    n_heads, head_size = inputs["w_query"].shape[:2]
    return {"B": B, "T": T, "C": C, "block_size": int(inputs["block_size"]),
            "n_heads": n_heads, "head_size": head_size}


_MHA_DIMS = {"B": (3, (2, 4)), "T": (7, (4, 10)), "C": (12, (6, 16)), "head_size": (5, (3, 8)),
             "n_heads": (2, (2, 4)), "block_size": (9, (1, 4))}


def _mha_exercise(name, batched, task):
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
        attends=changes_with(["w_query", "w_key"], "the query and key weights"),
        shortcuts=("nn.MultiheadAttention", "F.multi_head_attention_forward"),
        diagnosis=Diagnosis(
            sizes=_mha_sizes, crop=crop_x, reads=X_READS, baselines=diagnosis.mha_baselines, task=task,
            variants=(diagnosis.causal_flag_variants, diagnosis.fill_variants, diagnosis.scale_variants,
                      diagnosis.heads_layout_variants),
            scale=diagnosis.HEAD_SIZE_SCALE))


EXERCISES = {}  # key -> Exercise, in the notebook's order
EXERCISES["multi_head_attention"] = _mha_exercise(
    "MultiHeadAttention", batched=False, task="run every head, concatenate, then self.proj")


EXERCISES["batched_multi_head_attention"] = _mha_exercise(
    "BatchedMultiHeadAttention", batched=True, task="split q, k, v into heads, attend, merge, then self.proj")
