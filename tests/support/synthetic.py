"""Synthetic submissions, built from the release and the solutions, for the pipeline's
tests and benchmark. Each variant is a student's notebook with one thing changed."""
import functools
import json
import shutil
from pathlib import Path

import nbformat

from grader.grading import layout


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


def _forge_plan(nb, tests):
    """A wrong answer whose test cells claim, in their metadata, to check only the shape."""
    for cell in tests:
        cell.metadata["grading_plan"] = [{"exercise": "scaled_dot_product_attention",
                                          "student": "scaled_dot_product_attention", "focus": "output"}]


def _forge_plan_of(nb):
    _forge_plan(nb, [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")])
    return nb


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
    "forged_plan": lambda root, a, n: _forge_plan_of(_edit_solutions(lambda s: s.replace("dim=-1", "dim=-2"))(root, a, n)),
    "kernel_death": _edit_solutions(lambda s: "import os\nos._exit(1)\n" + s),
    # Displays 256 MiB outputs without end: the kernel sends each one and survives, but the
    # process that runs the notebook receives and decodes each message whole before it can
    # cut it (grader.grading.bounds), so a grading worker with a small memory limit runs
    # out of memory within a few messages (printing instead would pile up in the kernel's
    # own output buffer).
    "output_flood": _edit_solutions(
        lambda s: 'from IPython.display import display\nblock = {"text/plain": "x" * 2**28}\n'
                  'while True:\n    display(block, raw=True)\n' + s),
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
    for notebook in layout.expected_notebooks(root, assignment):
        path = folder / f"{notebook}.ipynb"
        if variant in FILE_VARIANTS:
            FILE_VARIANTS[variant](path)
        else:
            nbformat.write(VARIANTS[variant](root, assignment, notebook), path)
    return folder


def make_course(dest, source_root=layout.ROOT, gradebook=False):
    """A copy of the course (solutions, release, config) to grade in, without students.
    gradebook=True: with the gradebook a first grading would make (every assignment known,
    no student), copied from the one this process made (`_course_with_gradebook`), instead
    of each class paying for nbgrader generate_assignment again (a CPU second in a test
    process, two in a command's)."""
    dest = Path(dest)
    source = _course_with_gradebook(Path(source_root)) if gradebook else Path(source_root)
    for name in ("solutions", "notebooks"):
        shutil.copytree(source / name, dest / name)
    shutil.copy(source / "nbgrader_config.py", dest / "nbgrader_config.py")
    if gradebook:
        shutil.copy(source / "gradebook.db", dest / "gradebook.db")
    return dest


@functools.cache
def _course_with_gradebook(source_root):
    """A copy of the course at source_root, made once per process in a temporary folder
    (removed when it exits), graded nothing yet: layout.ensure_gradebook has run in it."""
    import atexit
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="course-with-gradebook-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    course = make_course(folder / "course", source_root)
    layout.ensure_gradebook(course, layout.load_config(course))
    return course


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
    # (a function that never returns: the variant "infinite_loop" of tests/support/classes.py's
    # EXPECTED, graded in the same class; once is enough, each costs ~16 s of CPU by design)
    "memory_bomb": _SIG + "    hog = []\n    while True:\n        hog.append(torch.ones(2**28))",
    "read_references": (
        _SIG +
        "    import glob\n"
        "    cases = {}\n"
        "    try:\n"
        "        from grader.checks import fixed as fixtures\n"
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
    # Reach outside the notebook: other gradebooks, pipes, files, the grader, the environment.
    "raise_own_points": (
        "import glob, os, sqlite3\n"
        "for db in glob.glob('../../../gradebook.db') + glob.glob('/tmp/*/gradebook.db'):\n"
        "    try:\n"
        "        con = sqlite3.connect(db)\n"
        "        con.execute('UPDATE grade_cells SET max_score = 15')\n"
        "        con.execute('UPDATE grade SET auto_score = 15')\n"
        "        con.commit()\n"
        "    except Exception:\n"
        "        pass\n" + _SIG + _WRONG),
    "forge_pipes": (  # pipes only: a forged result line into any process's pipe
        "import glob, json, os, stat\n"
        "line = json.dumps({'status': 'graded', 'notebooks': {}, 'score': 15}) + '\\n'\n"
        "for fd in glob.glob('/proc/*/fd/*'):\n"
        "    try:\n"
        "        if stat.S_ISFIFO(os.stat(fd).st_mode):\n"
        "            with open(fd, 'a') as f:\n"
        "                f.write(line)\n"
        "    except Exception:\n"
        "        pass\n" + _SIG + _WRONG),
    "daemon": (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for _ in range(600):\n"
        "            time.sleep(0.1)\n"
        "            for path in ('../../../gradebook.db', '/tmp/attack-daemon-alive'):\n"
        "                try:\n"
        "                    open(path, 'a').write('x')\n"
        "                except Exception:\n"
        "                    pass\n"
        "    os._exit(0)\n" + _SIG + _WRONG),
    "copy_other_answers": (
        "import glob, json\n"
        "found = None\n"
        "pattern = '{}/submitted/*/05_scaled_attention/*.ipynb'\n"
        "paths = [p for base in ('/tmp/*', '/tmp/*/*', '/tmp/*/*/*', '../../..') for p in glob.glob(pattern.format(base))]\n"
        "paths += glob.glob('/work/*/solutions/05_scaled_attention/*.ipynb')\n"
        "for path in paths:\n"
        "    try:\n"
        "        for cell in json.load(open(path))['cells']:\n"
        "            src = ''.join(cell['source'])\n"
        "            if src.startswith('def scaled_dot_product_attention') and 'NotImplementedError' not in src:\n"
        "                found = src\n"
        "    except Exception:\n"
        "        pass\n"
        "if found:\n"
        "    exec(found)\n"
        "else:\n" + "".join("    " + l + "\n" for l in (_SIG + _WRONG).splitlines())),
    "write_grader": (
        "import glob, os, sys\n"
        "import notebook_helpers\n"
        "root = os.path.dirname(os.path.dirname(notebook_helpers.__file__))\n"
        "targets = glob.glob(root + '/grader/**/*.py', recursive=True) + glob.glob(root + '/solutions/*/*.ipynb')\n"
        "targets += [os.path.join(p, 'attack_marker.py') for p in sys.path if p.endswith('site-packages')]\n"
        "for path in targets:\n"
        "    try:\n"
        "        with open(path, 'a') as f:\n"
        "            f.write('\\n# attacked\\n')\n"
        "    except Exception:\n"
        "        pass\n" + _SIG + _WRONG),
    "read_environment": (
        "import os\n" + _SIG + "    raise RuntimeError(' '.join(f'{k}={v}' for k, v in sorted(os.environ.items())))"),
    "junk_reply": (
        "_save = torch.save\n"
        "def _junk(obj, f, *a, **k):\n"
        "    open(f, 'wb').write(b'\\x00junk' * 1000)\n"
        "torch.save = _junk\n" + _SIG + _WRONG),
    "compressed_bomb": (
        "import zipfile\n"
        "def _bomb(obj, f, *a, **k):\n"
        "    with zipfile.ZipFile(f, 'w', zipfile.ZIP_DEFLATED) as z:\n"
        "        z.writestr('archive/data.pkl', b'\\x00' * (80 * 2**20))\n"
        "torch.save = _bomb\n" + _SIG + _WRONG),
    "oversized_reply": _SIG + "    return torch.zeros(10, 2**20)",  # 40 MiB: more than a reply may hold
    "sparse_reply": _SIG + "    return (torch.softmax(q @ k.mT * q.shape[-1] ** -0.5, -1) @ v).to_sparse()",
    "nested_reply": _SIG + "    return torch.nested.nested_tensor([v[0], v[1]])",
    "quantized_reply": _SIG + "    return torch.quantize_per_tensor(v.float(), 0.1, 0, torch.qint8)",
    "sleeps": _SIG + "    import time\n    time.sleep(3600)",
    # the fused function, out of sight of the in-kernel watch: grader.grading.scan reads it
    "hidden_shortcut": (
        "import importlib\n" + _SIG +
        "    functional = importlib.import_module('torch.nn.' + 'functional')\n"
        "    fused = getattr(functional, 'scaled_dot_product' + '_attention')\n"
        "    return fused(q, k, v, attn_mask=None if mask is None else ~mask)"),
}


# --- routes to a forbidden function (05's F.scaled_dot_product_attention) past the rules -------
# Each is an answer that would be right, reached through a route around the rules. "resolved":
# the grading process reads the forbidden name in the source (grader.grading.scan), so the
# check fails; "kernel": the kernel-side facts about the answer (grader.checks.student_call
# code_facts) name it, so the check fails there too; "flags": kinds of flag the instructor
# sees. A name computed at run time (_HIDDEN) cannot be read from the source.

_HIDDEN = "''.join(reversed('noitnetta_tcudorp_tod_delacs'))"
_MASK = "attn_mask=None if mask is None else ~mask"
_HONEST = ("    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5\n"
           "    if mask is not None:\n        wei = wei.masked_fill(mask, float('-inf'))\n"
           "    return torch.softmax(wei, dim=-1) @ v\n")
_PICKLED_SDPA = b"ctorch._C._nn\nscaled_dot_product_attention\np0\n."  # pickle protocol 0, a global
_PICKLED_IMPORT_CTYPES = b"cbuiltins\n__import__\n(Vctypes\ntR."  # __import__("ctypes"), unpickled


def _route(code, resolved, kernel, flags):
    return {"code": code, "resolved": resolved, "kernel": kernel, "flags": set(flags)}


ROUTES = {  # the ten of issue #28
    "inspect_default": _route(
        "import inspect\n"
        "def scaled_dot_product_attention(q, k, v, mask=None,\n"
        f"                                 _fused=dict(inspect.getmembers(F))[{_HIDDEN}]):\n"
        f"    return _fused(q, k, v, {_MASK})\n", False, True, {"outside_plain"}),
    "pickle_global": _route(
        "import pickle\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return pickle.loads({_PICKLED_SDPA!r})(q, k, v, {_MASK})\n", True, False, {"serialisation"}),
    "getattr_alias": _route(
        "g = getattr\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return g(F, 'scaled_dot_' + 'product_attention')(q, k, v, {_MASK})\n",
        True, False, {"dynamic_access"}),
    "getattr_in_a_list": _route(
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return [getattr][0](F, 'scaled_dot_product_attention')(q, k, v, {_MASK})\n",
        True, False, {"dynamic_access"}),
    "reduce_getattr": _route(
        "import functools\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    fused = functools.reduce(getattr, ['nn', 'functional', 'scaled_dot_product_attention'], torch)\n"
        f"    return fused(q, k, v, {_MASK})\n", True, False, {"dynamic_access"}),
    "torch_ops_getattr": _route(
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    fused = torch.ops.aten.__getattr__('scaled_dot_product_attention')\n"
        f"    return fused(q, k, v, {_MASK})\n", True, False, {"torch_internals", "outside_plain"}),
    "decorator_returns_it": _route(
        "def _faster(fn):\n"
        "    return getattr(F, fn.__name__)  # F's function of the same name\n"
        "@_faster\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n" + _HONEST, False, True,
        {"decorator", "dynamic_access"}),
    "code_and_defaults_swapped": _route(
        "def scaled_dot_product_attention(q, k, v, mask=None):\n" + _HONEST +
        "def _impl(q, k, v, mask=None, _fused=None):\n"
        f"    return _fused(q, k, v, {_MASK})\n"
        "scaled_dot_product_attention.__code__ = _impl.__code__\n"
        f"scaled_dot_product_attention.__defaults__ = (None, getattr(F, {_HIDDEN}))\n",
        False, True, {"code_object", "dynamic_access"}),
    "metaclass_call": _route(
        "class _Calls(type):\n"
        "    def __call__(cls, q, k, v, mask=None):\n"
        f"        return F.scaled_dot_product_attention(q, k, v, {_MASK})\n"
        "class scaled_dot_product_attention(metaclass=_Calls):\n"
        '    """Called like a function."""\n', True, True, {"metaclass"}),
    "ctypes_through_pickle": _route(
        "import pickle\n"
        f"_ctypes = pickle.loads({_PICKLED_IMPORT_CTYPES!r})\n"
        "_get = _ctypes.pythonapi.PyObject_GetAttrString\n"
        "_get.restype, _get.argtypes = _ctypes.py_object, [_ctypes.py_object, _ctypes.c_char_p]\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return _get(F, {_HIDDEN}.encode())(q, k, v, {_MASK})\n", False, False, {"serialisation", "native_code"}),
}
OWN_ROUTES = {  # found by trying further
    "partial": _route(
        "import functools\n"
        "scaled_dot_product_attention = functools.partial(getattr(F, "
        f"{_HIDDEN}))\n", False, True, {"dynamic_access"}),
    "callable_object": _route(
        "class _Attend:\n"
        "    def __call__(self, q, k, v, mask=None):\n"
        f"        return self.fused(q, k, v, {_MASK})\n"
        "scaled_dot_product_attention = _Attend()\n"
        f"scaled_dot_product_attention.fused = getattr(F, {_HIDDEN})\n", False, True, {"dynamic_access"}),
    "class_attribute": _route(
        "class _Kernels:\n"
        f"    fused = staticmethod(getattr(F, {_HIDDEN}))\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return _Kernels.fused(q, k, v, {_MASK})\n", False, True, {"dynamic_access"}),
    "keyword_only_default_in_a_tuple": _route(
        f"def scaled_dot_product_attention(q, k, v, mask=None, *, _kernels=(getattr(F, {_HIDDEN}),)):\n"
        f"    return _kernels[0](q, k, v, {_MASK})\n", False, True, {"dynamic_access"}),
    "lambda_default": _route(
        f"scaled_dot_product_attention = lambda q, k, v, mask=None, _f=vars(F)[{_HIDDEN}]: _f(q, k, v, {_MASK})\n",
        False, True, {"dynamic_access"}),
    "builtins_module": _route(
        "import builtins\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return builtins.getattr(F, {_HIDDEN})(q, k, v, {_MASK})\n", False, False, {"dynamic_access"}),
    "ipython_run_cell": _route(
        "get_ipython().run_cell('attend = F.scaled_dot_' + 'product_attention')\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return attend(q, k, v, {_MASK})\n", False, True, {"code_from_text"}),
    "getattribute_of_a_module": _route(
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        f"    return F.__getattribute__({_HIDDEN})(q, k, v, {_MASK})\n", False, False, {"dynamic_access"}),
    "code_object_built": _route(
        "import types\n"
        "def _impl(q, k, v, mask=None):\n"
        f"    return attend(q, k, v, {_MASK})\n"
        f"scaled_dot_product_attention = types.FunctionType(_impl.__code__, {{'attend': getattr(F, {_HIDDEN})}})\n",
        False, True, {"code_object"}),
}
def hidden_in_a_magic(code):
    """05's answer wrong as written, then `code` run by a line magic's {...} (which IPython
    evaluates before the magic sees its text), hex-encoded."""
    return ("def scaled_dot_product_attention(q, k, v, mask=None):\n    return torch.zeros_like(v)\n"
            f"%pwd {{exec(bytes.fromhex('{code.encode().hex()}').decode())}}\n")


# 08: torch.softmax kept as a default argument of online_softmax (its rules forbid it)
SOFTMAX_DEFAULT = ("def online_softmax(scores, _softmax=getattr(torch, ''.join(reversed('xamtfos')))):\n"
                   "    return _softmax(scores, dim=-1)\n")


def make_attack(root, student, attack, assignment="05_scaled_attention"):
    """A submission whose solution cell is replaced by one attack."""
    folder = Path(root) / "submitted" / student / assignment
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    nb = answered(root, assignment, assignment, edit=lambda gid, src: ATTACKS[attack])
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    return folder


# --- honest answers written another way (notebook 05); each must get full marks ---------

_SDPA = 'def scaled_dot_product_attention(q, k, v, mask=None):\n    """Mine."""\n'


def _solution_cell(nb):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))


def _insert_after_solution(code, stub=False):
    """A cell the student added after the solution cell (the solution cell may stay a stub)."""
    def build(root, a, n):
        nb = answered(root, a, n)
        cell = _solution_cell(nb)
        if stub:
            cell.source = "# moved my answer to the next cell\nraise NotImplementedError()"
        nb.cells.insert(nb.cells.index(cell) + 1, nbformat.v4.new_code_cell(code))
        return nb
    return build


def _helper_before_solution(helper, solution):
    def build(root, a, n):
        nb = answered(root, a, n)
        cell = _solution_cell(nb)
        cell.source = solution
        nb.cells.insert(nb.cells.index(cell), nbformat.v4.new_code_cell(helper))
        return nb
    return build


def _solution(code):
    return lambda root, a, n: answered(root, a, n, edit=lambda gid, src: code)


def _notebook_edit(fn):
    def build(root, a, n):
        nb = answered(root, a, n)
        fn(nb)
        return nb
    return build


def _duplicate(kind):
    def fn(nb):
        meta = lambda c: c.metadata.get("nbgrader", {})
        cell = next(c for c in nb.cells if meta(c).get(kind) and not (kind == "solution" and meta(c).get("grade")))
        nb.cells.insert(nb.cells.index(cell) + 1, nbformat.from_dict(json.loads(json.dumps(cell))))
    return fn


def _to_markdown(nb):
    cell = _solution_cell(nb)
    nb.cells[nb.cells.index(cell)] = nbformat.v4.new_markdown_cell(cell.source, metadata=cell.metadata)


def _stale_outputs(nb):
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.execution_count = 40 - i
            cell.outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="stale",
                                                   traceback=["NameError: stale"])]


def _edit_given(nb):
    first = next(c for c in nb.cells if c.cell_type == "code")
    first.source += "\nimport numpy as np  # I like to have it around"


_BODY = ("    head_size = q.shape[-1]\n"
         "    wei = q @ k.transpose(-2, -1) * head_size**-0.5  # (B, T, T)\n"
         "    if mask is not None:\n"
         "        wei = wei.masked_fill(mask, float('-inf'))\n"
         "    return torch.softmax(wei, dim=-1) @ v\n")

HONEST_VARIANTS = {
    "helper_cell": _helper_before_solution(
        "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n",
        _SDPA + "    wei = attention_scores(q, k)\n    if mask is not None:\n"
        "        wei = wei.masked_fill(mask, float('-inf'))\n    return torch.softmax(wei, -1) @ v\n"),
    "import_cell": _helper_before_solution(
        "import math", _SDPA + "    wei = q @ k.mT / math.sqrt(q.shape[-1])\n    if mask is not None:\n"
        "        wei = wei.masked_fill(mask, -math.inf)\n    return wei.softmax(-1) @ v\n"),
    "answer_in_added_cell": _insert_after_solution(_SDPA + _BODY, stub=True),
    "magic_time": _solution("%%time\n" + _SDPA + _BODY),
    "magic_matplotlib": _solution("%matplotlib inline\n" + _SDPA + _BODY),
    "jit_script": _solution(
        "@torch.jit.script\ndef scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:\n"
        "    return q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5\n\n"
        + _SDPA + "    wei = scaled_scores(q, k)\n    if mask is not None:\n"
        "        wei = wei.masked_fill(mask, float('-inf'))\n    return torch.softmax(wei, dim=-1) @ v\n"),
    "notebook_variable": _solution("print('the head sizes above were', sizes)\n" + _SDPA + _BODY),
    "parameter_returned": _solution(
        _SDPA + _BODY.replace("    return torch.softmax(wei, dim=-1) @ v\n",
                              "    return torch.nn.Parameter(torch.softmax(wei, dim=-1) @ v, requires_grad=False)\n")),
    "edited_given_cell": _notebook_edit(_edit_given),
    "duplicated_solution_cell": _notebook_edit(_duplicate("solution")),
    "duplicated_test_cell": _notebook_edit(_duplicate("grade")),
    "solution_as_markdown": _notebook_edit(_to_markdown),
    "crlf": _solution((_SDPA + _BODY).replace("\n", "\r\n")),
    "non_ascii_names": _solution(
        _SDPA + "    größe = q.shape[-1]\n    注意 = q @ k.transpose(-2, -1) * größe ** -0.5\n"
        "    if mask is not None:\n        注意 = 注意.masked_fill(mask, float('-inf'))\n"
        "    return torch.softmax(注意, dim=-1) @ v\n"),
    "stale_outputs": _notebook_edit(_stale_outputs),
    "prints_passed": _solution(_SDPA + "    print('\\u2713 my own test passed')\n" + _BODY),
}


# Answers that differ only in how the function is written: they exercise what a check
# accepts, not the notebook's grading, and are checked through grader.checks.core directly
# (tests/checks/test_honest_answers.py) rather than graded one sandbox each.
HONEST_ANSWERS = {
    "einsum": _solution(
        _SDPA + "    wei = torch.einsum('bqh,bkh->bqk', q, k) / q.shape[-1] ** 0.5\n"
        "    if mask is not None:\n        wei = wei.masked_fill(mask, float('-inf'))\n"
        "    return torch.einsum('bqk,bkh->bqh', wei.softmax(-1), v)\n"),
    "functional_where": _solution(
        "from torch.nn import functional as F\n" + _SDPA +
        "    wei = q @ k.transpose(-1, -2) * q.size(-1) ** -0.5\n    if mask is not None:\n"
        "        wei = torch.where(mask, torch.full_like(wei, float('-inf')), wei)\n"
        "    return F.softmax(wei, dim=-1) @ v\n"),
    "stable_softmax": _solution(
        _SDPA + "    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5\n    if mask is not None:\n"
        "        wei = wei.masked_fill(mask, float('-inf'))\n"
        "    wei = (wei - wei.max(-1, keepdim=True).values).exp()\n"
        "    return (wei / wei.sum(-1, keepdim=True)) @ v\n"),
    "float64_inside": _solution(
        _SDPA + "    dtype = q.dtype\n    q, k, v = q.double(), k.double(), v.double()\n"
        + _BODY.replace("    return torch.softmax(wei, dim=-1) @ v\n", "    return (torch.softmax(wei, dim=-1) @ v).to(dtype)\n")),
}
HONEST = {**HONEST_VARIANTS, **HONEST_ANSWERS}


def make_honest(root, student, variant, assignment="05_scaled_attention", nbformat_minor=None):
    """A correct answer written another way (see HONEST)."""
    folder = Path(root) / "submitted" / student / assignment
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    nb = HONEST[variant](root, assignment, assignment)
    if nbformat_minor is not None:
        nb = nbformat.convert(nb, 4)
        nb.nbformat_minor = nbformat_minor
        for cell in nb.cells:
            if nbformat_minor < 5:
                cell.pop("id", None)
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    return folder


# --- classmates that attack the machine (notebook 05): a correct submission with one more
# cell after its first code cell; graded only where each sandbox has a cgroup of its own
# (memory_spread: 8 x 600 MB, more than a sandbox's 4 GiB) --

RESOURCE_HOGS = {
    "spinners": "import subprocess\n"
                "spinners = [subprocess.Popen(['/bin/sh', '-c', 'while :; do :; done']) for _ in range(120)]",
    "memory_spread": "import subprocess, sys\n"
                     "code = \"x = bytearray(600 * 2**20); x[::4096] = b'1' * len(x[::4096]); "
                     "import time; time.sleep(600)\"\n"
                     "hogs = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(8)]",
    "fork_bomb": "import os\nwhile True:\n    os.fork()",
}


def make_hog(root, student, hog, assignment="05_scaled_attention"):
    """A correct submission with RESOURCE_HOGS[hog] in a cell of its own after the first code cell."""
    folder = make_submission(root, student, assignment, "correct")
    path = folder / f"{assignment}.ipynb"
    nb = nbformat.read(path, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(RESOURCE_HOGS[hog]))
    nbformat.write(nb, path)
    return folder
