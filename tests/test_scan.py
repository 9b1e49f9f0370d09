"""The shortcut battery: what the student's kernel could hide, read from the source by the
grading process (grader.grading.scan). Every forbidden function of every exercise, reached
directly, through getattr with a built name, through importlib, or under torch's disabled
dispatch modes, fails its rule or is flagged; honest answers are neither."""
import nbformat
import pytest

from grader import synthetic
from grader.exercises import EXERCISES
from grader.grading import layout
from grader.grading.scan import constant_text, scan
from grader.shortcuts import DEFAULTS

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
])
def test_ways_of_hiding_are_flagged(code, kind):
    assert kind in {f.kind for f in scan(notebook(code)).flags}


def test_code_inside_a_timing_magic_is_read():
    code = "%%time\n" + answer("scaled_dot_product_attention", "F.scaled_dot_product_attention")
    found = scan(notebook(code))
    assert found.uses(DEFAULTS["scaled_dot_product_attention"], "scaled_dot_product_attention") \
        == "F.scaled_dot_product_attention"


@pytest.mark.parametrize("variant", sorted(synthetic.HONEST_VARIANTS))
def test_honest_answers_are_neither_refused_nor_flagged(variant):
    nb = synthetic.HONEST_VARIANTS[variant](ROOT, "05_scaled_attention", "05_scaled_attention")
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
