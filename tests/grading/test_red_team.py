"""Attacks found by trying to get round the grading as a hostile student would, and honest
answers the rules must not refuse; each judged in this process exactly as grading judges it
(the scan of the source, then the checks with the kernel-side facts; the notebook's cells run
by a real IPython shell where IPython's own behaviour is the point). The pipeline's side of
them (a sandboxed kernel, the worker, the gradebook) is in tests/grading/test_hostile_class.py.

- Code the kernel runs that the cells' text does not show: a line magic's ``{...}``, which
  IPython evaluates before the magic sees its text, and ``%config``'s value, which it
  executes; IPython's input transformers, macros and user_ns; a module handed in with the
  notebook (or written by it) and imported; text run by timeit, pdb or cProfile; pickles
  loaded by torch.load or numpy.load. Each is flagged, with the student's line; where it
  binds the answer to torch's function, the check fails as a shortcut.
- Code posing as a library's (``__module__ = "torch..."``), which the kernel-side facts once
  passed over as torch's own: flagged, and the facts read it as the student's.
- The same function as a forbidden one under another name (F.softmin(-x) for softmax,
  log_softmax().exp(), nn.Softmax; flex_attention for attention): forbidden too.
- A lookup table of the visible checks' inputs and outputs (the student bundle ships
  them): a visible check that its test cell does not also run hidden gets a twin on fresh
  inputs, so the table earns nothing; every correct answer passes every twin.
- Honest: a student who first wrapped torch's function under the answer's name (to compare
  with it) and then wrote their own is judged on their own; the same order reversed, or a
  definition that a statement before it may stop, is still read."""
import random

import nbformat
import pytest
import torch

from support import synthetic
from grader.checks import diagnosis, shortcuts
from grader.checks.core import evaluate
from grader.checks.exercises import EXERCISES
from grader.checks.student_call import code_facts
from grader.grading import layout, plan
from grader.grading.execute import with_unseen_twins
from grader.grading.scan import scan

ROOT = layout.ROOT
A5, A8 = "05_scaled_attention", "08_attention_at_scale"
SDPA = "scaled_dot_product_attention"
IMPORTS = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
WRONG = f"def {SDPA}(q, k, v, mask=None):\n    return torch.zeros_like(v)\n"
HONEST = (f"def {SDPA}(q, k, v, mask=None):\n"
          "    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5\n"
          "    if mask is not None:\n        wei = wei.masked_fill(mask, float('-inf'))\n"
          "    return torch.softmax(wei, dim=-1) @ v\n")
# run out of the scan's sight: binds the answer to a class that poses as torch's and calls
# torch's fused attention
POSING = ("class _Fast:\n    __module__ = 'torch.nn.functional'\n"
          f"    def __call__(self, q, k, v, mask=None):\n"
          f"        return F.{SDPA}(q, k, v, attn_mask=None if mask is None else ~mask)\n"
          f"get_ipython().user_ns['{SDPA}'] = _Fast()\n")
HEX = POSING.encode().hex()


def notebook(*cells):
    """A notebook whose given first cell imports torch; then the student's cells, the first
    of them the answer (solution) cell."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(IMPORTS),
                nbformat.v4.new_code_cell(cells[0], metadata={"nbgrader": {
                    "solution": True, "grade": False, "locked": False, "grade_id": "answer"}})]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells[1:]]
    return nb


def kinds(found):
    return {f.kind for f in found.flags}


def forbidden(key):
    return shortcuts.listed(EXERCISES[key], None)


@pytest.fixture
def shell():
    """A real IPython shell (magics, their {...} expansion, transformers), not the kernel's
    singleton: each test gets its own namespace."""
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell()
    yield sh
    sh.cleanup()


def run(shell, *cells):
    for code in (IMPORTS, *cells):
        shell.run_cell(code, silent=True)
    return shell.user_ns


@pytest.fixture(scope="module")
def checks_05():
    source = nbformat.read(ROOT / "solutions" / A5 / f"{A5}.ipynb", as_version=4)
    return [c for cell in plan.read(source).values() for c in cell]


def graded(answer, checks, used=None):
    """The outcomes of every check, graded (fresh seeds for hidden checks), with the scan's verdict."""
    return [evaluate(EXERCISES[c.exercise], answer, c.focus, hidden=c.hidden,
                     seed=random.randrange(2**31) if c.hidden else None, device="cpu",
                     graded=True, source_uses=used) for c in checks]


# --- code the kernel runs out of the scan's sight --------------------------------------------

HIDDEN_CODE = {
    "line_magic_braces": (WRONG + f"%pwd {{exec(bytes.fromhex('{HEX}').decode())}}\n", "code_from_text"),
    "config_magic": (WRONG + f"%config InteractiveShell.autocall = exec(bytes.fromhex('{HEX}').decode()) or 0\n",
                     "code_from_text"),
    "user_ns": (WRONG + POSING, "dynamic_access"),
    "input_transformer": (WRONG + "import base64\n"
                          f"_extra = base64.b16decode('{POSING.encode().hex().upper()}').decode()\n"
                          "get_ipython().input_transformers_post.append(lambda lines: lines + [_extra])\n",
                          "code_from_text"),
}


@pytest.mark.parametrize("route", sorted(HIDDEN_CODE))
def test_code_run_out_of_the_scans_sight_is_flagged_and_scores_nothing(route, shell, checks_05):
    """Before: a wrong answer, replaced at run time by torch's attention posing as torch's
    own object, scored 10/10 with no flag. Now the route is flagged with the student's line,
    and the kernel-side facts read the posing class as the student's: every check fails as a
    shortcut."""
    code, kind = HIDDEN_CODE[route]
    found = scan(notebook(code, "x = 1"))  # (a cell after it, which a transformer rewrites)
    assert kind in kinds(found), [f.text() for f in found.flags]
    assert all(f.quote and f.cell == 1 for f in found.flags if f.kind == kind)
    answer = run(shell, code, "x = 1")[SDPA]
    assert type(answer).__name__ == "_Fast"  # the hidden code ran: the answer is torch's attention
    outcomes = graded(answer, checks_05, found.uses(forbidden(SDPA), SDPA))
    assert all(not o.passed and o.mistake == "shortcut" for o in outcomes), [o.message for o in outcomes]
    assert all(f"F.{SDPA}" in o.message for o in outcomes)


def test_the_python_in_a_magics_argument_is_read_as_code():
    """A name bound in a magic's {...} (here by :=) is a definition the answer's rule follows."""
    found = scan(notebook(f"%pwd {{(attend := F.{SDPA}) and '.'}}\n"
                          f"def {SDPA}(q, k, v, mask=None):\n    return attend(q, k, v)\n"))
    assert found.uses(forbidden(SDPA), SDPA) == f"F.{SDPA}"
    assert "code_from_text" in kinds(found)


@pytest.mark.parametrize("code,kind", [
    ("import course_utils  # a .py file handed in beside the notebook\n", "code_from_text"),
    ("open('h.py', 'w').write(text)\nimport h\n", "code_from_text"),
    ("from . import helpers\n", "code_from_text"),
    ("%load_ext my_extension\n", "code_from_text"),
    ("import timeit\ntimeit.timeit(text, number=1, globals=g)\n", "code_from_text"),
    ("import pdb\npdb.run(text)\n", "code_from_text"),
    ("import cProfile\ncProfile.run(text)\n", "code_from_text"),
    ("get_ipython().define_macro('m', text)\n", "code_from_text"),
    ("ip = get_ipython()\nip.events.register('pre_run_cell', f)\n", "code_from_text"),
    ("ip = get_ipython()\nip.ast_transformers.append(t)\n", "code_from_text"),
    ("%macro m 1-2\n", "code_from_text"),
    ("torch.load(buf, weights_only=0)\n", "serialisation"),
    ("import numpy as np\nnp.load(f, allow_pickle=True)\n", "serialisation"),
    ("import os\nos.environ['TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'] = '1'\n", "serialisation"),
    ("import joblib\n", "serialisation"),
    ("m = torch.jit.load(buf)\n", "torch_internals"),
    ("import inspect\nfns = dict(inspect.getmembers(F))\n", "dynamic_access"),
    ("locals()['attend'] = F.relu\n", "dynamic_access"),
    ("locals().update(attend=F.relu)\n", "dynamic_access"),
    ("getattr(get_ipython(), name)\n", "dynamic_access"),
    ("import sys\nsys.meta_path.insert(0, finder)\n", "import_machinery"),
    ("class Fast:\n    __module__ = 'torch.nn'\n", "code_object"),
    ("f = lambda q: q\nf.__module__ = 'torch'\n", "code_object"),
])
def test_ways_to_run_or_bind_code_out_of_sight_are_flagged(code, kind):
    assert kind in kinds(scan(notebook(code))), [f.text() for f in scan(notebook(code)).flags]


@pytest.mark.parametrize("code", [
    "%matplotlib inline\n", "%load_ext autoreload\n%autoreload 2\n", "%timeit -n 3 sum(range({n}))\n",
    "n = 5\n%pwd {n}\n", "import timeit\ntimeit.timeit(lambda: sum(range(10)), number=3)\n",
    "import inspect\nprint(inspect.signature(sum))\n", "from IPython.display import display, HTML\n",
    "x = 1\nprint(sorted(locals())[:3])\n",
    "torch.load('weights.pt', weights_only=True)\n", "import numpy as np\nnp.load('a.npy')\n",
])
def test_ordinary_magics_and_imports_are_not_flagged(code):
    assert scan(notebook(code)).flags == []


@pytest.mark.parametrize("code", [
    # a global bound in a class's body, and by `except ... as`
    f"class _K:\n    global attend\n    attend = F.{SDPA}\n"
    f"def {SDPA}(q, k, v, mask=None):\n    return attend(q, k, v)\n",
    f"try:\n    raise ValueError(F.{SDPA})\nexcept ValueError as attend:\n    pass\n"
    f"def {SDPA}(q, k, v, mask=None):\n    return attend.args[0](q, k, v)\n",
])
def test_names_bound_in_class_bodies_and_handlers_are_followed(code):
    assert scan(notebook(code)).uses(forbidden(SDPA), SDPA) == f"F.{SDPA}"


def test_a_module_handed_in_with_the_notebook_is_flagged_and_its_binding_fails(tmp_path, shell, checks_05,
                                                                               monkeypatch):
    """course_utils.py beside the notebook (the exchange route hands in the whole folder, and
    the sandbox's working folder is a copy of it): importing it runs its code."""
    (tmp_path / "course_utils.py").write_text("import torch.nn.functional as F\n" + POSING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "course_utils", raising=False)
    code = WRONG + "import course_utils  # my helpers\n"
    found = scan(notebook(code))
    assert any("course_utils, which is not installed here" in f.detail for f in found.flags)
    answer = run(shell, code)[SDPA]
    outcomes = graded(answer, checks_05, found.uses(forbidden(SDPA), SDPA))
    assert all(not o.passed and o.mistake == "shortcut" for o in outcomes)


# --- posing as a library's code ---------------------------------------------------------------

def test_the_kernel_side_facts_read_a_class_that_poses_as_torchs_as_the_students():
    space = {"__name__": "__main__", "get_ipython": lambda: None}
    exec(compile(IMPORTS + POSING.replace("get_ipython().user_ns", "globals()"), "<cell>", "exec"), space)
    facts = code_facts(space[SDPA])
    assert diagnosis.shortcut(EXERCISES[SDPA], facts, None) == f"F.{SDPA}", facts
    # torch's own classes and functions stay torch's: a partial of torch.softmax is described, not read
    import functools

    assert code_facts(functools.partial(torch.softmax, dim=-1))["helpers"] == []
    linear = code_facts(torch.nn.Linear(2, 3))
    assert linear["helpers"] == [] and "forward" not in linear["attributes"]


def test_a_helper_posing_as_torchs_function_is_read():
    space = {"__name__": "__main__"}
    exec(compile(IMPORTS + f"def helper(q, k, v):\n    return F.{SDPA}(q, k, v)\n"
                           "helper.__module__ = 'torch.nn.functional'\n"
                           f"def {SDPA}(q, k, v, mask=None):\n    return helper(q, k, v)\n", "<cell>", "exec"), space)
    assert diagnosis.shortcut(EXERCISES[SDPA], code_facts(space[SDPA]), None) == f"F.{SDPA}"


# --- the same function under another name --------------------------------------------------

@pytest.fixture(scope="module")
def checks_08_softmax():
    source = nbformat.read(ROOT / "solutions" / A8 / f"{A8}.ipynb", as_version=4)
    return [c for cell in plan.read(source).values() for c in cell if c.exercise == "online_softmax"]


@pytest.mark.parametrize("body,name", [
    ("F.softmin(-scores, dim=-1)", "F.softmin"), ("F.log_softmax(scores, dim=-1).exp()", "F.log_softmax"),
    ("nn.Softmax(dim=-1)(scores)", "nn.Softmax"), ("scores.log_softmax(-1).exp()", "F.log_softmax"),
])
def test_softmax_under_another_name_is_a_shortcut_in_online_softmax(body, name, checks_08_softmax):
    """Before: 8 of online_softmax's 10 points, unflagged (only the one-pass watch saw it)."""
    code = f"def online_softmax(scores):\n    return {body}\n"
    used = scan(notebook(code)).uses(forbidden("online_softmax"), "online_softmax")
    assert used == name
    space = {"__name__": "__main__"}
    exec(compile(IMPORTS + code, "<cell>", "exec"), space)
    outcomes = graded(space["online_softmax"], checks_08_softmax, used)
    assert all(not o.passed and o.mistake == "shortcut" for o in outcomes)


def test_flex_attention_is_a_shortcut_where_attention_is_the_exercise():
    code = ("from torch.nn.attention.flex_attention import flex_attention\n"
            f"def {SDPA}(q, k, v, mask=None):\n    return flex_attention(q[:, None], k[:, None], v[:, None])[:, 0]\n")
    assert scan(notebook(code)).uses(forbidden(SDPA), SDPA) == "torch.nn.attention.flex_attention.flex_attention"


# --- a lookup table of the visible checks ---------------------------------------------------

def _lookup_table(exercise_key, checks, reference):
    """{input bytes: output} of every call the visible checks make (what the bundle ships)."""
    table = {}

    def record(*args):
        out = reference(*args)
        table[_key(args)] = out.detach().clone()
        return out
    record.__name__ = EXERCISES[exercise_key].name
    for c in checks:
        if not c.hidden:
            evaluate(EXERCISES[c.exercise], record, c.focus, device="cpu", graded=False)
    return table


def _key(args):
    return b"".join(a.detach().contiguous().numpy().tobytes() + str(tuple(a.shape)).encode()
                    for a in args if isinstance(a, torch.Tensor))


@pytest.mark.parametrize("assignment,key", [(A8, "online_softmax"), ("03_masked_softmax", "masked_softmax"),
                                            ("03_masked_softmax", "causal_weights")])
def test_a_lookup_table_of_the_visible_checks_earns_nothing(assignment, key):
    """Before: 4 of online_softmax's 10 points and 5 of 03's 20 (rows sum to one, masked
    positions get zero, ...), with no softmax at all. With a twin on fresh inputs for each
    visible-only check, no test cell passes."""
    from grader.answers import correct

    source = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    cells = {gid: [c for c in checks if c.exercise == key] for gid, checks in plan.read(source).items()}
    cells = {gid: checks for gid, checks in cells.items() if checks}
    table = _lookup_table(key, [c for checks in cells.values() for c in checks], getattr(correct, key))

    def lookup(*args):
        found = table.get(_key(args))
        return found.clone() if found is not None else torch.full_like(args[0], 1.0 / args[0].shape[-1])
    lookup.__name__ = EXERCISES[key].name
    before = {gid: all(o.passed for o in graded(lookup, checks)) for gid, checks in cells.items()}
    assert any(before.values())  # the table alone passes some visible-only cells ...
    after = {gid: all(o.passed for o in graded(lookup, with_unseen_twins(checks))) for gid, checks in cells.items()}
    assert not any(after.values()), after  # ... and none once each has a twin on fresh inputs


def test_every_correct_answer_passes_every_twin():
    """The twins judge honest answers as the hidden checks do: each visible-only check of
    every notebook, on fresh inputs, passes the course's correct answers."""
    from grader.answers import correct

    twins = 0
    for source_path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        source = nbformat.read(source_path, as_version=4)
        for checks in plan.read(source).values():
            for c in [c for c in with_unseen_twins(checks) if c not in checks]:
                outcome = graded(getattr(correct, c.student), [c])[0]
                assert outcome.passed, (source_path.stem, c, outcome.message)
                twins += 1
    assert twins >= 40


# --- honest: a name defined again ------------------------------------------------------------

COMPARE_FIRST = (f"# first, torch's own, to compare mine with\ndef {SDPA}(q, k, v, mask=None):\n"
                 f"    return F.{SDPA}(q, k, v, attn_mask=None if mask is None else ~mask)\n"
                 f"expected = {SDPA}(torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4))\n")


def test_an_answer_written_after_trying_torchs_own_is_judged_on_its_own(checks_05):
    """Before: 0/10 for an honest student (the scan read every definition of the name)."""
    nb = notebook(HONEST)
    nb.cells.insert(1, nbformat.v4.new_code_cell(COMPARE_FIRST))  # before the answer cell
    found = scan(nb)
    assert found.flags == []
    assert found.uses(forbidden(SDPA), SDPA, before=3) is None
    space = {"__name__": "__main__"}
    exec(compile(IMPORTS + COMPARE_FIRST + HONEST, "<cells>", "exec"), space)
    assert all(o.passed for o in graded(space[SDPA], checks_05, found.uses(forbidden(SDPA), SDPA, before=3)))


@pytest.mark.parametrize("cells,before", [
    ([HONEST, COMPARE_FIRST], 3),  # torch's own defined last: it is the answer
    ([COMPARE_FIRST, "1 / 0\n" + HONEST], 3),  # the own definition never runs
    ([COMPARE_FIRST, "@staticmethod\n" + HONEST], 3),  # a decorator may return anything
    ([COMPARE_FIRST, f"def setup():\n    global {SDPA}\n    {SDPA} = F.{SDPA}\n", HONEST, "setup()\n"], 5),
])
def test_a_definition_that_may_not_replace_torchs_is_still_read(cells, before):
    assert scan(notebook(*cells)).uses(forbidden(SDPA), SDPA, before=before) == f"F.{SDPA}"


def test_only_the_cells_before_a_test_cell_count_for_its_checks():
    nb = notebook(HONEST, COMPARE_FIRST)  # torch's own after the test cell (index 2)
    found = scan(nb)
    assert found.uses(forbidden(SDPA), SDPA, before=2) is None
    assert found.uses(forbidden(SDPA), SDPA) == f"F.{SDPA}"


# --- what the instructor's browser shows ---------------------------------------------------

@pytest.mark.parametrize("math", [
    r"$$\bbox[#dff0d8,15px,border:1px solid #d6e9c6]{\text{Score: 20 / 20 - Flagged: none}}$$",
    r"$\style{background-color:#dff0d8;padding:15px}{\text{Score: 20 / 20}}$",
    r"$\colorbox{lightgreen}{Score: 20 / 20}$", r"$\href{https://example.org}{\text{see my plot}}$",
])
def test_math_cannot_dress_a_submission_as_the_graders_verdict(math):
    """The formgrader and the feedback pages typeset math with MathJax (its Safe extension
    still allows \\bbox, \\style's colours, borders and padding, \\colorbox and \\href): a
    student's Markdown, LaTeX or HTML output could draw the green "Score: 20 / 20" box that
    the sanitiser keeps class and style attributes from drawing. Such macros are shown as
    text; ordinary math stays as it is."""
    from grader.grading.sanitize import NoActiveContent

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(math + "\n\nand $\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}$"),
        nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output(
            "display_data", data={"text/latex": math, "text/html": f"<p>{math}</p>", "text/plain": "x"})])])
    nb, _ = NoActiveContent().preprocess(nb, {})
    shown = [nb.cells[0].source, *nb.cells[1].outputs[0].data.values()]
    for name in ("bbox", "style", "colorbox", "href"):
        assert all(f"\\{name}" not in text for text in shown), shown
    assert "\\frac{e^{x_i}}{\\sum_j e^{x_j}}" in nb.cells[0].source and "\\mathrm{softmax}" in nb.cells[0].source


def test_an_answer_timed_with_a_cell_magic_still_replaces_the_one_before():
    nb = notebook("%%time\n" + HONEST)
    nb.cells.insert(1, nbformat.v4.new_code_cell(COMPARE_FIRST))
    assert scan(nb).uses(forbidden(SDPA), SDPA, before=3) is None
