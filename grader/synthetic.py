"""Synthetic submissions, built from the release and the solutions, for the pipeline's
tests and benchmark. Each variant is a student's notebook with one thing changed."""
import json
import shutil
from pathlib import Path

import nbformat

from grader.grading import layout as pipeline


def _solution_code(root, assignment, notebook):
    """grade_id -> the solution cell's code as a student would hand it in."""
    nb = nbformat.read(Path(root) / "solutions" / assignment / f"{notebook}.ipynb", as_version=4)
    code = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            lines = [l for l in cell.source.splitlines() if "### BEGIN SOLUTION" not in l
                     and "### END SOLUTION" not in l]
            code[meta["grade_id"]] = "\n".join(lines)
    return code


def answered(root, assignment, notebook, edit=None):
    """The released notebook with every solution cell filled in (edit(grade_id, code) -> code)."""
    nb = nbformat.read(Path(root) / "notebooks" / assignment / f"{notebook}.ipynb", as_version=4)
    code = _solution_code(root, assignment, notebook)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta["grade_id"] in code:
            cell.source = code[meta["grade_id"]]
            if edit:
                cell.source = edit(meta["grade_id"], cell.source)
    return nb


def _edit_solutions(fn):
    return lambda root, a, n: answered(root, a, n, edit=lambda gid, src: fn(src))


def _with_test_cells(fn):
    def build(root, a, n):
        nb = answered(root, a, n)
        tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        fn(nb, tests)
        return nb
    return build


def _body(src, new_body):
    """Replace the body of the first function or method in src (after a one-line docstring)."""
    lines = src.splitlines()
    i = next(k for k, l in enumerate(lines) if l.lstrip().startswith("def "))
    indent = len(lines[i]) - len(lines[i].lstrip())
    keep = i + 1 if lines[i + 1].strip().startswith('"""') else i
    end = keep + 1
    while end < len(lines) and (not lines[end].strip() or
                                len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    body = [" " * (indent + 4) + l for l in new_body.splitlines()]
    return "\n".join(lines[: keep + 1] + body + lines[end:])


def _delete_first_test(nb, tests):
    nb.cells.remove(tests[0])


def _edit_test(nb, tests):
    for cell in tests:
        cell.source = '"""Check nothing."""\nassert True'


def _tamper_metadata(nb, tests):
    tests[0].metadata["nbgrader"].update(locked=False, solution=True, grade=False)


VARIANTS = {
    "correct": lambda root, a, n: answered(root, a, n),
    "stub": lambda root, a, n: nbformat.read(Path(root) / "notebooks" / a / f"{n}.ipynb", as_version=4),
    "softmax_wrong_dim": _edit_solutions(lambda s: s.replace("dim=-1", "dim=-2")),
    "missing_scale": _edit_solutions(lambda s: s.replace(" * head_size**-0.5", "")),
    "exception": _edit_solutions(lambda s: _body(s, 'raise ValueError("my bug")')),
    "infinite_loop": _edit_solutions(lambda s: _body(s, "while True:\n    pass")),
    "stderr_warning": _edit_solutions(
        lambda s: 'import warnings\nwarnings.warn("a stray warning from my cell")\n' + s),
    "deleted_test_cell": _with_test_cells(_delete_first_test),
    "edited_test_cell": _with_test_cells(_edit_test),
    "tampered_metadata": _with_test_cells(_tamper_metadata),
    "kernel_death": _edit_solutions(lambda s: "import os\nos._exit(1)\n" + s),
}

# Variants that are not notebooks at all.
FILE_VARIANTS = {
    "invalid_json": lambda path: path.write_text('{"cells": [ this is not json'),
    "empty_notebook": lambda path: path.write_text(""),
    "missing_notebook": lambda path: None,
    "renamed_notebook": lambda path: path.with_name("my_homework.ipynb").write_text(
        json.dumps(nbformat.v4.new_notebook())),
}


def make_submission(root, student, assignment, variant):
    """Write submitted/<student>/<assignment>/ for one variant; returns its folder."""
    folder = Path(root) / "submitted" / student / assignment
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for notebook in pipeline.expected_notebooks(root, assignment):
        path = folder / f"{notebook}.ipynb"
        if variant in FILE_VARIANTS:
            FILE_VARIANTS[variant](path)
        else:
            nbformat.write(VARIANTS[variant](root, assignment, notebook), path)
    return folder


def make_course(dest, source_root=pipeline.ROOT):
    """A copy of the course (solutions, release, config) to grade in, without students."""
    dest = Path(dest)
    for name in ("solutions", "notebooks"):
        shutil.copytree(Path(source_root) / name, dest / name)
    shutil.copy(Path(source_root) / "nbgrader_config.py", dest / "nbgrader_config.py")
    return dest


# --- attacks on the grading itself (notebook 05); each is a wrong answer plus a trick ----

_WRONG = "    return torch.zeros(1)"
_SIG = 'def scaled_dot_product_attention(q, k, v, mask=None):\n    """Attack."""\n'

ATTACKS = {
    "rebind_allclose": "torch.allclose = lambda *a, **k: True\n" + _SIG + _WRONG,
    "rebind_assert_close": "torch.testing.assert_close = lambda *a, **k: None\n" + _SIG + _WRONG,
    "rebind_checks": "check_scaled_dot_product_attention = lambda *a, **k: None\n" + _SIG + _WRONG,
    "tensor_subclass": (
        "class Liar(torch.Tensor):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        out = super().__torch_function__(func, types, args, kwargs or {})\n"
        "        return torch.zeros_like(out) if func is torch.Tensor.sub else out\n"
        + _SIG + "    return torch.zeros_like(v).as_subclass(Liar)"),
    "function_mode": (
        "from torch.overrides import TorchFunctionMode\n"
        "class Lie(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        kwargs = kwargs or {}\n"
        "        if func in (torch.isclose, torch.allclose):\n"
        "            return True if func is torch.allclose else torch.ones_like(args[0], dtype=torch.bool)\n"
        "        return func(*args, **kwargs)\n"
        "Lie().__enter__()\n" + _SIG + _WRONG),
    "always_equal": (
        "class Same:\n    def __eq__(self, other):\n        return True\n"
        "    shape = property(lambda self: None)\n" + _SIG + "    return Same()"),
    "os_exit": "import os\nos._exit(0)\n" + _SIG + _WRONG,  # kills the kernel
    "sys_exit": "import sys\nsys.exit(0)\n" + _SIG + _WRONG,
    "infinite_loop": _SIG + "    while True:\n        pass",
    "memory_bomb": _SIG + "    hog = []\n    while True:\n        hog.append(torch.ones(2**28))",
    "read_references": (
        _SIG +
        "    import glob\n"
        "    cases = {}\n"
        "    try:\n"
        "        from grader import fixtures\n"
        "        cases = fixtures.load('scaled_dot_product_attention')\n"
        "    except Exception:\n"
        "        for path in glob.glob('/work/*/data/references/scaled_dot_product_attention.pt') + glob.glob('/tmp/*/data/references/*.pt'):\n"
        "            cases = torch.load(path, weights_only=True)\n"
        "    for case in cases.values():\n"
        "        if case['inputs']['q'].shape == q.shape and torch.equal(case['inputs']['q'].to(q.dtype), q):\n"
        "            return case['expected'].to(q.dtype)\n"
        "    return torch.zeros(1)"),
    "write_gradebook": (
        "import glob, os, sqlite3\n"
        "for db in set(glob.glob('/tmp/*/gradebook.db') + glob.glob('/tmp/*/*/gradebook.db')\n"
        "              + glob.glob('/work/*/gradebook.db') + [os.path.join(os.getcwd(), '..', '..', '..', 'gradebook.db')]):\n"
        "    try:\n"
        "        con = sqlite3.connect(db)\n"
        "        con.execute('UPDATE grade SET auto_score = 0')\n"
        "        con.commit()\n"
        "    except Exception:\n"
        "        pass\n" + _SIG + _WRONG),
    "fake_passed": (
        _SIG + "    print('\\u2713 scaled_dot_product_attention: matches the reference values')\n" + _WRONG),
}


def make_attack(root, student, attack, assignment="05_scaled_attention"):
    """A submission whose solution cell is replaced by one attack."""
    folder = Path(root) / "submitted" / student / assignment
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    nb = answered(root, assignment, assignment, edit=lambda gid, src: ATTACKS[attack])
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    return folder
