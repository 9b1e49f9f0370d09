"""Run wrong attempts through the checks the notebooks run, and classify the feedback.

    python tests/diagnosis_eval.py [--json] [--verbose]

An attempt is the code of one solution cell (tests/attempts_own.py, and the learner's
attempts in tests/student_attempts.json). It is executed in a namespace like the
notebook's at that point (its imports, the globals its earlier cells leave behind, and
06's given Head), then every focus of its exercise is checked, as in JupyterLab, plus
the hidden values check and a graded values check. Classification:

- undetected: every check passes (a shortcut counts as detected when the graded check
  refuses it); for an attempt that is a right answer written another way, "correct" when
  every check passes, and misleading when any fails;
- misleading: a failing check names a mistake outside the attempt's expected ones;
- named: a failing check names one of the expected mistakes;
- generic: the checks fail without naming a mistake.
"""
import json
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PRELUDE = "import math\nimport torch\nimport torch.nn as nn\nfrom torch.nn import functional as F\n"
LEFTOVERS = {  # what the notebook's earlier cells leave in scope before its exercises
    "01_bag_of_words": "B, T, C = 4, 8, 2\nx = torch.randn(B, T, C)\n",
    "02_tril_matmul": "B, T, C = 4, 8, 2\nx = torch.randn(B, T, C)\n"
                      "def running_average_weights(T):\n    wei = torch.tril(torch.ones(T, T))\n"
                      "    return wei / wei.sum(1, keepdim=True)\n",
    "03_masked_softmax": "T = 5\nmask = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
                         "scores = torch.randn(T, T)\n"
                         "def masked_softmax(scores, mask):\n"
                         "    return torch.softmax(scores.masked_fill(mask, float('-inf')), -1).nan_to_num(0.0)\n",
    "04_single_head": "B, T, C = 4, 8, 16\nhead_size = 6\nx = torch.randn(3, T, C)\n",
    "05_scaled_attention": "B, T, head_size = 2, 6, 16\n",
    "06_multi_head": "B, T, C, n_heads, head_size = 2, 7, 12, 3, 4\nx = torch.randn(B, T, C)\n",
}
GIVEN = {  # the classes notebooks 07 and 08 give, by the names the attempts use
    "07_transformer_block": {"CausalSelfAttention": "CausalSelfAttention", "MLP": "MLP",
                             "GivenBlock": "Block", "GivenGPT": "GPT"},
    "08_attention_at_scale": {"GivenCache": "CachedSelfAttention"},
}
GIVEN_HEAD = '''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.causal = causal

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
'''
KEYS = {"bag_of_words_loop": "bag_of_words_loop", "bag_of_words_matmul": "bag_of_words_matmul",
        "running_average_weights": "running_average_weights", "masked_softmax": "masked_softmax",
        "causal_weights": "causal_weights", "Head": "head", "head": "head",
        "scaled_dot_product_attention": "scaled_dot_product_attention",
        "MultiHeadAttention": "multi_head_attention", "multi_head_attention": "multi_head_attention",
        "BatchedMultiHeadAttention": "batched_multi_head_attention",
        "batched_multi_head_attention": "batched_multi_head_attention",
        "Block": "block", "GPT": "gpt", "generate": "generate", "online_softmax": "online_softmax",
        "tiled_attention": "tiled_attention", "CachedSelfAttention": "cached_attention"}
STUDENT_NAMES = {"head": "Head", "multi_head_attention": "MultiHeadAttention",
                 "batched_multi_head_attention": "BatchedMultiHeadAttention", "block": "Block",
                 "gpt": "GPT", "cached_attention": "CachedSelfAttention"}


_NOTEBOOK_COPY = {}


def given_classes(notebook):
    """The classes the notebook gives, defined as a notebook's cells define them (module
    __main__): grader/answers/correct.py's, run as notebook code, so that the rule against
    the course's own code sees them as the notebook's, as in the notebooks."""
    if not _NOTEBOOK_COPY:
        from grader.answers import correct

        _NOTEBOOK_COPY["__name__"] = "__main__"
        exec(compile(Path(correct.__file__).read_text(), correct.__file__, "exec"), _NOTEBOOK_COPY)
    return {name: _NOTEBOOK_COPY[source] for name, source in GIVEN.get(notebook, {}).items()}


def own_attempts():
    from attempts_0708 import ATTEMPTS as LATER
    from attempts_own import ATTEMPTS

    return ATTEMPTS + LATER


def student_attempts():
    path = HERE / "student_attempts.json"
    return json.loads(path.read_text()) if path.exists() else []


def is_correct(attempt):
    return attempt.get("classification") == "correct-passed" or attempt.get("correct", False)


def load(attempt):
    """The student's function or class, defined as in the notebook."""
    key = KEYS[attempt["exercise"]]
    name = STUDENT_NAMES.get(key, key)
    torch.manual_seed(0)
    ns = {"__name__": "__main__", **given_classes(attempt["notebook"])}
    source = PRELUDE + LEFTOVERS.get(attempt["notebook"], "")
    if attempt["notebook"].startswith("06"):
        source += GIVEN_HEAD
    exec(compile(source, "<notebook>", "exec"), ns)
    exec(compile(attempt["code"], f"<{attempt['id']}>", "exec"), ns)
    return key, ns[name]


def run(attempt):
    """(classification, [(focus, finding, message), ...]) of one attempt."""
    from grader.checks.core import CheckError, run_check
    from grader.checks.exercises import EXERCISES

    try:
        key, student = load(attempt)
    except Exception as err:  # the attempt does not define its object: nothing to check
        return "broken", [("load", None, repr(err))]
    ex = EXERCISES[key]
    runs = [(focus, {}) for focus in ex.focuses]
    runs += [("values", {"hidden": True, "seed": 11}), ("values", {"graded": True})]
    failures = []
    for focus, kw in runs:
        try:
            run_check(ex, student, focus, quiet=True, **kw)
        except CheckError as err:
            label = focus + (" (hidden)" if kw.get("hidden") else " (graded)" if kw.get("graded") else "")
            failures.append((label, err.finding, str(err)))
    expect = set(attempt.get("expect", ()))
    named = {f for _, f, _ in failures if f}
    if is_correct(attempt):  # a right answer written another way: every check must pass
        return ("correct" if not failures else "misleading"), failures
    if not failures:
        verdict = "undetected"
    elif named - expect:
        verdict = "misleading"
    elif named & expect:
        verdict = "named"
    else:
        verdict = "generic"
    return verdict, failures


def main(argv):
    attempts = own_attempts() + student_attempts()
    counts, rows = {}, []
    for attempt in attempts:
        verdict, failures = run(attempt)
        source = "learner" if not attempt["id"].startswith("own-") else "own"
        counts.setdefault(source, {}).setdefault(verdict, 0)
        counts[source][verdict] += 1
        rows.append({"id": attempt["id"], "verdict": verdict, "expect": attempt.get("expect"),
                     "findings": [f for _, f, _ in failures]})
        if "--verbose" in argv or (verdict != "named" and "--quiet" not in argv):
            print(f"[{verdict}] {attempt['id']} expect={attempt.get('expect')}")
            for focus, finding, message in failures:
                print(f"    {focus}: {finding}\n      " + message.replace("\n", "\n      "))
    if "--json" in argv:
        print(json.dumps(rows, indent=1))
    for source, c in counts.items():
        total = sum(c.values())
        wrong = total - c.get("correct", 0)
        print(f"{source}: {total} attempts ({wrong} wrong): " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
              + f"; named {100 * c.get('named', 0) / max(wrong, 1):.0f}% of the wrong ones")


if __name__ == "__main__":
    os.environ.pop("GRADER_DEVICE", None)
    torch.set_num_threads(1)
    main(sys.argv[1:])
