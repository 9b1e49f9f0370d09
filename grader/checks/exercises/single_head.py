"""04: queries, keys, values: one Head (an nn.Module, causal or not)."""
from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis, Scale
from grader.checks.exercise import Exercise, Focus
from grader.checks.exercises.common import (ATTENTION_SHORTCUTS, ATTENTION_VARIANTS,
                                            FOLLOWS_INPUTS, X_READS, batch_independent, causal,
                                            changes_with, crop_x, randn)


def _call_head(inputs):
    head_size, C = inputs["w_query"].shape
    return {"kind": "module", "ctor": [C, head_size, inputs["block_size"]],
            "ctor_kw": {"causal": inputs["causal"]}, "x": inputs["x"],
            "params": {"query.weight": inputs["w_query"], "key.weight": inputs["w_key"],
                       "value.weight": inputs["w_value"]},
            "param_hint": "query, key, value = nn.Linear(C, head_size, bias=False)",
            "eval": True}  # evaluation mode: a dropout the student adds (as the lecture's head has) is off


def _draw_head(gen, case, d):
    B, T, C, hs = d["B"], d["T"], d["C"], d["head_size"]
    x = randn(gen, B, T, C)  # (B, T, C)
    x[:, T // 2] = 0.0  # a blank token: its scores are exactly 0
    w = lambda: randn(gen, hs, C) * C**-0.5  # (head_size, C)
    return {"x": x, "w_query": w(), "w_key": w(), "w_value": w(),
            "causal": case != "encoder", "block_size": d["block_size"]}


def _head_sizes(inputs):
    B, T, C = inputs["x"].shape
    return {"B": B, "T": T, "C": C, "block_size": int(inputs["block_size"]),
            "head_size": inputs["w_query"].shape[0]}


HEAD_CAUSAL = causal(["x"], in_dim=1, out_dim=1, batch_keys=["x"])


HEAD_BATCH = batch_independent(["x"])


EXERCISES = {
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
        attends=changes_with(["w_query", "w_key"], "the query and key weights"),
        shortcuts=ATTENTION_SHORTCUTS,
        diagnosis=Diagnosis(
            sizes=_head_sizes, crop=crop_x, reads=X_READS, baselines=diagnosis.head_baselines,
            task="wei = softmax(q @ k^T, masked); return wei @ v",
            variants=(diagnosis.causal_flag_variants, *ATTENTION_VARIANTS),
            scale=Scale(lambda sz: 1.0, *["no scale (that is notebook 05's subject)"] * 2),
            passing_note=diagnosis.mask_buffer_note)),
}
