"""01: a token averages its past, with two for loops (bag_of_words_loop)."""
import torch

from grader.checks import diagnosis, registry
from grader.checks.diagnosis import Diagnosis
from grader.checks.exercise import Exercise, Focus, Invariant
from grader.checks.exercises.common import (FOLLOWS_INPUTS, X_READS, batch_independent,
                                            call_function, causal, crop_x, randn)


def _first_token(ctx):
    x = ctx.inputs["x"].detach().to("cpu", torch.float64)
    if not ctx.close(ctx.out[:, 0], x[:, 0]):
        return "the first token has only itself to average: out[:, 0] must equal x[:, 0]."


def _last_token(ctx):
    x = ctx.inputs["x"].detach().to("cpu", torch.float64)
    if not ctx.close(ctx.out[:, -1], x.mean(1)):
        return "the last token sees the whole sequence: out[:, -1] must equal x.mean(1)."


def _draw_bag(gen, case, d):
    return {"x": randn(gen, d["B"], d["T"], d["C"])}


def _bag_sizes(inputs):
    B, T, C = inputs["x"].shape
    return {"B": B, "T": T, "C": C}


def _bag_diagnosis(task):
    return Diagnosis(sizes=_bag_sizes, crop=crop_x, reads=X_READS, baselines=diagnosis.bag_baselines,
                     task=task, variants=(diagnosis.bag_variants,),
                     nonfinite_hint=diagnosis.averaging_nonfinite_hint)


def bag_exercise(name, task, shortcuts):
    x_causal = causal(["x"], in_dim=1, out_dim=1, batch_keys=["x"])
    x_batch = batch_independent(["x"])
    return Exercise(
        name=name, call=call_function("x"), reference=registry.reference("bag_of_words"), draw=_draw_bag,
        dims={"B": (3, (2, 5)), "T": (10, (9, 14)), "C": (5, (2, 9))}, distinct=("B", "T", "C"),  # T above 8, visible and hidden: a loop written for the demo's 8 tokens fails
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
        },
        shortcuts=shortcuts, diagnosis=_bag_diagnosis(task))


EXERCISES = {
    "bag_of_words_loop": bag_exercise("bag_of_words_loop", "average tokens 0..t of each sequence",
                                       shortcuts=("torch.cumsum", "torch.tril")),
}
