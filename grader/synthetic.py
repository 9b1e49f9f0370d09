"""Synthetic submissions, built from the release and the solutions, for the pipeline's
tests and benchmark. Each variant is a student's notebook with one thing changed."""
import json
import re
import shutil
from pathlib import Path

import nbformat

from grader import pipeline


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
    """Replace the body of the first function in src (after its one-line docstring)."""
    lines = src.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("def "))
    keep = i + 1 if lines[i + 1].strip().startswith('"""') else i
    return "\n".join(lines[: keep + 1] + ["    " + l for l in new_body.splitlines()])


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
