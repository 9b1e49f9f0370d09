"""The student bundle: what students get, without answers.

    python -m grader.instructor.bundle [--dest dist/self-attention-student]     (make student-bundle)

The bundle holds the student notebooks, the plot and widget helpers, the corpus, the
checks (grader/checks/: core.py, exercises.py, diagnosis.py, ...) with the fixed inputs and
expected outputs of the visible checks (data/references/), and data/stored_outputs.pt:
the outputs, on exactly the inputs the visible checks use, of every function the bundle
leaves out (the reference implementations, the catalogued mistakes, which are near
answers, and the attention with knobs that the diagnosis turns). Those functions are
replaced by lookups (grader/checks/stored.py), so a visible check in the bundle passes a
correct answer and names a catalogued mistake exactly as in the course repository. Not
in the bundle: solutions/, hidden tests, reference implementations, the mistakes'
code, the grading pipeline, tests. `make lab` in the bundle installs and opens it.
"""
import argparse
import ast
import importlib.util
import inspect
import shutil
import sys
from pathlib import Path

from grader.checks import stored

ROOT = Path(__file__).resolve().parents[2]
DEST = ROOT / "dist" / "self-attention-student"
# copied as they are: the checks' engine, the exercises' inputs and invariants
STUDENT_MODULES = ("__init__.py", "checks/__init__.py", "checks/core.py", "checks/exercises.py",
                   "checks/shortcuts.py", "checks/student_call.py", "checks/stored.py",
                   "answers/__init__.py", "answers/fixtures.py")
SHIPPED_REFERENCE = ("causal_mask",)  # given in the notebooks themselves
# the diagnosis' own attention, whose defaults are the reference: stored, not shipped
STORED_DIAGNOSIS = ("_core", "forward", "running_weights", "_split", "_merge")
STUDENT_PACKAGES = ("torch", "jupyterlab", "ipywidgets", "matplotlib", "numpy", "traitlets")


class BundleError(RuntimeError):
    pass


# --- which functions are stored, under which names ------------------------------------

def _reference_functions():
    from grader.answers import reference as ref

    return {name: fn for name, fn in vars(ref).items()
            if inspect.isfunction(fn) and fn.__module__ == ref.__name__ and not name.startswith("__")}


def _mistake_names():
    """{id(Mistake): stored name}; a mistake shared by two exercises has one name."""
    from grader.answers import mistakes

    names = {}
    for attr, value in vars(mistakes).items():
        if isinstance(value, tuple) and value and all(isinstance(m, mistakes.Mistake) for m in value):
            for m in value:
                names.setdefault(id(m), f"mistakes.{attr}.{m.key}")
    return names


# --- recording ---------------------------------------------------------------------------

def _recorder(table, name, fn):
    def recorded(*args, **kwargs):
        key = stored.call_key(name, args, kwargs)  # before the call, as the lookup does
        try:
            out = fn(*args, **kwargs)
        except Exception as err:
            table.setdefault(key, stored.raised_entry(err))
            raise
        try:
            table.setdefault(key, stored.to_entry(out))
        except TypeError:
            pass  # not plain data: the bundle's checks never need it
        return out
    recorded.__name__, recorded.__qualname__ = fn.__name__, fn.__qualname__
    return recorded


def _load_answers():
    """tests/answers.py: correct answers written as a student would, and student_from()."""
    spec = importlib.util.spec_from_file_location("_course_answers", ROOT / "tests" / "answers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record():
    """{call key: stored entry} for every call the visible checks make to a function the
    bundle leaves out, running each check on a correct answer and on every catalogued
    mistake, plus the reference on every crop a failing check may show."""
    from grader.checks import core, diagnosis
    from grader.answers import mistakes, reference as ref
    from grader.checks.exercises import EXERCISES

    table, undo = {}, []

    def patch(obj, attr, new):
        undo.append((obj, attr, getattr(obj, attr)))
        if isinstance(obj, mistakes.Mistake):
            object.__setattr__(obj, attr, new)
        else:
            setattr(obj, attr, new)

    functions = _reference_functions()
    try:
        for name, fn in functions.items():
            if name not in SHIPPED_REFERENCE:
                patch(ref, name, _recorder(table, f"reference.{fn.__name__}", fn))
        for key, ex in EXERCISES.items():
            fn = ex.reference
            if functions.get(fn.__name__) is not fn:
                raise BundleError(f"{key}: its reference is not a function of grader.answers.reference")
            patch(ex, "reference", _recorder(table, f"reference.{fn.__name__}", fn))
        for name in STORED_DIAGNOSIS:
            patch(diagnosis, name, _recorder(table, f"diagnosis.{name}", getattr(diagnosis, name)))
        originals = {}
        names = _mistake_names()
        for ex in EXERCISES.values():
            for m in ex.mistakes:
                if id(m) not in originals:
                    originals[id(m)] = m.fn
                    patch(m, "fn", _recorder(table, names[id(m)], m.fn))
        answers = _load_answers()
        for key, ex in EXERCISES.items():
            students = [answers.CORRECT[key]] + [answers.student_from(key, originals[id(m)])
                                                 for m in ex.mistakes]
            for student in students:
                for focus in ex.focuses:
                    try:
                        with core._quiet():
                            core.run_check(ex, student, focus, quiet=True)
                    except core.CheckError:
                        pass
            for case in core._load_fixed(ex).values():  # the pictures' smallest cases
                inputs64 = case["inputs"]
                T = diagnosis.time_steps(key, inputs64)
                for L in sorted({2, 3, 4, T // 2}):
                    if L < T:
                        try:
                            ex.reference(*diagnosis.crop(key, inputs64, L).values())
                        except Exception:
                            pass
    finally:
        for obj, attr, old in reversed(undo):
            if isinstance(obj, mistakes.Mistake):
                object.__setattr__(obj, attr, old)
            else:
                setattr(obj, attr, old)
    return table


# --- the bundle's grader ---------------------------------------------------------------

def reference_source():
    parts = ['"""The student bundle ships no reference implementations: each function below',
             'returns its output stored for the inputs of the visible checks (grader/checks/stored.py)."""',
             "import torch", "", "from grader.checks import stored as _stored", "", ""]
    for name, fn in _reference_functions().items():
        if name in SHIPPED_REFERENCE:
            parts += [inspect.getsource(fn), ""]
        else:
            parts.append(f"{name} = _stored.function({'reference.' + fn.__name__!r})")
    return "\n".join(parts) + "\n"


def _plain(value):
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def mistakes_source():
    from grader.answers import mistakes

    names = _mistake_names()
    parts = ['"""The catalogued mistakes\' names and hints. Their code is not in the student bundle:',
             'each one\'s output on the visible checks\' inputs is stored (grader/checks/stored.py)."""',
             "from dataclasses import dataclass", "from typing import Callable", "",
             "from grader.checks import stored as _stored", "", "",
             "@dataclass(frozen=True)", "class Mistake:", "    key: str", "    name: str",
             "    hint: str", "    fn: Callable", "", ""]
    for attr, value in vars(mistakes).items():
        if attr.startswith("__") or attr == "Mistake":
            continue
        if isinstance(value, tuple) and value and all(isinstance(m, mistakes.Mistake) for m in value):
            parts.append(f"{attr} = (")
            parts += [f"    Mistake({m.key!r}, {m.name!r}, {m.hint!r}, _stored.function({names[id(m)]!r}))," for m in value]
            parts.append(")")
        elif _plain(value) and not inspect.ismodule(value):
            parts.append(f"{attr} = {value!r}")
    return "\n".join(parts) + "\n"


def diagnosis_source():
    """grader/checks/diagnosis.py with the functions that compute attention replaced by lookups."""
    path = ROOT / "grader" / "checks" / "diagnosis.py"
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    spans = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in STORED_DIAGNOSIS:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans[start] = (node.end_lineno, node.name)
    missing = set(STORED_DIAGNOSIS) - {n for _, n in spans.values()}
    if missing:
        raise BundleError(f"grader/checks/diagnosis.py has no function {sorted(missing)}")
    out, i = [], 0
    while i < len(lines):
        if i + 1 in spans:
            end, name = spans[i + 1]
            out.append(f"{name} = _stored.function({'diagnosis.' + name!r})  # not in the student bundle")
            i = end
            continue
        out.append(lines[i])
        i += 1
    text = "\n".join(out) + "\n"
    anchor = "from grader.answers import reference as ref\n"
    if anchor not in text:
        raise BundleError("grader/checks/diagnosis.py no longer imports grader.answers.reference as ref")
    return text.replace(anchor, anchor + "from grader.checks import stored as _stored\n", 1)


# --- the rest of the bundle ------------------------------------------------------------

def _requirements():
    keep = []
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        name = line.split("#")[0].strip()
        base = name.split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip().lower()
        if base in STUDENT_PACKAGES:
            keep.append(name)
    if not any(k.startswith("torch") for k in keep):
        raise BundleError("requirements.txt has no torch line")
    return "\n".join(keep) + "\n"


MAKEFILE = """\
# `make lab` installs everything into .venv (once) and opens the course in JupyterLab.
# install.mk (the course's own) installs torch and the packages of requirements.lock.
SHELL := /bin/bash
.DEFAULT_GOAL := lab
include install.mk
STAMP := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab install
lab: $(STAMP)
\t$(VENV)/bin/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks $(ROOT_FLAG)

install: $(STAMP)

$(STAMP): $(VENV)/.torch requirements.txt $(LOCK) pyproject.toml
\t$(PIP_INSTALL) -r requirements.txt
\t$(PIP) --no-deps -e .
\t$(VENV)/bin/jupyter labextension disable --level=sys_prefix $(LAB_DISABLED) >/dev/null 2>&1
\t@touch $@
"""

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "attention-course-student"
version = "0.1.0"
description = "Self-attention, built up one idea at a time: the notebooks and their checks."
requires-python = ">=3.10"
dependencies = ["torch>=2.3", "matplotlib>=3.8", "ipywidgets>=8.1", "numpy>=1.26"]

[tool.setuptools.packages.find]
include = ["grader*", "notebook_helpers*"]
"""

README = """\
# Self-attention, one idea at a time (student edition)

Notebooks 01 to 08 build self-attention up from a for-loop average to a small GPT and
attention that fits in memory. Each exercise has checks you run in the notebook: they
call your function on fixed inputs, compare with the expected outputs and, when
something is off, name the likely mistake.

    make lab        # installs everything into .venv the first time, then opens JupyterLab

Python 3.11 and `make` are all you need. The versions installed are those of
`requirements.lock`; torch is the CPU build where the machine has no NVIDIA driver (from
PyTorch's CPU wheel index when your pip does not find it; `install.mk` says how).

Then open `notebooks/01_bag_of_words/01_bag_of_words.ipynb` and work in order.

When your course grades your work, further checks with fresh sizes and seeds run as well;
they are not part of this bundle (calling a check with `hidden=True` says so).
"""


def _copy(src, dst, pattern="*"):
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.glob(pattern)):
        if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def build(dest=DEST):
    """Write the bundle to dest (replacing it); returns its path."""
    import torch

    dest = Path(dest)
    table = record()
    tmp = dest.with_name(dest.name + ".incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    _copy(ROOT / "notebooks", tmp / "notebooks", "*/*.ipynb")
    _copy(ROOT / "notebook_helpers", tmp / "notebook_helpers", "*.py")
    _copy(ROOT / "data" / "references", tmp / "data" / "references", "*.pt")
    shutil.copy2(ROOT / "data" / "corpus.txt", tmp / "data" / "corpus.txt")
    torch.save(table, tmp / "data" / stored.TABLE)
    pkg = tmp / "grader"
    for name in STUDENT_MODULES:
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "grader" / name, pkg / name)
    (pkg / "answers" / "reference.py").write_text(reference_source())
    (pkg / "answers" / "mistakes.py").write_text(mistakes_source())
    (pkg / "checks" / "diagnosis.py").write_text(diagnosis_source())
    (tmp / "requirements.txt").write_text(_requirements())
    (tmp / "Makefile").write_text(MAKEFILE)
    for name in ("install.mk", "requirements.lock"):  # installed exactly as the course is
        shutil.copy2(ROOT / name, tmp / name)
    (tmp / "pyproject.toml").write_text(PYPROJECT)
    (tmp / "README.md").write_text(README)
    (tmp / ".gitignore").write_text(".venv/\n__pycache__/\n.ipynb_checkpoints/\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEST)
    args = parser.parse_args(argv)
    dest = build(args.dest)
    files = [p for p in dest.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files) / 2**20
    print(f"student bundle: {dest} ({len(files)} files, {size:.1f} MiB); `make lab` there opens it")


if __name__ == "__main__":
    sys.exit(main())
