"""The student package and the student bundle: what students get, without answers.

    python -m grader.instructor.bundle --wheel [--dest dist] [--assignments NAME ...]   (make wheel)
    python -m grader.instructor.bundle [--dest dist/self-attention-student] [--assignments NAME ...]
        (make student-bundle [ASSIGNMENTS="01_bag_of_words 02_tril_matmul"])

The student package is one pure-Python wheel, attention_course_student-<version>-py3-none-any.whl,
with three packages: attention_student (the `attention-student` command, `python -m
attention_student`, which copies the notebooks into a folder the student names and opens
JupyterLab there; student/attention_student/ in the repository) with the student
notebooks; notebook_helpers (the plot and widget helpers) with the corpus; and grader,
holding the checks (grader/checks/ as it is, and the package's own top-level modules), the
fixed inputs and expected outputs of the visible checks (grader/data/references/) and
grader/data/stored_outputs.pt: the outputs, on exactly the inputs the visible checks use,
of every function of the answers (grader/answers/: the reference implementations, the
catalogued mistakes, which are near answers, and the attention with knobs that the
diagnosis turns), which the package leaves out. Its checks receive lookups of those
outputs instead (grader/checks/stored.py, through grader/checks/registry.py), so a visible
check there passes a correct answer and names a catalogued mistake exactly as in the
course repository. Not in it: solutions/, hidden tests, the answers, the grading pipeline,
the instructor's tools, tests. With assignments, it holds only those notebooks (the ones
released so far), so a later notebook's given code is not handed out early.

The student bundle (dist/self-attention-student/) is that wheel with a README (pip on any
system, or a hosted notebook service) and, for those who have make, a Makefile whose `make
lab` installs it as the course installs itself (install.mk, installer.py, requirements.lock)
and opens it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import replace
from pathlib import Path

from grader.checks import registry, stored
from grader.instructor import first_cell

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
DEST = DIST / "self-attention-student"
STUDENT_FOLDER = "checks"  # copied as it is, with the package's top-level modules
KERNEL_PACKAGES = ("numpy", "matplotlib", "ipywidgets")  # with torch: what the notebooks import
LAB_PACKAGES = ("jupyterlab",)  # the [lab] extra: what the attention-student command opens
# the [exchange] extra: nbgrader's fetch, submit and Assignment List, for a course server's
# students (the bundle's `make install EXCHANGE=1` also switches off its instructor panels)
EXCHANGE_PACKAGES = ("nbgrader",)
# nbgrader's panels that are the instructor's: off in a student's environment (nbgrader's own
# advice for students' installs), leaving Validate and the Assignment List
INSTRUCTOR_LAB_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                          "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")


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


def record(progress=None):
    """{call key: stored entry} for every call the visible checks make to a function of
    the answers, running each check on a correct answer and on every catalogued mistake,
    plus the reference on every crop a failing check may show; and under stored.LISTING,
    what was stored. progress(text), if given, hears of each exercise as it starts."""
    from grader.answers import correct as students, course_answers
    from grader.checks import core, diagnosis
    from grader.checks.exercises import EXERCISES

    table = {}
    course = course_answers()
    recording, table[stored.LISTING] = _recording(table, course)
    with registry.using(recording):
        for n, (key, ex) in enumerate(EXERCISES.items(), 1):
            wrong = [students.student_from(key, m.fn) for m in course.mistakes.get(key, ())]
            if progress:
                progress(f"recording the visible checks: exercise {n}/{len(EXERCISES)} {key} "
                         f"({len(ex.focuses)} focuses on the answer and {len(wrong)} catalogued mistakes)")
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


# --- the student package (a wheel) ------------------------------------------------------

def _requirement(name):
    """requirements.txt's line for a package (its range, which the lock's version is in)."""
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        req = line.split("#")[0].strip()
        if re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower() == name:
            return req
    raise BundleError(f"requirements.txt has no {name} line")


def dependencies():
    """(what the notebooks' kernel needs, what the lab adds, what the exchange adds): the ranges of
    requirements.txt, except torch, which is any build of a version the checks work with
    (pyproject.toml's minimum): a CPU build, a CUDA build, or the one a hosted notebook
    service already has."""
    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(d for d in course if re.match(r"torch\b", d))
    return ([torch] + [_requirement(n) for n in KERNEL_PACKAGES], [_requirement(n) for n in LAB_PACKAGES],
            [_requirement(n) for n in EXCHANGE_PACKAGES])


def packages():
    """The import packages of the wheel: grader's (those of the student files), the helpers
    and the command."""
    folders = {str(Path("grader", name).parent) for name in student_files()}
    grader_packages = sorted(f.replace(os.sep, ".") for f in folders if (ROOT / f / "__init__.py").exists())
    return ["attention_student", *grader_packages, "notebook_helpers"]


def pyproject(assignments):
    kernel, lab, exchange = dependencies()
    quoted = lambda items: ", ".join(f'"{i}"' for i in items)  # noqa: E731
    return f"""\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{first_cell.DISTRIBUTION}"
version = "{first_cell.VERSION}"
description = "Self-attention, one idea at a time: the notebooks ({len(assignments)}), their checks and helpers, without answers."
readme = "README.md"
requires-python = ">=3.10"
# torch: any build (the CPU build where there is no NVIDIA GPU; see the README)
dependencies = [{quoted(kernel)}]

[project.optional-dependencies]
# `pip install "{first_cell.DISTRIBUTION}[lab]"`: with JupyterLab, for the attention-student command
lab = [{quoted(lab)}]
# `pip install "{first_cell.DISTRIBUTION}[lab,exchange]"`: with nbgrader, on a course server
exchange = [{quoted(exchange)}]

[project.scripts]
attention-student = "attention_student.launch:main"

[tool.setuptools]
packages = [{quoted(packages())}]
include-package-data = false

[tool.setuptools.package-data]
grader = ["data/*.pt", "data/references/*.pt"]
notebook_helpers = ["data/*.txt"]
attention_student = ["notebooks/*/*.ipynb"]
"""


PACKAGE_README = """\
# Self-attention, one idea at a time: the student package

The course's notebooks, the checks they run and their plot and widget helpers. The
checks call your function on fixed inputs, compare with the expected outputs and, when
something is off, name the likely mistake. The answers are not in this package.

    attention-student my-course        # or: python -m attention_student my-course

copies the notebooks into `my-course/` (a notebook already there is never overwritten)
and opens JupyterLab there. `--no-browser` prints the address instead of opening a
browser; `--port N` picks the port; `attention-student --help` says the rest.

Install it with JupyterLab (`pip install "attention_course_student-...whl[lab]"`; `[lab,exchange]`
adds nbgrader, for a course server). On
Linux without an NVIDIA GPU, install PyTorch's CPU build first, which is much smaller
than PyPI's default (CUDA) build:

    pip install torch --index-url https://download.pytorch.org/whl/cpu

or let uv choose the build for the machine: `uv pip install --torch-backend=auto ...`.
"""


def _copy_files(paths, src, dst):
    for path in paths:
        target = dst / Path(path).relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def stage(tree, chosen, table, progress=print):
    """Lay out the student package's source tree in tree: grader (the student files, with
    the references and stored outputs in grader/data/), notebook_helpers (with the corpus),
    attention_student (the command, with the notebooks)."""
    grader_files = [ROOT / "grader" / name for name in student_files()]
    _copy_files(grader_files, ROOT / "grader", tree / "grader")
    references = sorted((ROOT / "data" / "references").glob("*.pt"))
    _copy_files(references, ROOT / "data" / "references", tree / "grader" / "data" / "references")
    torch_save(table, tree / "grader" / "data" / stored.TABLE)
    helpers = sorted((ROOT / "notebook_helpers").glob("*.py"))
    _copy_files(helpers, ROOT / "notebook_helpers", tree / "notebook_helpers")
    (tree / "notebook_helpers" / "data").mkdir()
    shutil.copy2(ROOT / "data" / "corpus.txt", tree / "notebook_helpers" / "data" / "corpus.txt")
    launcher = sorted((ROOT / "student" / "attention_student").glob("*.py"))
    _copy_files(launcher, ROOT / "student" / "attention_student", tree / "attention_student")
    _copy_files(chosen, ROOT / "notebooks", tree / "attention_student" / "notebooks")
    assignments = sorted({p.parent.name for p in chosen})
    (tree / "pyproject.toml").write_text(pyproject(assignments))
    (tree / "README.md").write_text(PACKAGE_README)
    progress(f"student package: {len(chosen)} notebooks, {len(grader_files)} files of the checks, "
             f"{len(references)} reference files, {len(table) - 1} stored outputs, {len(helpers)} helper modules")


def torch_save(obj, path):
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path)


def build_wheel(tree, out):
    """setuptools' own build (PEP 517) of the staged tree into out; returns the wheel's path.
    Its files carry the date of the course's last commit, so the same sources give the same
    wheel."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH=_source_date())
    code = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=tree, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BundleError(f"building the wheel failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return out / proc.stdout.strip().splitlines()[-1]


def _source_date():
    proc = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "315532800"  # 1980


def released_notebooks(assignments=None):
    """The student notebooks the package holds: every one, or those of assignments (names
    such as 05_scaled_attention), in course order."""
    available = sorted(p.parent.name for p in (ROOT / "notebooks").glob("*/*.ipynb"))
    unknown = sorted(set(assignments or ()) - set(available))
    if unknown:
        raise BundleError(f"no student notebook for {', '.join(unknown)}; the assignments are "
                          f"{', '.join(available)}")
    chosen = sorted(set(assignments)) if assignments else available
    return [path for name in chosen for path in sorted((ROOT / "notebooks" / name).glob("*.ipynb"))]


def wheel(dest=DIST, assignments=None, progress=print, table=None):
    """Build the student package's wheel into dest (a wheel of the same name there is
    replaced); returns its path."""
    dest = Path(dest)
    chosen = released_notebooks(assignments)  # a wrong name stops here, before anything is written
    table = record(progress) if table is None else table
    with tempfile.TemporaryDirectory(prefix="student-package-") as tmp:
        tree = Path(tmp) / "src"
        stage(tree, chosen, table, progress)
        progress("student package: building the wheel (setuptools)")
        built = build_wheel(tree, Path(tmp) / "out")
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / built.name
        shutil.move(built, target)
    progress(f"student package: {target} ({target.stat().st_size / 2**20:.1f} MiB)")
    return target


# --- the student bundle: the wheel, a README, and `make lab` for those who have make ------

BUNDLE_MAKEFILE = """\
# `make lab` installs the course into .venv (once) and opens it in JupyterLab, with your own
# copies of the notebooks in notebooks/ (never overwritten); `make help` lists the rest.
# install.mk and installer.py are the course's own: they install torch (the CPU build where
# there is no NVIDIA driver) and the packages at the versions of requirements.lock.
SHELL := /bin/bash
.DEFAULT_GOAL := lab
INSTALLER_PY := installer.py
include install.mk
INSTRUCTOR_PLUGINS := {plugins}
INSTRUCTOR_EXTENSIONS := {extensions}
WHEEL := $(firstword $(wildcard attention_course_student-*.whl))
PORT ?= 8888
LAB_OPTS ?=
FOLDER ?= notebooks
# EXCHANGE=1: the environment of a course server's students (see the README): nbgrader too,
# with its instructor panels switched off
EXCHANGE ?=
comma := ,
EXTRAS := lab$(if $(EXCHANGE),$(comma)exchange)
STAMP := $(VENV)/.installed$(if $(EXCHANGE),-exchange)

.PHONY: lab install clean help

## Open the course in JupyterLab (installs it the first time). PORT=8889, LAB_OPTS="--no-browser".
lab: $(STAMP)
\t$(VENV)/bin/attention-student "$(FOLDER)" --port $(PORT) -- $(LAB_OPTS)

## Install everything into .venv (make lab does it when needed); EXCHANGE=1 with nbgrader, for a course server.
install: $(STAMP)

$(STAMP): $(VENV)/.torch $(WHEEL) $(LOCK) $(INSTALLER_PY)
\t@$(SETUP) packages --wheel "$(WHEEL)[$(EXTRAS)]" --remove $(UNUSED) --compile
\t@$(VENV)/bin/jupyter labextension disable --level=sys_prefix $(LAB_DISABLED) >/dev/null 2>&1
ifneq ($(EXCHANGE),)
\t@echo "==> nbgrader's instructor panels off (Formgrader, Create Assignment, Courses)"
\t@$(VENV)/bin/jupyter labextension disable --level=sys_prefix $(INSTRUCTOR_PLUGINS)
\t@$(VENV)/bin/jupyter server extension disable --sys-prefix $(INSTRUCTOR_EXTENSIONS)
endif
\t@touch $@

## Remove .venv (to install again from scratch); your notebooks in notebooks/ stay.
clean:
\trm -rf $(VENV)

## List the commands.
help:
\t@awk '/^## / { doc = substr($$0, 4); next } /^[a-z][a-z-]*:/ { if (doc) { split($$0, t, ":"); \\
\t     printf "  make %-8s %s\\n", t[1], doc } } { doc = "" }' $(MAKEFILE_LIST)
"""

BUNDLE_README = """\
# Self-attention, one idea at a time (student edition)

The course's notebooks build self-attention up from a for-loop average to a small GPT,
attention that fits in memory and attention as today's models use it; this edition holds
{notebooks}. Each exercise has checks you run in the notebook: they call
your function on fixed inputs, compare with the expected outputs and, when something is
off, name the likely mistake. The answers are not here.

Everything is in one Python package, `{wheel}`. You need Python 3.10 or newer.

## With pip (Windows, macOS, Linux)

In a terminal (on Windows: PowerShell or the Command Prompt), in this folder:

    python -m venv .venv
    .venv\\Scripts\\activate                    (Windows)
    source .venv/bin/activate                 (macOS, Linux)
    pip install "{wheel}[lab]" -c requirements.lock
    attention-student notebooks

The last command copies the notebooks into `notebooks/` and opens JupyterLab there. Run it
again whenever you come back (after activating `.venv`): a notebook already in
`notebooks/` is never overwritten, so your work stays. `python -m attention_student
notebooks` does the same; `--no-browser` prints the address instead of opening a browser.

**Linux without an NVIDIA GPU:** before the `pip install` line, install PyTorch's CPU
build, which is a fraction of the size of PyPI's default (CUDA) build:

    pip install "torch=={torch}+cpu" --extra-index-url https://download.pytorch.org/whl/cpu -c requirements.lock

## With make (macOS, Linux)

    make lab        # installs everything into .venv the first time, then opens JupyterLab

It does the steps above (with uv, which is faster, given the extra package sources your
pip configuration names; with pip where that configuration replaces PyPI) and gets the CPU
build of torch itself where there is no NVIDIA driver; if PyTorch's CPU index cannot be
reached it stops and says so rather than download the CUDA build. `make lab PORT=8889`, `make lab LAB_OPTS="--no-browser"`; `make
clean` removes `.venv` to install again (your notebooks stay); `make help` lists it all.

## On a hosted notebook service (Colab, Kaggle, ...)

Upload a notebook and `{wheel}` into the same folder (on Colab: the notebook with File >
Upload notebook, the wheel into the Files panel on the left) and run the notebook from the
top: its first cell installs the package from the wheel where it is missing (`%pip
install`, with pip's progress), and does nothing anywhere else. The service's own torch is
used.

## On a course server (for instructors)

The environment a course server's students share, with nbgrader's fetch, submit and
Assignment List (its Formgrader, Create Assignment and Courses panels switched off): in a
copy of this folder readable by the students (such as `/opt/self-attention`), `make install
EXCHANGE=1`. Students then activate `.venv` and use `nbgrader fetch_assignment`, `jupyter
lab` and `nbgrader submit` as the course's README says.

When your course grades your work, further checks with fresh sizes and seeds run as well;
they are not part of this package (calling a check with `hidden=True` says so).
"""


def build(dest=DEST, assignments=None, progress=print):
    """Write the student bundle to dest (replacing it): the student package's wheel, a
    README, and a Makefile whose `make lab` installs and opens it; returns its path."""
    dest = Path(dest)
    released_notebooks(assignments)  # a wrong name stops here, before anything is written
    tmp = dest.with_name(dest.name + ".incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    built = wheel(tmp, assignments, progress)
    torch_version = _locked_torch()
    names = sorted({p.parent.name for p in released_notebooks(assignments)})
    notebooks = f"notebook {names[0]}" if len(names) == 1 else f"{len(names)} notebooks, {names[0]} to {names[-1]}"
    (tmp / "README.md").write_text(BUNDLE_README.format(wheel=built.name, torch=torch_version, notebooks=notebooks))
    (tmp / "Makefile").write_text(BUNDLE_MAKEFILE.replace("{plugins}", " ".join(INSTRUCTOR_LAB_PLUGINS))
                                  .replace("{extensions}", " ".join(INSTRUCTOR_SERVER_EXTENSIONS)))
    shutil.copy2(ROOT / "install.mk", tmp / "install.mk")
    shutil.copy2(ROOT / "requirements.lock", tmp / "requirements.lock")
    shutil.copy2(ROOT / "student" / "attention_student" / "installer.py", tmp / "installer.py")
    (tmp / ".gitignore").write_text(".venv/\nnotebooks/\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def _locked_torch():
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.startswith("torch=="):
            return line.split("==", 1)[1].strip()
    raise BundleError("requirements.lock has no torch line")


def _say(text):
    print(text, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", action="store_true",
                        help=f"only the student package's wheel, into --dest (default {DIST.relative_to(ROOT)})")
    parser.add_argument("--dest", type=Path)
    parser.add_argument("--assignments", nargs="*", default=[],
                        help="only these notebooks (the ones released so far); default: all")
    args = parser.parse_args(argv)
    names = [n for arg in args.assignments for n in arg.replace(",", " ").split()]
    try:
        if args.wheel:
            path = wheel(args.dest or DIST, names, _say)
            print(f"student package: {path}; `pip install \"{path}[lab]\"`, then `attention-student FOLDER`")
            return 0
        dest = build(args.dest or DEST, names, _say)
    except BundleError as err:
        raise SystemExit(f"student bundle: {err}") from None
    files = [p for p in dest.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files) / 2**20
    print(f"student bundle: {dest} ({len(files)} files, {size:.1f} MiB); its README says how to "
          "install it, `make lab` there installs and opens it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
