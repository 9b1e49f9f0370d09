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
    module = {"F": "torch.nn.functional", "nn": "torch.nn", "torch": "torch"}[owner]
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
    assert [f.kind for f in found.flags] == ["dynamic_access"]  # it cannot be read: flagged


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
    code = 'getattr(F, "<img src=x onerror=alert(1)>" + "[a](javascript:x)")'
    texts = " ".join(f.text() for f in scan(notebook(code)).flags)
    assert texts and not any(c in texts for c in "<>[]") and "javascript:" not in texts
