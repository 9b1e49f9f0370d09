"""The shortcut battery: what the student's kernel could hide, read from the source by the
grading process (grader.grading.scan). Every forbidden function of every exercise, reached
directly, through getattr with a built name, through importlib, or under torch's disabled
dispatch modes, fails its rule or is flagged; honest answers are neither."""
import nbformat
import pytest

from support import synthetic
from grader.checks.exercises import EXERCISES
from grader.grading import layout
from grader.grading.scan import constant_text, scan

DEFAULTS = {key: list(ex.shortcuts) for key, ex in EXERCISES.items() if ex.shortcuts}

ROOT = layout.ROOT
IMPORTS = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
CASES = [(key, full) for key, names in sorted(DEFAULTS.items()) for full in names]


def notebook(answer):
    """A notebook whose given first cell imports torch, and one answer cell."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(IMPORTS),
                nbformat.v4.new_code_cell(answer, metadata={"nbgrader": {
                    "solution": True, "grade": False, "locked": False, "grade_id": "answer"}})]
    return nb


def answer(key, body):
    """The exercise's object, doing `body` (one expression that uses `shortcut`)."""
    name = EXERCISES[key].name
    if EXERCISES[key].module:
        return (f"class {name}(nn.Module):\n    def forward(self, *args):\n"
                f"        shortcut = {body}\n        return shortcut\n")
    return f"def {name}(*args):\n    shortcut = {body}\n    return shortcut\n"


def split(full):
    owner, last = full.rsplit(".", 1)
    module = {"F": "torch.nn.functional", "nn": "torch.nn", "torch": "torch"}.get(owner, owner)
    return owner, module, last


@pytest.mark.parametrize("key,full", CASES)
def test_a_forbidden_function_reached_directly_fails_its_rule(key, full):
    found = scan(notebook(answer(key, f"{full}")))
    assert found.uses(DEFAULTS[key], EXERCISES[key].name) == full


@pytest.mark.parametrize("key,full", CASES)
def test_through_getattr_with_a_built_name_fails_and_is_flagged(key, full):
    owner, _, last = split(full)
    half = len(last) // 2
    found = scan(notebook(answer(key, f"getattr({owner}, {last[:half]!r} + {last[half:]!r})")))
    assert found.uses(DEFAULTS[key], EXERCISES[key].name) == full
    assert [f.kind for f in found.flags] == ["dynamic_access"]


@pytest.mark.parametrize("key,full", CASES)
def test_through_importlib_fails_and_is_flagged(key, full):
    _, module, last = split(full)
    code = (f"import importlib\nm = importlib.import_module({module!r})\nname = ''.join({list(last)!r})\n"
            + answer(key, "getattr(m, name)"))
    found = scan(notebook(code))  # (torch.softmax or F.softmax: the same function)
    assert found.uses(DEFAULTS[key], EXERCISES[key].name).split(".")[-1] == last
    assert {"import_machinery", "dynamic_access"} <= {f.kind for f in found.flags}


@pytest.mark.parametrize("key,full", CASES)
def test_under_disabled_dispatch_modes_fails_and_is_flagged(key, full):
    code = ("from torch.utils._python_dispatch import _disable_current_modes\n"
            + answer(key, f"_disable_current_modes() and {full}"))
    found = scan(notebook(code))
    assert found.uses(DEFAULTS[key], EXERCISES[key].name) == full
    assert "dispatch" in {f.kind for f in found.flags}


def test_a_name_computed_at_run_time_is_flagged():
    code = ("import base64\nname = base64.b64decode('c2NhbGVkX2RvdF9wcm9kdWN0X2F0dGVudGlvbg==').decode()\n"
            + answer("scaled_dot_product_attention", "getattr(F, name)"))
    found = scan(notebook(code))
    assert "dynamic_access" in {f.kind for f in found.flags}  # it cannot be read: flagged
    assert any("base64" in f.detail for f in found.flags)  # and the answer reaches a module it needs not


@pytest.mark.parametrize("code,kind", [
    ("import grader\ngrader.core.run_check = lambda *a, **k: None", "course_module"),
    ("import sys\nsys.modules['torch'].softmax = None", "import_machinery"),
    ("exec('x = 1')", "code_from_text"),
    ("torch.overrides.TorchFunctionMode", "dispatch"),
    ("import sys\nsys.settrace(None)", "dispatch"),
    ("vars(torch)['softmax']", "dynamic_access"),
    ("torch.__dict__['softmax']", "dynamic_access"),
    ("%time x = getattr(torch, input())", "dynamic_access"),  # after IPython's transforms
    ("%%writefile helper.py\nimport torch\nsoftmax = torch.softmax", "code_from_text"),
    ("!python helper.py", "code_from_text"),
    ("%run helper.py", "code_from_text"),
    ("import gc\ngc.get_referrers(torch.softmax)", "dispatch"),
])

def test_ways_of_hiding_are_flagged(code, kind):
    assert kind in {f.kind for f in scan(notebook(code)).flags}

def test_collecting_garbage_is_ordinary():
    assert scan(notebook("import gc\ngc.collect()")).flags == []


def test_code_inside_a_timing_magic_is_read():
    code = "%%time\n" + answer("scaled_dot_product_attention", "F.scaled_dot_product_attention")
    found = scan(notebook(code))
    assert found.uses(DEFAULTS["scaled_dot_product_attention"], "scaled_dot_product_attention") \
        == "F.scaled_dot_product_attention"


@pytest.mark.parametrize("variant", sorted(synthetic.HONEST))
def test_honest_answers_are_neither_refused_nor_flagged(variant):
    nb = synthetic.HONEST[variant](ROOT, "05_scaled_attention", "05_scaled_attention")
    source = nbformat.read(ROOT / "solutions" / "05_scaled_attention" / "05_scaled_attention.ipynb", as_version=4)
    found = scan(nb, source)
    assert found.flags == []
    assert found.uses(DEFAULTS["scaled_dot_product_attention"], "scaled_dot_product_attention") is None


@pytest.mark.parametrize("source", sorted((ROOT / "solutions").glob("*/*.ipynb")), ids=lambda p: p.parent.name)
def test_the_course_answers_are_neither_refused_nor_flagged(source):
    course = nbformat.read(source, as_version=4)
    nb = synthetic.answered(ROOT, source.parent.name, source.stem)
    found = scan(nb, course)
    assert found.flags == []
    for key, names in DEFAULTS.items():
        assert found.uses(names, EXERCISES[key].name) is None, key


@pytest.mark.parametrize("expr,text", [("'a' + 'b'", "ab"), ("f'{\"sc\"}aled'", "scaled"),
                                       ("''.join(['x', 'y'])", "xy"), ("'ab'[::-1]", "ba"),
                                       ("'A'.lower() * 2", "aa"), ("name + 'x'", None)])
def test_strings_built_from_literals_are_read(expr, text):
    import ast
    assert constant_text(ast.parse(expr, mode="eval").body) == text


# --- found by trying to get round the scan ----------------------------------------------

@pytest.mark.parametrize("key,code", [
    ("scaled_dot_product_attention",  # a method added to torch's Tensor, called on q
     "torch.Tensor.attend = lambda q, k, v, m=None: F.scaled_dot_product_attention(q, k, v)\n"
     "def scaled_dot_product_attention(q, k, v, mask=None):\n    return q.attend(k, v, mask)\n"),
    ("bag_of_words_loop",  # the in-place form of a forbidden function
     "def bag_of_words_loop(x):\n    T = x.shape[1]\n"
     "    return x.clone().cumsum_(1) / torch.arange(1, T + 1).view(1, T, 1)\n"),
    ("scaled_dot_product_attention",  # one of torch's private variants
     "def scaled_dot_product_attention(q, k, v, mask=None):\n"
     "    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    ("batched_multi_head_attention",  # inheriting, through a name bound by :=
     "(Base := nn.MultiheadAttention)\nclass BatchedMultiHeadAttention(Base):\n    pass\n"),
    ("scaled_dot_product_attention",  # a name bound by :=
     "(attend := F.scaled_dot_product_attention)\n"
     "def scaled_dot_product_attention(q, k, v, mask=None):\n    return attend(q, k, v)\n"),
    ("scaled_dot_product_attention",  # a name bound by a match pattern
     "match F.scaled_dot_product_attention:\n    case attend:\n        pass\n"
     "def scaled_dot_product_attention(q, k, v, mask=None):\n    return attend(q, k, v)\n"),
    ("scaled_dot_product_attention",  # a global set inside a function run at the top level
     "def setup():\n    global attend\n    attend = F.scaled_dot_product_attention\nsetup()\n"
     "def scaled_dot_product_attention(q, k, v, mask=None):\n    return attend(q, k, v)\n"),
])
def test_shortcuts_reached_in_roundabout_ways_fail(key, code):
    assert scan(notebook(code)).uses(DEFAULTS[key], EXERCISES[key].name) is not None


def test_a_change_to_torchs_own_objects_is_flagged():
    code = "torch.Tensor.attend = lambda q, k, v: q\n"
    assert "dispatch" in {f.kind for f in scan(notebook(code)).flags}


def test_a_local_name_shared_with_a_scratch_cell_is_not_a_shortcut():
    code = ("out = F.scaled_dot_product_attention(torch.ones(1, 2, 3), torch.ones(1, 2, 3), torch.ones(1, 2, 3))\n"
            "def scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    out = torch.softmax(q @ k.mT * q.shape[-1] ** -0.5, dim=-1) @ v\n    return out\n")
    assert scan(notebook(code)).uses(DEFAULTS["scaled_dot_product_attention"],
                                     "scaled_dot_product_attention") is None


def test_the_students_own_function_of_a_forbidden_name_is_not_a_shortcut():
    """08's cache calling the student's own 05 answer (the in-kernel watch and the scan)."""
    from grader.checks import diagnosis
    from grader.checks.student_call import code_facts

    code = ("def scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    return torch.softmax(q @ k.mT * q.shape[-1] ** -0.5, dim=-1) @ v\n"
            "class CachedSelfAttention(nn.Module):\n"
            "    def forward(self, x):\n        return scaled_dot_product_attention(x, x, x)\n")
    space = {"__name__": "__main__"}
    exec(IMPORTS + code, space)
    facts = code_facts(space["CachedSelfAttention"])
    assert diagnosis.shortcut(EXERCISES["cached_attention"], facts, DEFAULTS) is None
    assert scan(notebook(code)).uses(DEFAULTS["cached_attention"], "CachedSelfAttention") is None


def test_flags_quote_no_markup_from_the_student():
    """Flags quote the student's line as Markdown code, with nothing that could open markup:
    the feedback page renders the comment as Markdown, the formgrader shows it as text."""
    import re

    from nbconvert.filters import markdown2html

    from grader.grading.flags import comment_text

    code = 'getattr(F, "<img src=x onerror=alert(1)>" + "[a](javascript:x)" + "`<b>`|x\\\\")'
    text = comment_text(scan(notebook(code)).flags)
    assert "`getattr(F, \"?img src=x onerror=alert(1)?\" + \"[a](javascript:x)\"" in text  # the line, quoted
    assert not any(c in text for c in "<>&")
    html = markdown2html(text)
    assert set(re.findall(r"<\s*([a-zA-Z]+)", html)) <= {"p", "ul", "li", "code"}, html


# --- routes to a forbidden function around the rules (issue #28), and the allow-list ----------

ROUTES = {**synthetic.ROUTES, **synthetic.OWN_ROUTES}
SDPA = "scaled_dot_product_attention"


class _Shell:
    """get_ipython() for code run here as a notebook would run it (run_cell only)."""

    def __init__(self, namespace):
        self.namespace = namespace

    def run_cell(self, code):
        exec(code, self.namespace)


def run_answer(code):
    """The notebook's namespace after its imports and the answer cell ran, as in a kernel."""
    namespace = {"__name__": "__main__"}
    namespace["get_ipython"] = lambda: _Shell(namespace)
    exec(compile(IMPORTS + code, "<answer>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_route_to_a_forbidden_function_is_flagged_with_the_students_line(route):
    expected = ROUTES[route]
    found = scan(notebook(expected["code"]))
    kinds = {f.kind for f in found.flags}
    assert expected["flags"] <= kinds, [f.text() for f in found.flags]
    assert all(f.quote and f.cell == 1 and f.line >= 1 for f in found.flags)
    assert all(f.text().endswith(f"`{f.quote}`") for f in found.flags)
    used = found.uses(DEFAULTS[SDPA], SDPA)
    assert used == ("F.scaled_dot_product_attention" if expected["resolved"] else None)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_the_kernel_side_facts_name_what_the_answer_keeps(route):
    """Default arguments, keyword defaults, class attributes, a metaclass, a callable
    object's attributes, a partial, and a name bound to torch's own function are described
    as globals and closures are, so the kernel-side rule sees them."""
    from grader.checks import diagnosis
    from grader.checks.student_call import code_facts

    expected = ROUTES[route]
    facts = code_facts(run_answer(expected["code"])[SDPA])
    used = diagnosis.shortcut(EXERCISES[SDPA], facts, None)
    assert used == ("F.scaled_dot_product_attention" if expected["kernel"] else None), facts


@pytest.fixture(scope="module")
def checks_05():
    from grader.grading import plan

    source = nbformat.read(ROOT / "solutions" / "05_scaled_attention" / "05_scaled_attention.ipynb", as_version=4)
    return [c for cell in plan.read(source).values() for c in cell]


@pytest.mark.parametrize("route", sorted(synthetic.ROUTES))
def test_the_ten_routes_score_nothing_where_either_side_can_name_the_function(route, checks_05):
    """As grading runs each check of 05: the scan's verdict first, then the check with the
    kernel-side facts. A route that names the function in a way neither can read (a name
    computed at run time, reached through ctypes) is flagged for the instructor only."""
    from grader.checks.core import evaluate

    expected = ROUTES[route]
    answer = run_answer(expected["code"])[SDPA]
    used = scan(notebook(expected["code"])).uses(DEFAULTS[SDPA], SDPA)
    outcomes = [evaluate(EXERCISES[c.exercise], answer, c.focus, hidden=c.hidden, seed=c.seed or 7,
                         device="cpu", graded=True, source_uses=used) for c in checks_05]
    if expected["resolved"] or expected["kernel"]:
        assert all(not o.passed and o.mistake == "shortcut" for o in outcomes), [o.message for o in outcomes]
        assert all("F.scaled_dot_product_attention" in o.message for o in outcomes)
    else:
        assert [o.passed for o in outcomes] == [True] * len(outcomes)  # a right answer: flagged only


def test_torch_softmax_kept_as_a_default_argument_fails_every_online_softmax_check():
    """08: the default argument is read by the kernel-side facts; the scan flags the getattr."""
    from grader.checks import diagnosis
    from grader.checks.core import evaluate
    from grader.grading import plan

    code = synthetic.SOFTMAX_DEFAULT
    found = scan(notebook(code))
    assert "dynamic_access" in {f.kind for f in found.flags}
    answer = run_answer(code)["online_softmax"]
    exercise = EXERCISES["online_softmax"]
    from grader.checks.student_call import code_facts
    assert diagnosis.shortcut(exercise, code_facts(answer), None) == "torch.softmax"
    source = nbformat.read(ROOT / "solutions" / "08_attention_at_scale" / "08_attention_at_scale.ipynb",
                           as_version=4)
    checks = [c for cell in plan.read(source).values() for c in cell if c.exercise == "online_softmax"]
    assert checks
    outcomes = [evaluate(exercise, answer, c.focus, hidden=c.hidden, seed=c.seed or 7, device="cpu",
                         graded=True, source_uses=found.uses(DEFAULTS["online_softmax"], "online_softmax"))
                for c in checks]
    assert all(not o.passed and o.mistake == "shortcut" for o in outcomes), [o.message for o in outcomes]


@pytest.mark.parametrize("code", [
    "def scaled_dot_product_attention(q, k, v, mask=None):\n    return q\n",
    "scaled_dot_product_attention = lambda q, k, v, mask=None: q\n",
])
def test_an_answer_named_like_the_forbidden_function_is_not_a_use_of_it(code):
    found = scan(notebook(code + "scaled_dot_product_attention.__doc__ = 'mine'\n"))
    assert found.uses(DEFAULTS[SDPA], SDPA) is None


def test_students_attempts_and_the_course_answers_are_unflagged():
    """Every attempt of the corpora (right or wrong, never hostile) and every function and
    class of grader/answers/correct.py, each read as the only cell a student wrote."""
    import inspect
    import textwrap
    import tomllib

    from grader.answers import correct

    codes = [(a["id"], a["code"]) for path in sorted((ROOT / "tests" / "checks" / "attempts").glob("*.toml"))
             for a in tomllib.loads(path.read_text(encoding="utf-8"))["attempt"]]
    codes += [(name, textwrap.dedent(inspect.getsource(obj))) for name, obj in vars(correct).items()
              if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == correct.__name__]
    assert len(codes) > 300
    flagged = {label: [f.text() for f in scan(notebook(code)).flags] for label, code in codes}
    assert {label: texts for label, texts in flagged.items() if texts} == {}


@pytest.mark.parametrize("code,kind", [
    ("@functools.lru_cache(maxsize=None)\ndef helper(n):\n    return torch.tril(torch.ones(n, n))\n"
     "def scaled_dot_product_attention(q, k, v, mask=None):\n    return helper(3) @ v\n", None),
    ("@torch.no_grad()\ndef scaled_dot_product_attention(q, k, v, mask=None):\n    return q\n", None),
    ("class A(nn.Module):\n    @property\n    def size(self):\n        return 3\n"
     "    @size.setter\n    def size(self, n):\n        pass\n", None),
    ("import numpy as np\ndef scaled_dot_product_attention(q, k, v, mask=None):\n"
     "    return q * float(np.sqrt(2.0))\n", None),
    ("import os\ndef scaled_dot_product_attention(q, k, v, mask=None):\n    os.system('x')\n    return q\n",
     "outside_plain"),
    ("def scaled_dot_product_attention(q, k, v, mask=None):\n    return q.__class__.__dict__\n", "outside_plain"),
    ("def scaled_dot_product_attention(q, k, v, mask=None):\n    return torch._C._nn.gelu(q)\n", "torch_internals"),
    ("def scaled_dot_product_attention(q, k, v, mask=None):\n    return getattr(q, input())()\n", "dynamic_access"),
    ("class scaled_dot_product_attention:\n    def __getattr__(self, name):\n        return 1\n", "dynamic_access"),
    ("q = torch.ones(1)\nq.__class__ = torch.nn.Parameter\n", "code_object"),
    ("e = eval\n", "dynamic_access"),
    ("x = __builtins__\n", "dynamic_access"),
    ("f = torch.load('w.pt', weights_only=False)\n", "serialisation"),
    ("Box = type('Box', (), {'f': 1})\n", "metaclass"),
])
def test_what_an_answer_reaches_is_judged_from_an_allow_list(code, kind):
    kinds = {f.kind for f in scan(notebook(IMPORTS + "import functools\n" + code)).flags}
    assert (kinds == set()) if kind is None else (kind in kinds), kinds


# --- bounded reading ---------------------------------------------------------------------------

@pytest.mark.parametrize("bomb,why", [
    ("x = " + " + ".join(["'a'"] * 3000) + "\n", "nests"),  # RecursionError in Python's own ast
    ("f = " + "lambda: " * 900 + "0\n", "nests"),  # MemoryError in Python's parser
    ("x = [" + ", ".join(["1"] * 40_000) + "]\n", "KiB long"),
], ids=["concatenation_3000", "lambdas_900", "cell_120_kib"])
def test_a_cell_the_grader_cannot_read_is_flagged_and_left_to_the_kernel(bomb, why):
    code = bomb + answer(SDPA, "F.scaled_dot_product_attention")
    found = scan(notebook(code))  # never an error of the run
    assert [f.kind for f in found.flags] == ["unreadable"] and why in found.flags[0].detail
    assert found.unreadable == [1]
    assert found.uses(DEFAULTS[SDPA], SDPA) is None  # that cell's rules: the kernel's


def test_the_answer_in_a_readable_cell_is_still_read_beside_an_unreadable_one():
    nb = notebook("x = " + " + ".join(["'a'"] * 3000) + "\n")
    nb.cells.append(nbformat.v4.new_code_cell(answer(SDPA, "F.scaled_dot_product_attention")))
    found = scan(nb)
    assert found.uses(DEFAULTS[SDPA], SDPA) == "F.scaled_dot_product_attention"


@pytest.mark.parametrize("expr", ["'a' * 10**9", "[0] * 10**9", "'ab' * 5000 + 'c' * 10**6",
                                  "('a' * 9999).replace('a', 'a' * 9999)", "'x'.join(['a' * 9999] * 9999)"])
def test_strings_folded_from_literals_are_bounded(expr):
    import ast
    assert constant_text(ast.parse(expr, mode="eval").body) is None  # too long to build: not built


@pytest.mark.parametrize("code", [
    "import copy\nfrom IPython.display import display\nimport matplotlib.pyplot as plt\n"
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    out = torch.softmax(q @ k.mT * q.shape[-1] ** -0.5, dim=-1) @ v\n"
    "    display(out.shape)\n    plt.plot(out[0, 0].tolist())\n    return copy.deepcopy(out)\n",
    "class Head(nn.Module):\n    def __init__(self, C, head_size, block_size, causal=True):\n"
    "        super().__init__()\n        for name in ('query', 'key', 'value'):\n"
    "            setattr(self, name, nn.Linear(C, head_size, bias=False))\n"
    "        self.extra = {n: getattr(self, n) for n in ('query', 'key')}\n"
    "    def __repr__(self):\n        return f'{type(self).__name__}({self.__class__.__qualname__})'\n"
    "    def forward(self, x):\n        if hasattr(self, 'cache'):\n            pass\n"
    "        return super().__call__(x) if False else self.query(x)\n",
])
def test_debugging_and_ordinary_python_in_an_answer_are_not_flagged(code):
    assert scan(notebook(code)).flags == []
