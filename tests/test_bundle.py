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

from grader.answers import course_answers
from grader.checks import stored
from grader.instructor import bundle, notebooks

pytestmark = pytest.mark.xdist_group("bundle")  # one build (about 10 s of CPU) for the whole module

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
    assert shipped == set(bundle.student_files()) and "checks/diagnosis/analysis.py" in shipped
    assert not (built / "grader" / "answers").exists()
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
    course = course_answers()
    for fn in [*course.reference.values(), *course.knobs.values()]:
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
    # no function of the answers is defined anywhere in the bundle's grader
    defined = {n.name for path in (built / "grader").rglob("*.py")
               for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
    answer_names = {fn.__name__ for fn in [*course.reference.values(), *course.knobs.values()]}
    assert not defined & (answer_names - {"forward"}), defined & answer_names


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
    assert report["answers_from"] == ["grader.checks.stored"]  # lookups, never the course's answers


def test_every_function_of_the_answers_is_stored(built):
    """The bundle's checks rebuild their answers from the table's listing: every reference
    function, every catalogued mistake (name and hint) and the diagnosis' attention."""
    listing = torch.load(built / "data" / "stored_outputs.pt", weights_only=True)[stored.LISTING]
    course = course_answers()
    assert listing["reference"] == sorted(course.reference)
    assert listing["knobs"] == sorted(course.knobs)
    assert {key: [(k, name, hint) for _, k, name, hint in catalogue]
            for key, catalogue in listing["mistakes"].items()} == {
        key: [(m.key, m.name, m.hint) for m in catalogue] for key, catalogue in course.mistakes.items()}


def test_a_bundle_of_the_notebooks_released_so_far_holds_only_those():
    chosen = bundle.released_notebooks(["02_tril_matmul", "01_bag_of_words"])
    assert [p.parent.name for p in chosen] == ["01_bag_of_words", "02_tril_matmul"]
    assert all(p.is_file() and p.parent.parent == REPO / "notebooks" for p in chosen)
    assert len(bundle.released_notebooks()) == len(notebooks.notebook_paths("notebooks"))


def test_a_wrong_assignment_name_stops_the_bundle_before_anything_is_written(tmp_path):
    dest = tmp_path / "self-attention-student"
    with pytest.raises(bundle.BundleError, match=r"no student notebook for 09_nothing; the assignments are 01_bag_of_words"):
        bundle.build(dest, ["01_bag_of_words", "09_nothing"])
    assert not list(tmp_path.iterdir())
    proc = subprocess.run([sys.executable, "-m", "grader.instructor.bundle", "--dest", str(dest),
                           "--assignments", "01_bag_of_words,9"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode != 0 and "student bundle: no student notebook for 9" in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.iterdir())
