"""The notebooks: solutions run cleanly with their committed outputs (strict nbval), every
test cell passing; the student versions fail only in exercise cells and in every test cell
(nbval-lax); and the student versions are exactly what the release step generates from
the solutions."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.instructor import notebooks

ROOT = notebooks.ROOT
SANITIZE = Path(__file__).with_name("nbval_sanitize.cfg")
SOLUTIONS = notebooks.notebook_paths("solutions")
RELEASES = notebooks.notebook_paths("notebooks")
ids = lambda paths: [p.parent.name for p in paths]

pytestmark = pytest.mark.notebooks


# pytest in a process of its own, which can load tests/notebooks/nbval_record.py as a plugin (the
# notebook's kernel, a process of its own again, does not see tests/)
PYTEST = f"import sys, pytest; sys.path.insert(0, {str(Path(__file__).parent)!r}); sys.exit(pytest.main(sys.argv[1:]))"


# Plugins an nbval run has no use for: hypothesis's alone costs 1.4 s of CPU to load (measured:
# 2.4 s to collect a notebook with them, 0.7 s without).
UNUSED_PLUGINS = ("cacheprovider", "xdist", "xdist.looponfail", "hypothesispytest", "anyio")
NBVAL_TIMEOUT = 1800  # seconds for one folder's nine notebooks; a bound (the solutions: 43 s quiet, 87 s in a full run)


def _nbval(folder, tmp_path_factory, *args, env=()):
    """One nbval run of every notebook of `folder` (each in a kernel of its own, as nbval
    always does), in one pytest process rather than one each (about 0.7 s of CPU to start),
    with `env` added to its environment: (exit status, the output's end, nbval_record.py's record)."""
    record = tmp_path_factory.mktemp(f"nbval-{folder}") / "record.json"
    off = [arg for name in UNUSED_PLUGINS for arg in ("-p", f"no:{name}")]
    paths = SOLUTIONS if folder == "solutions" else RELEASES
    proc = subprocess.run([sys.executable, "-c", PYTEST, "-q", *off, "-p", "nbval_record", *args, *map(str, paths)],
                          cwd=ROOT, capture_output=True, text=True, timeout=NBVAL_TIMEOUT,
                          env={**os.environ, **dict(env), "NBVAL_RECORD": str(record)})
    found = json.loads(record.read_text()) if record.exists() else {}
    return proc.returncode, proc.stdout[-4000:] + proc.stderr[-2000:], found


def _run_of(nbval, path):
    """The record of one notebook in an nbval run, after checking it ran and nothing failed.
    pytest's exit status 1 is a failed test, which the record names; any other but 0 (an
    internal or usage error, an interrupted run) fails every notebook's test."""
    status, out, found = nbval
    assert status in (0, 1), f"the nbval run ended with status {status}:\n{out}"
    run = found.get(path.parent.name)
    assert run is not None, f"nbval did not run {path}:\n{out}"
    assert run["broken"] is None, run["broken"]
    assert not run["failed"], "\n\n".join(f"{cell}:\n{report}" for cell, report in run["failed"].items())
    assert run["passed"] > 0, f"no cell of {path} was run:\n{out}"
    return run


@pytest.fixture(scope="module")
def strict_nbval(tmp_path_factory):
    return _nbval("solutions", tmp_path_factory, "--nbval", "--nbval-sanitize-with", SANITIZE)


@pytest.fixture(scope="module")
def lax_nbval(tmp_path_factory):
    """The student versions run as grading runs them: in the grading kernel (a sandbox forked
    from this test process's warm template, support.templates), so that "no point for an
    unanswered exercise" is shown where points are given. The solutions' strict run keeps the
    plain kernel their metadata names, as `pytest --nbval solutions/` gives anyone. Measured:
    8.9 CPU s for the nine student versions forked warm, 21.6 s in cold kernels. Where this
    machine cannot build sandboxes, the plain kernel (the sandbox's own tests say why)."""
    from grader.isolation import namespaces
    from grader.isolation.kernelspec import KERNEL_NAME
    from support.templates import template_env

    if not namespaces.isolation_available()[0]:
        return _nbval("notebooks", tmp_path_factory, "--nbval-lax")
    return _nbval("notebooks", tmp_path_factory, "--nbval-lax", "--nbval-kernel-name", KERNEL_NAME,
                  env=template_env())


def test_every_assignment_has_a_release():
    assert ids(SOLUTIONS) == ids(RELEASES)
    assert len(SOLUTIONS) >= 1


@pytest.mark.xdist_group("nbval_strict")  # one nbval run for all of them
@pytest.mark.parametrize("path", SOLUTIONS, ids=ids(SOLUTIONS))
def test_solution_outputs_are_current_strict_nbval(path, strict_nbval):
    _run_of(strict_nbval, path)


@pytest.mark.xdist_group("nbval_lax")
@pytest.mark.parametrize("path", RELEASES, ids=ids(RELEASES))
def test_student_version_fails_only_in_exercise_cells_and_in_every_test_cell(path, lax_nbval):
    """The nbval-lax run of the student version: only cells tagged raises-exception may
    fail, and every test cell does (tests/notebooks/nbval_record.py records them): no point is
    given for an unanswered exercise."""
    raised = _run_of(lax_nbval, path)["test_cells"]
    graded = [c.metadata.nbgrader.grade_id for c in nbformat.read(path, as_version=4).cells
              if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    assert sorted(raised) == sorted(graded), lax_nbval[1]
    passing = [gid for gid, r in raised.items() if not r]
    assert passing == [], f"test cells that pass without an answer: {passing}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids(SOLUTIONS))
def test_solution_passes_every_test_cell(path):
    """The committed output of every test cell (hidden checks included) is its checks'
    pass lines; the strict nbval run above reproduces every committed output, so the
    solution passes them when run (nbgrader validate would run the notebook once more)."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    assert cells
    for cell in cells:
        kinds = [o.output_type for o in cell.outputs]
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert kinds and set(kinds) == {"stream"}, (cell.metadata.nbgrader.grade_id, kinds)
        lines = text.splitlines()
        assert lines and all(l.startswith("\u2713 ") for l in lines), (cell.metadata.nbgrader.grade_id, text)


def test_exercise_cells_are_tagged_and_graded_cells_are_quiet():
    """Test cells: tagged raises-exception, end in a statement, and have a docstring."""
    for path in SOLUTIONS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                assert "raises-exception" in cell.metadata.get("tags", []), (path, meta["grade_id"])
                lines = [l for l in cell.source.splitlines() if l.strip() and not l.startswith("###")]
                assert lines[0].startswith('"""Check'), (path, meta["grade_id"])
                assert lines[-1].startswith("check_"), (path, meta["grade_id"])  # a call, not a value
            if meta.get("solution"):
                assert "### BEGIN SOLUTION" in cell.source and '"""' in cell.source


def test_release_is_exactly_what_generation_gives(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    notebooks.generate(tmp_path)
    for path in RELEASES:
        rel = path.relative_to(ROOT)
        fresh = json.loads((tmp_path / rel).read_text())
        committed = json.loads(path.read_text())
        assert fresh == committed, f"{rel} differs from a fresh release: run `make release`"


def test_release_has_no_solutions_or_hidden_tests():
    for path in RELEASES:
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN", "hidden=True"):
            assert marker not in text, (path, marker)
        assert "raise NotImplementedError()" in text
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
        assert "widgets" not in nb.metadata, f"{path} carries the sources' widget state"


TRAINS = re.compile(r"(?<![.\w\"'])train\(|\bopt(imizer)?\.step\(")  # train(model, ...) or a step: not model.train()


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids(SOLUTIONS))
def test_cells_that_train_are_not_compared_by_value(path):
    """A model trained for a few hundred steps ends elsewhere on another CPU (its matrix
    kernels round differently, and training magnifies it: a loss of 2.37 here, 2.29 there),
    so what a cell prints after training cannot be compared digit by digit on every machine:
    such cells are tagged nbval-ignore-output (they still run, and must not fail)."""
    untagged = [i for i, cell in enumerate(nbformat.read(path, as_version=4).cells)
                if cell.cell_type == "code" and TRAINS.search(cell.source)
                and "nbval-ignore-output" not in cell.metadata.get("tags", [])
                and not cell.metadata.get("nbgrader", {}).get("solution")]
    assert not untagged, f"cells {untagged} train a model: tag them nbval-ignore-output"
