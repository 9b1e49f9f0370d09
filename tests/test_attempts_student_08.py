"""Notebook 08's attempts by a learner (tests/attempts_student_08.py) run through the visible
checks, in the order of the notebook's check cells: each right answer passes every check,
each wrong one gets the verdict recorded for it, and the counts meet the course's bar
(named >= 85 % of the wrong attempts, none misleading, none passing). The table is printed:

    .venv/bin/python -m pytest tests/test_attempts_student_08.py -q -s -p no:randomly
"""
import functools

import pytest
import torch

from attempts_student_08 import ATTEMPTS
from grader.checks.core import CheckError, run_check
from grader.checks.exercises import EXERCISES

KEYS = {"online_softmax": "online_softmax", "tiled_attention": "tiled_attention",
        "CachedSelfAttention": "cached_attention"}
PRELUDE = "import math\nimport torch\nimport torch.nn as nn\nfrom torch.nn import functional as F\n"
VERDICTS = ("named", "generic", "misleading", "passing")


def load(attempt):
    ns = {"__name__": "__main__"}
    exec(compile(PRELUDE + attempt["code"], f"<{attempt['id']}>", "exec"), ns)
    return ns[attempt["exercise"]]


@functools.lru_cache(maxsize=None)
def failures(attempt_id):
    """[(focus, finding, message)] of every visible check that fails, in the notebook's order."""
    attempt = next(a for a in ATTEMPTS if a["id"] == attempt_id)
    exercise = EXERCISES[KEYS[attempt["exercise"]]]
    student = load(attempt)
    out = []
    for focus in exercise.focuses:
        try:
            run_check(exercise, student, focus, quiet=True)
        except CheckError as err:
            out.append((focus, err.finding, str(err)))
    return tuple(out)


def verdict(attempt):
    failed = failures(attempt["id"])
    if attempt["kind"] == "correct":
        return "passes" if not failed else "fails"
    if not failed:
        return "passing"
    expect = set(attempt["expect"])
    if any(finding and finding not in expect for _, finding, _ in failed):
        return "misleading"
    _, finding, message = failed[0]
    phrases = attempt["phrase"] if isinstance(attempt["phrase"], list) else [attempt["phrase"]]  # one per finding
    if any(p and p in message for p in phrases) and (finding is None or finding in expect):
        return "named"
    return "generic"


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[a["id"] for a in ATTEMPTS])
def test_attempt_gets_its_recorded_verdict(attempt):
    shown = "\n".join(f"{focus}: {finding}: {message}" for focus, finding, message in failures(attempt["id"]))
    assert verdict(attempt) == attempt["verdict"], shown
    for _, _, message in failures(attempt["id"]):
        assert len(message.splitlines()) <= 5, message


def test_the_counts_meet_the_bar():
    table = {}
    for attempt in ATTEMPTS:
        row = table.setdefault(attempt["exercise"], {v: 0 for v in VERDICTS + ("passes", "fails")})
        row[verdict(attempt)] += 1
    print(f"\n{'exercise':22} {'named':>6} {'generic':>8} {'misleading':>11} {'passing':>8} {'correct passes':>15}")
    for name, row in table.items():
        print(f"{name:22} {row['named']:6} {row['generic']:8} {row['misleading']:11} {row['passing']:8} "
              f"{row['passes']:9} of {row['passes'] + row['fails']}")
    total = {v: sum(row[v] for row in table.values()) for v in VERDICTS + ("passes", "fails")}
    wrong = sum(total[v] for v in VERDICTS)
    share = total["named"] / wrong
    print(f"named {total['named']} of {wrong} wrong attempts ({100 * share:.0f} %), misleading "
          f"{total['misleading']}, passing {total['passing']}; right answers passing {total['passes']} "
          f"of {total['passes'] + total['fails']}")
    assert share >= 0.85 and total["misleading"] == 0 and total["passing"] == 0 and total["fails"] == 0


def test_an_unnamed_attempt_is_recorded_as_such():
    """The verdicts are computed, not copied: an attempt whose phrase the message lacks is generic."""
    attempt = dict(next(a for a in ATTEMPTS if a["id"] == "C08"), phrase="a phrase no message has")
    assert verdict(attempt) == "generic"
    attempt = dict(attempt, expect=[])
    assert verdict(attempt) == "misleading"


def test_a_chunk_after_a_non_empty_cache_is_checked():
    """The 'short' case sends several tokens at once into a cache that holds some already."""
    from grader.answers import fixtures

    chunks = fixtures.load("cached_attention")["short"]["inputs"]["chunks"]
    assert chunks[0] >= 1 and chunks[1] > 1, chunks
    sizes = {2, 12, 3, 5, 9}  # B, C, n_heads, head_size, block_size of the visible check
    assert chunks[1] not in sizes and chunks[1] != sum(chunks), chunks
    for seed in range(20):  # hidden checks draw other sizes: the reference accepts every draw
        run_check(EXERCISES["cached_attention"], ReferenceCache, "short", hidden=True, seed=seed, quiet=True)


class ReferenceCache(torch.nn.Module):
    """A right CachedSelfAttention (the notebook's given __init__ and a plain forward)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = torch.nn.Linear(C, n_heads * head_size, bias=False)
        self.key = torch.nn.Linear(C, n_heads * head_size, bias=False)
        self.value = torch.nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = torch.nn.Linear(n_heads * head_size, C)
        self.k_cache = self.v_cache = None

    def forward(self, x):
        B, T_new, _ = x.shape
        split = lambda t: t.view(B, T_new, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is not None:
            k, v = torch.cat([self.k_cache, k], dim=2), torch.cat([self.v_cache, v], dim=2)
        self.k_cache, self.v_cache = k[:, :, -self.block_size:], v[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        hide = torch.arange(L, device=x.device)[None, :] > torch.arange(L - T_new, L, device=x.device)[:, None]
        wei = q @ self.k_cache.mT * self.head_size ** -0.5
        wei = torch.softmax(wei.masked_fill(hide, float("-inf")), dim=-1)
        return self.proj((wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, -1))
