"""03: mask the future with -inf, softmax each row (masked_softmax, causal_weights)."""
import torch

from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis
from grader.checks.exercise import Exercise, Focus
from grader.checks.exercises.common import (FOLLOWS_INPUTS, FULLY_MASKED_ROWS, FUTURE_GETS_ZERO,
                                            MASKED_GET_ZERO, ROWS_SUM_TO_ONE, SCORES_READS, STABLE,
                                            call_function, causal, changes_with, randn)


def _draw_masked_softmax(gen, case, d):
    B, T = d["B"], d["T"]
    scores = 2 * randn(gen, B, T, T)  # (B, T, T)
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


def _weights_sizes(inputs):
    B, T, _ = inputs["scores"].shape
    return {"B": B, "T": T}


def _crop_scores(inputs, L):
    out = {**inputs, "scores": inputs["scores"][..., :L, :L]}
    if "mask" in inputs:
        out["mask"] = inputs["mask"][..., :L, :L]
    return out


_WEIGHTS_VARIANTS = (diagnosis.fill_variants, diagnosis.scale_variants)


MASK_CAUSAL = causal(["scores"], in_dim=-1, out_dim=-2, what="key")


EXERCISES = {
    "masked_softmax": Exercise(
        name="masked_softmax", call=call_function("scores", "mask"),
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
        attends=changes_with(["scores"], "the scores"),
        diagnosis=Diagnosis(
            sizes=_weights_sizes, crop=_crop_scores, picture="weights", reads=SCORES_READS,
            baselines=diagnosis.weights_baselines,
            task="softmax the scores over the keys, masked positions removed",
            variants=(diagnosis.given_mask_variants, *_WEIGHTS_VARIANTS), scale=diagnosis.NO_SCALE)),
    "causal_weights": Exercise(
        name="causal_weights", call=call_function("scores"), reference=registry.reference("causal_weights"),
        draw=_draw_causal_scores, dims={"B": (2, (2, 5)), "T": (7, (3, 10))}, distinct=("B", "T"),
        shape=lambda i: (i["scores"].shape, ("B", "T", "T")),
        focuses={
            "output": Focus("returns weights shaped like the scores", invariants=(FOLLOWS_INPUTS,)),
            "rows_sum_to_one": Focus("every row sums to 1", invariants=(ROWS_SUM_TO_ONE,)),
            "causal": Focus("gives the future no weight", invariants=(FUTURE_GETS_ZERO, MASK_CAUSAL)),
            "values": Focus("matches the reference values",
                            invariants=(ROWS_SUM_TO_ONE, FUTURE_GETS_ZERO, MASK_CAUSAL, STABLE), values=True),
        },
        attends=changes_with(["scores"], "the scores"),
        diagnosis=Diagnosis(
            sizes=_weights_sizes, crop=_crop_scores, picture="weights", reads=SCORES_READS,
            baselines=diagnosis.weights_baselines,
            task="softmax the scores over the keys, the future removed",
            variants=(diagnosis.mask_offset_variants, *_WEIGHTS_VARIANTS), scale=diagnosis.NO_SCALE)),
}
