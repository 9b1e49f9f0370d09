"""The student bundle: what students get, without answers.

    python -m grader.instructor.bundle [--dest dist/self-attention-student] [--assignments NAME ...]
        (make student-bundle [ASSIGNMENTS="01_bag_of_words 02_tril_matmul"])

The bundle holds the student notebooks, the plot and widget helpers, the corpus, the
checks (grader/checks/ as it is, and the package's own top-level modules) with the fixed
inputs and expected outputs of the visible checks (data/references/), and
data/stored_outputs.pt: the outputs, on exactly the inputs the visible checks use, of
every function of the answers (grader/answers/: the reference implementations, the
catalogued mistakes, which are near answers, and the attention with knobs that the
diagnosis turns), which the bundle leaves out. Its checks receive lookups of those
outputs instead (grader/checks/stored.py, through grader/checks/registry.py), so a
visible check in the bundle passes a correct answer and names a catalogued mistake
exactly as in the course repository. Not in the bundle: solutions/, hidden tests, the
answers, the grading pipeline, the instructor's tools, tests. With assignments, it holds
only those notebooks (the ones released so far), so a later notebook's given code is not
handed out early. `make lab` in the bundle installs and opens it.
"""
import argparse
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from grader.checks import registry, stored

ROOT = Path(__file__).resolve().parents[2]
DEST = ROOT / "dist" / "self-attention-student"
STUDENT_FOLDER = "checks"  # copied as it is, with the package's top-level modules
STUDENT_PACKAGES = ("torch", "jupyterlab", "ipywidgets", "matplotlib", "numpy", "traitlets")


class BundleError(RuntimeError):
    pass


def student_files():
    """The files of grader/ that the bundle ships, relative to grader/."""
    package = ROOT / "grader"
    top = sorted(p.name for p in package.glob("*.py"))
    folder = sorted(p.relative_to(package).as_posix() for p in (package / STUDENT_FOLDER).rglob("*.py")
                    if "__pycache__" not in p.parts)
    return top + folder


# --- which functions are stored, under which names ------------------------------------

def _mistake_names():
    """{id(Mistake): stored name}; a mistake shared by two exercises has one name."""
    from grader.answers import mistakes

    names = {}
    for attr, value in vars(mistakes).items():
        if isinstance(value, tuple) and value and all(isinstance(m, registry.Mistake) for m in value):
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
    short = name.rsplit(".", 1)[-1]  # a functools.partial has no name of its own
    recorded.__name__ = getattr(fn, "__name__", short)
    recorded.__qualname__ = getattr(fn, "__qualname__", recorded.__name__)
    return recorded


def _recording(table, course):
    """The course's answers, each function recording its outputs into table, and the
    listing the bundle's checks rebuild their answers from (stored.stored_answers)."""
    names = _mistake_names()
    reference = {n: _recorder(table, f"reference.{n}", fn) for n, fn in course.reference.items()}
    knobs = {n: _recorder(table, f"knobs.{n}", fn) for n, fn in course.knobs.items()}
    mistakes = {key: tuple(replace(m, fn=_recorder(table, names[id(m)], m.fn)) for m in catalogue)
                for key, catalogue in course.mistakes.items()}
    listing = {"reference": sorted(reference), "knobs": sorted(knobs),
               "mistakes": {key: [(names[id(m)], m.key, m.name, m.hint) for m in catalogue]
                            for key, catalogue in course.mistakes.items()}}
    return registry.Answers(reference=reference, mistakes=mistakes, knobs=knobs), listing


def record():
    """{call key: stored entry} for every call the visible checks make to a function of
    the answers, running each check on a correct answer and on every catalogued mistake,
    plus the reference on every crop a failing check may show; and under stored.LISTING,
    what was stored."""
    from grader.answers import correct as students, course_answers
    from grader.checks import core, diagnosis
    from grader.checks.exercises import EXERCISES

    table = {}
    course = course_answers()
    recording, table[stored.LISTING] = _recording(table, course)
    with registry.using(recording):
        for key, ex in EXERCISES.items():
            wrong = [students.student_from(key, m.fn) for m in course.mistakes.get(key, ())]
            for student in [students.CORRECT[key]] + wrong:
                for focus in ex.focuses:
                    try:
                        with core._quiet():
                            core.run_check(ex, student, focus, quiet=True)
                    except core.CheckError:
                        pass
            for case in core._load_fixed(ex).values():  # the pictures' smallest cases
                inputs64 = case["inputs"]
                T = diagnosis.time_steps(ex, inputs64)
                for L in sorted({2, 3, 4, T // 2}):
                    if L < T:
                        try:
                            ex.reference(*diagnosis.crop(ex, inputs64, L).values())
                        except Exception:
                            pass
    return table


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
\t$(REMOVE_UNUSED)
\t$(COMPILE)
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


def released_notebooks(assignments=None):
    """The student notebooks the bundle holds: every one, or those of assignments (names
    such as 05_scaled_attention), in course order."""
    available = sorted(p.parent.name for p in (ROOT / "notebooks").glob("*/*.ipynb"))
    unknown = sorted(set(assignments or ()) - set(available))
    if unknown:
        raise BundleError(f"no student notebook for {', '.join(unknown)}; the assignments are "
                          f"{', '.join(available)}")
    chosen = sorted(set(assignments)) if assignments else available
    return [path for name in chosen for path in sorted((ROOT / "notebooks" / name).glob("*.ipynb"))]


def build(dest=DEST, assignments=None):
    """Write the bundle to dest (replacing it), with every student notebook or those of
    assignments; returns its path."""
    import torch

    dest = Path(dest)
    chosen = released_notebooks(assignments)  # a wrong name stops here, before anything is written
    table = record()
    tmp = dest.with_name(dest.name + ".incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    for path in chosen:
        (tmp / "notebooks" / path.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, tmp / "notebooks" / path.parent.name / path.name)
    _copy(ROOT / "notebook_helpers", tmp / "notebook_helpers", "*.py")
    _copy(ROOT / "data" / "references", tmp / "data" / "references", "*.pt")
    shutil.copy2(ROOT / "data" / "corpus.txt", tmp / "data" / "corpus.txt")
    torch.save(table, tmp / "data" / stored.TABLE)
    for name in student_files():
        target = tmp / "grader" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "grader" / name, target)
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
    parser.add_argument("--assignments", nargs="*", default=[],
                        help="only these notebooks (the ones released so far); default: all")
    args = parser.parse_args(argv)
    names = [n for arg in args.assignments for n in arg.replace(",", " ").split()]
    try:
        dest = build(args.dest, names)
    except BundleError as err:
        raise SystemExit(f"student bundle: {err}") from None
    files = [p for p in dest.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files) / 2**20
    print(f"student bundle: {dest} ({len(files)} files, {size:.1f} MiB); `make lab` there opens it")


if __name__ == "__main__":
    sys.exit(main())
