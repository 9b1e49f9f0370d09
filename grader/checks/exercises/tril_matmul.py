"""02: tril turns one matmul into running averages (running_average_weights,
bag_of_words_matmul)."""
import torch

from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis
from grader.checks.exercise import Exercise, Focus
from grader.checks.exercises.common import FUTURE_GETS_ZERO, ROWS_SUM_TO_ONE, call_function
from grader.checks.exercises.bag_of_words import bag_exercise


def _draw_weights(gen, case, d):
    return {"T": d["T"]}


def _crop_T(inputs, L):
    return {**inputs, "T": L}


EXERCISES = {
    "bag_of_words_matmul": bag_exercise("bag_of_words_matmul",
                                         "average tokens 0..t with one (T, T) @ (B, T, C) matmul",
                                         shortcuts=("torch.cumsum",)),
    "running_average_weights": Exercise(
        name="running_average_weights", call=call_function("T"),
        reference=registry.reference("running_average_weights"), draw=_draw_weights,
        dims={"T": (6, (3, 12))}, shape=lambda i: ((i["T"], i["T"]), ("T", "T")),
        out_dtype=lambda i: torch.float32,
        focuses={
            "output": Focus("returns a (T, T) float32 tensor"),
            "rows_sum_to_one": Focus("every row sums to 1", invariants=(ROWS_SUM_TO_ONE,)),
            "lower_triangular": Focus("gives the future no weight", invariants=(FUTURE_GETS_ZERO,)),
            "values": Focus("matches the reference values",
                            invariants=(ROWS_SUM_TO_ONE, FUTURE_GETS_ZERO), values=True),
        },
        diagnosis=Diagnosis(
            sizes=lambda i: {"T": int(i["T"])}, crop=_crop_T, picture="weights", reads={"T": "T"},
            baselines=diagnosis.running_weights_baselines, task="row t holds 1/(t+1) in columns 0..t",
            variants=(diagnosis.running_weights_variants,), nonfinite_hint=diagnosis.averaging_nonfinite_hint)),
}
