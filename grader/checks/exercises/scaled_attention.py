"""05: scaled dot-product attention, with or without a mask."""
import torch

from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis
from grader.checks.exercise import Exercise, Focus
from grader.checks.exercises.common import (ATTENTION_SHORTCUTS, ATTENTION_VARIANTS,
                                            FOLLOWS_INPUTS, batch_independent, call_function,
                                            causal, changes_with, randn)
from grader.checks.masks import causal_mask


def _draw_sdpa(gen, case, d):
    B, T, hs = d["B"], d["T"], d["head_size"]
    q, k, v = (randn(gen, B, T, hs) for _ in range(3))  # (B, T, head_size)
    if case == "causal":
        mask = causal_mask(T)  # (T, T)
    elif case == "padding":
        mask = torch.rand(B, T, T, generator=gen) < 0.4  # (B, T, T)
        mask[..., 0] = False
    else:
        mask = None
    return {"q": q, "k": k, "v": v, "mask": mask}


def _sdpa_sizes(inputs):
    B, T, hs = inputs["q"].shape
    return {"B": B, "T": T, "head_size": hs}


def _crop_qkv(inputs, L):
    out = {**inputs, **{n: inputs[n][:, :L] for n in ("q", "k", "v")}}
    if inputs["mask"] is not None:
        out["mask"] = inputs["mask"][..., :L, :L]
    return out


SDPA_CAUSAL = causal(["k", "v"], in_dim=-2, out_dim=-2, what="key", batch_keys=["q", "k", "v"])


SDPA_BATCH = batch_independent(["q", "k", "v"])


EXERCISES = {
    "scaled_dot_product_attention": Exercise(
        name="scaled_dot_product_attention", call=call_function("q", "k", "v", "mask"),
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
        attends=changes_with(["q", "k"], "q and k"), shortcuts=ATTENTION_SHORTCUTS,
        diagnosis=Diagnosis(
            sizes=_sdpa_sizes, crop=_crop_qkv, reads=diagnosis.reads("q", head_size="-1"),
            baselines=diagnosis.sdpa_baselines, task="softmax(q @ k^T * head_size ** -0.5, masked) @ v",
            variants=(diagnosis.optional_mask_variants, *ATTENTION_VARIANTS), scale=diagnosis.HEAD_SIZE_SCALE)),
}
