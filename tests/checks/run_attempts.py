"""Students' attempts, run through the checks the notebooks run, and the feedback classified.

    python tests/checks/run_attempts.py [--verbose] [--json] [--corpus NAME] [--exercise NAME] [--id ID]
    python -m pytest tests/checks/test_attempts.py -s      (the same table, and one test per attempt)

The attempts live in tests/checks/attempts/*.toml, one file per corpus (who wrote them),
each a list of [[attempt]] tables in one schema (Attempt below): the code of one solution
cell, what it tries (idea), and what its feedback must be. An attempt is executed in a
namespace like the notebook's at that point (its imports, the globals its earlier cells
leave behind, the classes it gives), then every check of its exercise runs in the
notebook's order (each visible focus), then a hidden values check and a graded values
check where the code uses a shortcut, all with one memory of what the earlier checks said, as in
a notebook. Verdicts:

- a wrong attempt is *passing* when every check passes (a shortcut counts as caught when the
  graded check refuses it); *misleading* when a failing check names a mistake outside its
  expected ones (expect), or says what it must not (unsaid: a wrong fix, an accusation); *named* when a failing check names one of them (or, where the
  attempt gives a phrase, a failing check's message says it); *generic* otherwise;
- a right answer written another way (correct = true) is *correct* when every check
  passes, and *refused* when any fails.

An attempt whose cause no check names yet says why in `unnamed`: it must then be generic,
never misleading or passing.
An attempt the checks get wrong today (misleading, passing, or a mistake whose key exists but
is not reached for this form) says so in `known`: its test is expected to fail (strictly, so
that fixing the checks takes the mark off), and it counts against the bar.
"""
import argparse
import collections
import dataclasses
import functools
import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPORA = HERE / "attempts"
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

HIDDEN_SEED = 11  # the hidden values check's seed: every run classifies the same
WRONG = ("named", "generic", "misleading", "passing")
BAR = 0.9  # at least this share of the wrong attempts named (issue #29)
# an index said as if it were a size ("at T = 3", "except T = 6"): messages say "position t = 3"
INDEX_AS_SIZE = re.compile(r"\b(at|except|up to) (B|T|C|N|n_heads|head_size|vocab_size) = \d")


@dataclass(frozen=True)
class Attempt:
    """One attempt at one exercise: the schema of tests/checks/attempts/*.toml."""
    id: str  # unique across the corpora
    notebook: str  # "07_transformer_block"
    exercise: str  # the name the notebook asks for: "Block", "bag_of_words_loop"
    idea: str  # what the attempt does (its mistake, or how a right answer is written)
    code: str  # the solution cell
    expect: tuple = ()  # the keys of the mistakes a check may name for it
    correct: bool = False  # a right answer: every check must pass
    phrase: tuple = ()  # where given, text a failing check's message must say for it to count as named
    unsaid: tuple = ()  # text no message may say of it (a wrong fix, an accusation): saying it misleads
    unnamed: str = ""  # why no check names it yet: it must be generic
    known: str = ""  # a gap of the checks today (a wrong name, a pass, a name not reached): its test fails until fixed
    check: str = ""  # the check the author ran (as written then)
    then: str = ""  # the verdict, or the author's reading of the message, when it was written
    seen: tuple = ()  # the messages the author saw when they wrote it
    corpus: str = ""  # the file it comes from

    def __post_init__(self):
        if self.correct and (self.expect or self.unnamed):
            raise ValueError(f"{self.id}: a right answer has no expected mistake")
        if self.unnamed and self.expect:
            raise ValueError(f"{self.id}: an unnamed attempt expects no mistake")


def load_corpus(path):
    """The attempts of one file; ValueError naming the attempt for a field the schema lacks."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    names = {f.name for f in dataclasses.fields(Attempt)} - {"corpus"}
    out = []
    for i, row in enumerate(data.get("attempt", [])):
        unknown = set(row) - names
        if unknown:
            raise ValueError(f"{path}: attempt {row.get('id', i)} has unknown fields {sorted(unknown)}")
        row = dict(row)
        for key in ("expect", "seen", "unsaid"):
            row[key] = tuple(row.get(key, ()))
        phrase = row.get("phrase", ())
        row["phrase"] = (phrase,) if isinstance(phrase, str) else tuple(phrase)
        out.append(Attempt(**row, corpus=Path(path).stem))
    return out


def attempts(corpus=None):
    """Every attempt of every corpus (or of one), in file order; ids are unique."""
    out = []
    for path in sorted(CORPORA.glob("*.toml")):
        if corpus in (None, path.stem):
            out += load_corpus(path)
    ids = collections.Counter(a.id for a in out)
    twice = [i for i, n in ids.items() if n > 1]
    if twice:
        raise ValueError(f"attempt ids used twice: {twice}")
    return out


# --- the notebook an attempt runs in -------------------------------------------------

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


def exercise_key(attempt):
    """The key of the attempt's exercise (check_<key>), from the name the notebook asks for."""
    from grader.checks.exercises import EXERCISES

    keys = [key for key, ex in EXERCISES.items() if ex.name == attempt.exercise]
    if len(keys) != 1:
        raise LookupError(f"{attempt.id}: no exercise is called {attempt.exercise!r}")
    return keys[0]


def define(attempt):
    """The student's function or class, defined as in the notebook."""
    import torch

    torch.manual_seed(0)
    ns = {"__name__": "__main__", **given_classes(attempt.notebook)}
    source = PRELUDE + LEFTOVERS.get(attempt.notebook, "")
    if attempt.notebook.startswith("06"):
        source += GIVEN_HEAD
    exec(compile(source, "<notebook>", "exec"), ns)
    exec(compile(attempt.code, f"<{attempt.id}>", "exec"), ns)
    return ns[attempt.exercise]


# --- running and classifying ---------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    check: str  # the focus, "(hidden)" or "(graded)"
    finding: str  # the key of the mistake the message names, or None
    message: str


@dataclass(frozen=True)
class Result:
    attempt: Attempt
    verdict: str  # named, generic, misleading, passing; correct, refused; broken (does not define its object)
    failures: tuple = field(default=())

    def shown(self):
        return "\n".join(f"[{f.check}] {f.finding}: {f.message}" for f in self.failures)


def checks(exercise, student):
    """(label, focus, keyword arguments) of every check an attempt goes through, in order. The
    graded values check differs from the visible one only for code that uses a shortcut
    (grader.checks.shortcuts): it runs where the code uses one."""
    from grader.checks import diagnosis
    from grader.checks.calling import code_facts

    runs = [(focus, focus, {}) for focus in exercise.focuses]
    runs.append(("values (hidden)", "values", {"hidden": True, "seed": HIDDEN_SEED}))
    if diagnosis.shortcut(exercise, code_facts(exercise, student), None):
        runs.append(("values (graded)", "values", {"graded": True}))
    return runs


def classify(attempt, failures):
    if attempt.correct:
        return "refused" if failures else "correct"
    if not failures:
        return "passing"
    expect = set(attempt.expect)
    if any(f.finding and f.finding not in expect for f in failures):
        return "misleading"
    if any(text in f.message for f in failures for text in attempt.unsaid):
        return "misleading"
    if attempt.phrase:
        said = any(p in f.message for f in failures for p in attempt.phrase)
        return "named" if said else "generic"
    return "named" if any(f.finding in expect for f in failures) else "generic"


@functools.lru_cache(maxsize=None)
def run(attempt):
    """The attempt's Result: every check run in order (a fresh notebook's memory)."""
    from grader.checks.core import CheckError, run_check
    from grader.checks.exercises import EXERCISES
    from grader.checks.recall import Recall

    try:
        student = define(attempt)
    except Exception as err:  # the attempt does not define its object: nothing to check
        return Result(attempt, "broken", (Failure("define", None, repr(err)),))
    exercise = EXERCISES[exercise_key(attempt)]
    failures, recall = [], Recall()
    for label, focus, kw in checks(exercise, student):
        try:
            run_check(exercise, student, focus, quiet=True, recall=recall, **kw)
        except CheckError as err:
            failures.append(Failure(label, err.finding, str(err)))
    return Result(attempt, classify(attempt, failures), tuple(failures))


def table(results):
    """{exercise: Counter of verdicts}, in the course's order."""
    from grader.checks.exercises import EXERCISES

    order = {ex.name: i for i, ex in enumerate(EXERCISES.values())}
    rows = {}
    for r in sorted(results, key=lambda r: order.get(r.attempt.exercise, 99)):
        rows.setdefault(r.attempt.exercise, collections.Counter())[r.verdict] += 1
    return rows


def format_table(rows):
    """The named/generic/misleading/passing table per exercise, and the totals."""
    head = f"{'exercise':28} {'named':>6} {'generic':>8} {'misleading':>11} {'passing':>8}  correct passes"
    lines = [head]
    total = collections.Counter()
    for name, c in rows.items():
        total.update(c)
        right = c["correct"] + c["refused"]
        lines.append(f"{name:28} {c['named']:6} {c['generic']:8} {c['misleading']:11} {c['passing']:8}"
                     f"  {c['correct']} of {right}" + (f"  ({c['broken']} broken)" if c["broken"] else ""))
    wrong = sum(total[v] for v in WRONG)
    lines.append(f"{'all':28} {total['named']:6} {total['generic']:8} {total['misleading']:11} "
                 f"{total['passing']:8}  {total['correct']} of {total['correct'] + total['refused']}")
    lines.append(f"named {total['named']} of {wrong} wrong attempts ({100 * total['named'] / max(wrong, 1):.0f} %), "
                 f"misleading {total['misleading']}, passing {total['passing']}; right answers passing "
                 f"{total['correct']} of {total['correct'] + total['refused']}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="one file of tests/checks/attempts/ (its name without .toml)")
    parser.add_argument("--exercise", help="only this exercise (the name the notebook asks for)")
    parser.add_argument("--id", help="only this attempt")
    parser.add_argument("--verbose", action="store_true", help="every attempt's messages, named ones too")
    parser.add_argument("--json", action="store_true", help="one row per attempt, as JSON")
    args = parser.parse_args(argv)
    chosen = [a for a in attempts(args.corpus) if args.exercise in (None, a.exercise) and args.id in (None, a.id)]
    results = [run(a) for a in chosen]
    for r in results:
        if args.verbose or r.verdict not in ("named", "correct"):
            print(f"[{r.verdict}] {r.attempt.id} ({r.attempt.corpus}) expect={list(r.attempt.expect)}: {r.attempt.idea}")
            print("    " + r.shown().replace("\n", "\n    "))
    if args.json:
        print(json.dumps([{"id": r.attempt.id, "verdict": r.verdict, "expect": list(r.attempt.expect),
                           "findings": [f.finding for f in r.failures]} for r in results], indent=1))
    print(format_table(table(results)))


if __name__ == "__main__":
    os.environ.pop("GRADER_DEVICE", None)
    import torch

    torch.set_num_threads(1)
    main()
