"""An honest student graded in the same run as hostile classmates (two workers of the
embedded Dask cluster, the `make autograde` path), one class, one quiet run to compare
with. Classmates that attack the trusted side: one prints a 300 MB line, one sends
replies that unpack into 30 million nested lists, one ignores the interrupt of a call
that runs past its time, one hands in a notebook of 20,000 cells and one of 5 MB of nested
markup, one reaches the forbidden function through a decorator; and one replaces a wrong answer by torch's
attention in code hidden in a magic's argument; and one honest but odd notebook (`from
torch import *` and globals named compile, exec, open, len; torch's own attention first
defined under the answer's name, to compare with; a cell id that breaks the format; HTML dressed as the grader's verdict; markup nested 20,000 deep; a cell
Python's parser gives up on; a 20 MB message sent past the kernel's own bounds).
Classmates that attack the machine (where sandboxes have cgroups): 120 CPU-bound
processes, memory spread over many processes, a fork bomb; they spend their own sandbox's
CPU, memory and process limits, never the honest student's budget. The honest score and
verdicts equal a quiet run's; each hostile submission is graded with its broken checks at 0
and the rest kept, or needs attention with a reason."""
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from support.classes import CLASS_ASSIGNMENT as A, CLASS_CALL_TIMEOUT
from support.gradebook import db_scores
from support import synthetic
from grader.grading.autograde import Grading
from grader.grading.status import Status
from grader.isolation import cgroups, isolation_available

pytestmark = pytest.mark.xdist_group("hostile")

available, why = isolation_available()
support = cgroups.support()
CONTAINED = available and bool(support.version)
BUDGET = 10  # CPU seconds per notebook where counted: the honest notebook needs about 1.5 (the
# 300 MB line about 0.3 more: the kernel cuts it before it is sent, see
# scripts/bench_huge_output.py), and the hogs spend all of theirs (a larger budget only costs
# the suite CPU time)
WALL_FACTOR = 36  # its wall-clock ceiling, 360 s: room for a 300 MB line on a loaded machine

HUGE_LINE = 'print("x" * 300_000_000)\n'  # then the correct answer
REPLY_BOMB = '''import zipfile
def _bomb(obj, f, *a, **k):  # every reply: 30 million nested lists, about 60 KB compressed
    n = 30_000_000
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\\x80\\x02" + b"]" * n + b"a" * (n - 1) + b".")
torch.save = _bomb
'''
IGNORES_INTERRUPT = '''import signal
def scaled_dot_product_attention(q, k, v, mask=None):
    """Right with a mask; without one, a loop that ignores the interrupt."""
    if mask is None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            pass
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''
# A wrong answer, replaced at run time by code in a line magic's {...} (which IPython evaluates
# before the magic sees its text): torch's attention, in a class that poses as torch's own
HIDDEN_MAGIC = synthetic.hidden_in_a_magic(
    "class _Fast:\n    __module__ = 'torch.nn.functional'\n"
    "    def __call__(self, q, k, v, mask=None):\n"
    "        return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)\n"
    "get_ipython().user_ns['scaled_dot_product_attention'] = _Fast()\n")
HOSTILE = {"huge_line": lambda src: HUGE_LINE + src,
           "reply_bomb": lambda src: REPLY_BOMB + src,
           "ignores_interrupt": lambda src: IGNORES_INTERRUPT,
           "route_decorator": lambda src: synthetic.ROUTES["decorator_returns_it"]["code"],
           "hidden_in_a_magic": lambda src: HIDDEN_MAGIC}
FAKE_ALERT = '<div class="alert alert-success" style="font-size:2em">Score: 20 / 20 \u2014 Flagged: none</div>'
NESTED = "<div>" * 20_000 + "x" + "</div>" * 20_000  # 220 KB a cell
ODD_CELLS = [  # after the first code cell of an honest notebook (synthetic's import_cell answer)
    "from torch import *\ncompile = exec = open = len = lambda *a, **k: None",
    f"from IPython.display import HTML, display\ndisplay(HTML({FAKE_ALERT!r}))",
    "x = " + " + ".join(["'a'"] * 3000),  # Python's ast gives up (RecursionError)
    "k = get_ipython().kernel\nk.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'x' * 20_000_000},"
    " parent=k.get_parent())",
    # torch's own attention under the answer's name, to compare with: the answer cell after it replaces it
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)\n"
    "expected = scaled_dot_product_attention(torch.ones(2, 3, 4), torch.ones(2, 3, 4), torch.ones(2, 3, 4))",
]
BAD_ID = 'zz"><img src=x onerror=alert(1)>'


def _odd_but_honest(root):
    nb = synthetic.HONEST_VARIANTS["import_cell"](root, A, A)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells[first + 1:first + 1] = [nbformat.v4.new_code_cell(code) for code in ODD_CELLS]
    nb.cells += [nbformat.v4.new_markdown_cell(FAKE_ALERT)] + [nbformat.v4.new_markdown_cell(NESTED) for _ in range(7)]
    nb.cells[first]["id"] = BAD_ID
    return nb


def _too_large(root, kind):
    nb = synthetic.answered(root, A, A)
    if kind == "cells":
        nb.cells += [nbformat.v4.new_code_cell("pass") for _ in range(20_000)]
    else:
        nb.cells += [nbformat.v4.new_markdown_cell(NESTED) for _ in range(24)]  # 5.3 MB
    return nb


ODD = {"odd_but_honest": _odd_but_honest, "twenty_thousand_cells": lambda root: _too_large(root, "cells"),
       "nested_markup_5mb": lambda root: _too_large(root, "markup")}


def _grading(root, jobs):
    return Grading(root, jobs=jobs, budget=BUDGET, call_timeout=CLASS_CALL_TIMEOUT).run(progress=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    quiet = synthetic.make_course(tmp / "quiet", gradebook=True)
    with open(quiet / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.GradingExecute.wall_factor = {WALL_FACTOR}\n")
    synthetic.make_submission(quiet, "honest", A, "correct")
    loud = Path(shutil.copytree(quiet, tmp / "loud"))
    for student, edit in HOSTILE.items():
        folder = loud / "submitted" / student / A
        folder.mkdir(parents=True)
        nb = synthetic.answered(loud, A, A, edit=lambda gid, src, edit=edit: edit(src))
        nbformat.write(nb, folder / f"{A}.ipynb")
    for student, build in ODD.items():
        folder = loud / "submitted" / student / A
        folder.mkdir(parents=True)
        (folder / f"{A}.ipynb").write_text(json.dumps(build(loud)))  # (as handed in: not validated)
    if CONTAINED:  # without a cgroup per sandbox these would take the machine
        for name in synthetic.RESOURCE_HOGS:
            synthetic.make_hog(loud, name, name)
    loud_summary = _grading(loud, jobs=2)
    quiet_summary = _grading(quiet, jobs=1)
    return quiet, quiet_summary, loud, loud_summary


def _passed(root, student):
    outcomes = Status(root).get(student, A)["notebooks"][A]["outcomes"]
    return {cell: [o["passed"] for o in outs] for cell, outs in outcomes.items()}


def _verdicts(root, student):
    """Each check's label (without a hidden check's seed) and verdict."""
    outcomes = Status(root).get(student, A)["notebooks"][A]["outcomes"]
    return {cell: [(o["label"].split(" (hidden")[0], o["passed"]) for o in outs]
            for cell, outs in outcomes.items()}


def _messages(root, student):
    outcomes = Status(root).get(student, A)["notebooks"][A]["outcomes"]
    return {cell: [o["message"] for o in outs if not o["passed"]] for cell, outs in outcomes.items()}


def test_the_honest_score_equals_a_quiet_runs(runs):
    quiet, quiet_summary, loud, loud_summary = runs
    hostile = len(HOSTILE) + len(ODD) + (len(synthetic.RESOURCE_HOGS) if CONTAINED else 0)
    assert quiet_summary["graded"] == 1, quiet_summary
    assert loud_summary["graded"] + loud_summary.get("needs_attention", 0) == 1 + hostile, loud_summary
    for student in ["honest", *HOSTILE, "odd_but_honest"]:
        entry = Status(loud).get(student, A)
        assert entry["status"] == "graded", (student, entry.get("reason"))
    assert db_scores(loud)["honest"] == db_scores(quiet)["honest"] == 10.0
    assert _passed(loud, "honest") == _passed(quiet, "honest")
    assert _verdicts(loud, "honest") == _verdicts(quiet, "honest")


def test_a_300_mb_line_is_cut_and_the_answer_still_graded(runs):
    _, _, loud, _ = runs
    assert db_scores(loud)["huge_line"] == 10.0
    graded = loud / "autograded" / "huge_line" / A / f"{A}.ipynb"
    assert graded.stat().st_size < 20 * 2**20
    outputs = json.loads(graded.read_text())["cells"]
    assert any("output cut: 286.1 MiB of output" in "".join(o.get("text", ""))
               for cell in outputs for o in cell.get("outputs", []))


def test_replies_that_unpack_into_millions_of_objects_fail_unread(runs):
    _, _, loud, _ = runs
    assert db_scores(loud)["reply_bomb"] == 0.0
    messages = [m for ms in _messages(loud, "reply_bomb").values() for m in ms]
    assert messages and all("structure is larger than" in m for m in messages), messages


def test_a_call_that_ignores_its_interrupt_costs_its_checks_only(runs):
    _, _, loud, _ = runs
    passed = _passed(loud, "ignores_interrupt")
    assert all(passed["test_sdpa_output"]) and all(passed["test_sdpa_causal"])  # (each with a twin on fresh inputs)
    assert db_scores(loud)["ignores_interrupt"] == 2.0  # the two checks before it keep their points
    failed = _messages(loud, "ignores_interrupt")
    messages = [m for ms in failed.values() for m in ms]
    assert len(messages) == 3 and all("timed out" in m and "Likely mistake" not in m for m in messages)


@pytest.mark.skipif(not available, reason=f"no isolation here: {why}")
@pytest.mark.skipif(not support.version, reason=support.reason)
def test_classmates_that_take_the_machine_are_graded_or_named(runs):
    """Each resource hog is graded or needs attention with a reason (the honest student,
    graded beside them, is compared with the quiet run above)."""
    _, _, loud, _ = runs
    status = Status(loud)
    for name in synthetic.RESOURCE_HOGS:
        entry = status.get(name, A)
        assert entry["status"] in ("graded", "needs_attention"), (name, entry)
        if entry["status"] == "needs_attention":
            assert entry.get("reason"), name


def _graded_notebook(root, student):
    return json.loads((root / "autograded" / student / A / f"{A}.ipynb").read_text())


def _flags(root, student):
    return Status(root).get(student, A)["notebooks"][A]["flags"]


def test_notebooks_over_the_bounds_need_attention_with_the_reason(runs):
    """20,000 cells, and 5.3 MB of nested markup: settled before anything reads or runs them."""
    _, _, loud, _ = runs
    status = Status(loud)
    cells, markup = status.get("twenty_thousand_cells", A), status.get("nested_markup_5mb", A)
    assert cells["status"] == markup["status"] == "needs_attention"
    assert "it has 20,0" in cells["reason"] and "a notebook may have at most 500" in cells["reason"]
    assert "a notebook may hold at most 2.0 MiB" in markup["reason"]
    assert cells["elapsed"] < 60 and markup["elapsed"] < 60  # (not a speed test: minutes before)


def test_an_odd_but_honest_notebook_is_graded_in_full(runs):
    """`from torch import *` and globals named compile, exec, open, len; a cell id that breaks
    the format (repaired, flagged); a cell Python's parser gives up on (flagged, its rules
    left to the kernel); markup nested 20,000 deep (shown as text); HTML dressed as the
    grader's verdict (no class, no style); a 20 MB message sent past the kernel's bounds
    (refused unread, the notebook says so)."""
    _, _, loud, _ = runs
    assert db_scores(loud)["odd_but_honest"] == 10.0
    flags = _flags(loud, "odd_but_honest")
    assert sorted({f["kind"] for f in flags}) == ["cell_id", "unreadable"], flags
    cells = _graded_notebook(loud, "odd_but_honest")["cells"]
    text = json.dumps(cells)
    assert BAD_ID not in text and "Score: 20 / 20" in text
    assert not re.search(r"(class|style)=", "".join(
        "".join(o.get("data", {}).get("text/html", "")) for c in cells for o in c.get("outputs", [])))
    assert "output dropped unread" in text
    nested = [c for c in cells if c["cell_type"] == "markdown" and "&lt;div&gt;" in "".join(c["source"])]
    assert len(nested) == 7 and all("<div>" not in "".join(c["source"]) for c in nested)


def test_code_hidden_in_a_magics_argument_scores_nothing_and_is_shown(runs):
    """Before: 10/10 with no flag (the scan did not read a magic's argument, and the kernel-side
    facts took the class for torch's)."""
    _, _, loud, _ = runs
    assert db_scores(loud)["hidden_in_a_magic"] == 0.0
    messages = [m for ms in _messages(loud, "hidden_in_a_magic").values() for m in ms]
    assert messages and all("uses F.scaled_dot_product_attention" in m for m in messages), messages
    texts = [f"{f['kind']} {f['detail']}: {f['quote']}" for f in _flags(loud, "hidden_in_a_magic")]
    assert any(t.startswith("code_from_text the %pwd magic runs the Python in its argument") for t in texts), texts


def test_a_route_around_the_rules_scores_nothing_and_is_shown_with_the_students_line(runs):
    _, _, loud, _ = runs
    assert db_scores(loud)["route_decorator"] == 0.0
    messages = [m for ms in _messages(loud, "route_decorator").values() for m in ms]
    assert messages and all("uses F.scaled_dot_product_attention" in m for m in messages), messages
    texts = [f"{f['detail']}: {f['quote']}" for f in _flags(loud, "route_decorator")]
    assert any("decorated by _faster" in t and t.endswith("@_faster") for t in texts), texts
    assert any("getattr with a name computed at run time" in t and "getattr(F, fn.__name__)" in t for t in texts)
