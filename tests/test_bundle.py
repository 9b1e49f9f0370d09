"""The student bundle (make student-bundle): nothing in it reveals an answer, and every
visible check in it still passes a correct answer and names every catalogued mistake."""
import ast
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from grader.instructor import bundle, notebooks
from grader.answers import reference

REPO = Path(__file__).resolve().parent.parent
TOP_LEVEL = {"README.md", "Makefile", "install.mk", "pyproject.toml", "requirements.txt",
             "requirements.lock", ".gitignore", "notebooks", "notebook_helpers", "data", "grader"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return bundle.build(tmp_path_factory.mktemp("dist") / "self-attention-student")


def _text_files(root):
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix != ".pt":
            yield path, path.read_text()


def test_the_bundle_holds_what_students_need_and_nothing_of_the_instructors(built):
    assert {p.name for p in built.iterdir()} == TOP_LEVEL
    shipped = {p.relative_to(built / "grader").as_posix() for p in (built / "grader").rglob("*.py")}
    assert shipped == set(bundle.STUDENT_MODULES) | {"answers/reference.py", "answers/mistakes.py",
                                                      "checks/diagnosis.py"}
    for path in notebooks.notebook_paths("notebooks"):  # the student versions, unchanged
        assert (built / path.relative_to(REPO)).read_bytes() == path.read_bytes()
    assert (built / "data" / "corpus.txt").exists()
    assert "pytest" not in (built / "requirements.txt").read_text()
    table = torch.load(built / "data" / "stored_outputs.pt", weights_only=True)
    assert table and all(isinstance(k, str) for k in table)


def test_the_bundle_installs_as_the_course_does_from_the_same_lock(built, tmp_path):
    for name in ("install.mk", "requirements.lock"):
        assert (built / name).read_bytes() == (REPO / name).read_bytes(), name
    locked = {line.split("==")[0].lower() for line in (REPO / "requirements.lock").read_text().splitlines()
              if line and not line.startswith("#")}
    wanted = [re.split(r"[<>=\[]", line)[0].lower() for line in (built / "requirements.txt").read_text().split()]
    assert "torch" in wanted and set(wanted) <= locked
    # what `make lab` runs there on a machine without an NVIDIA driver (-n: printed, not run)
    venv = tmp_path / "venv"
    plan = subprocess.run(["make", "-n", "lab", f"VENV={venv}", "NVIDIA_DRIVER="], cwd=built,
                          capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    version = next(line.split("==")[1] for line in (REPO / "requirements.lock").read_text().splitlines()
                   if line.startswith("torch=="))
    assert f'--index-url "https://download.pytorch.org/whl/cpu" "torch=={version}+cpu"' in plan.stdout
    assert "--constraint requirements.lock -r requirements.txt" in plan.stdout
    assert "jupyter lab" in plan.stdout


def test_no_solution_hidden_test_or_reference_code_is_in_the_bundle(built):
    texts = dict(_text_files(built))
    for path, text in texts.items():
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, (path, marker)
        if path.suffix == ".ipynb":
            assert "hidden=True" not in text, path  # no hidden check in a student notebook
    # the code of every solution cell, and of every reference implementation
    answers = []
    for path in notebooks.notebook_paths("solutions"):
        for cell in nbformat.read(path, as_version=4).cells:
            for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S):
                answers.append(block)
    for name, fn in bundle._reference_functions().items():
        if name not in bundle.SHIPPED_REFERENCE:
            body = ast.parse(inspect.getsource(fn)).body[0].body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            answers.append("\n".join(ast.unparse(node) for node in body))
    assert len(answers) > 20
    squash = lambda s: re.sub(r"\s+", "", s)
    everything = squash("".join(texts.values()))
    given = squash("".join(path.read_text() for path in notebooks.notebook_paths("notebooks")))
    for block in answers:
        if len(squash(block)) > 20 and squash(block) not in given:  # given code may appear
            assert squash(block) not in everything, block
    # the stand-ins: no function body left in reference.py (but the given causal_mask),
    # none in mistakes.py, and the diagnosis' attention is a lookup
    defs = lambda p: {n.name for n in ast.walk(ast.parse((built / "grader" / p).read_text()))
                      if isinstance(n, ast.FunctionDef)}
    assert defs("answers/reference.py") == set(bundle.SHIPPED_REFERENCE)
    assert defs("answers/mistakes.py") == set()
    assert not defs("checks/diagnosis.py") & set(bundle.STORED_DIAGNOSIS)


def test_every_visible_check_in_the_bundle_passes_the_answer_and_names_the_mistakes(built):
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "bundle_probe.py"), str(built), str(REPO)],
                          cwd=built, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(report["grader"]).is_relative_to(built)
    assert len(report["correct"]) > 50 and len(report["named"]) > 80
    assert {k: v for k, v in report["correct"].items() if v is not True} == {}
    assert {k: v for k, v in report["named"].items() if v is not True} == {}
    assert "values differ from the reference" in report["unknown_wrong_answer"]
    assert "NotShipped" in report["hidden"] and "graded" in report["hidden"]


def test_every_reference_implementation_is_stored_or_shipped_on_purpose():
    """A new reference function is left out of the bundle unless it is listed as given."""
    names = set(bundle._reference_functions())
    assert set(bundle.SHIPPED_REFERENCE) <= names
    assert names - set(bundle.SHIPPED_REFERENCE), "nothing would be stored"
    assert all(getattr(reference, n).__module__ == "grader.answers.reference" for n in names)


def test_the_student_side_imports_nothing_of_the_instructors_tools():
    """What students' kernels run and the bundle ships (bundle.STUDENT_MODULES) imports
    only itself, and the answers that the bundle replaces by stored outputs."""
    allowed = {"checks", "answers"}
    for name in [*bundle.STUDENT_MODULES, "checks/diagnosis.py"]:
        tree = ast.parse((REPO / "grader" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("grader"):
                found = [node.module.split(".")[1]] if "." in node.module else [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name.split(".")[1] for a in node.names if a.name.startswith("grader.")]
            else:
                continue
            assert set(found) <= allowed, f"grader/{name} imports grader.{found}"
