"""The student package (make wheel) and the student bundle (make student-bundle): nothing in
either reveals an answer, every visible check in the package still passes a correct answer
and names every catalogued mistake, and the bundle's own commands (its README, its Makefile)
work as they say."""
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
from grader.instructor import bundle, first_cell, notebooks
from support.paths import ROOT

pytestmark = pytest.mark.xdist_group("bundle")  # one build (conftest's student_bundle) for this and test_student_install

REPO = ROOT
TOP_LEVEL = {"README.md", "Makefile", "install.mk", "installer.py", "requirements.lock", ".gitignore"}
PACKAGES = {"attention_student", "grader", "notebook_helpers"}


@pytest.fixture(scope="module")
def built(student_bundle):
    return student_bundle[0]


@pytest.fixture(scope="module")
def wheel(student_bundle):
    return student_bundle[1]


@pytest.fixture(scope="module")
def unpacked(student_bundle):
    """The wheel's files, as pip puts them into site-packages."""
    return student_bundle[2]


def _text_files(root):
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix not in (".pt", ".whl"):  # the wheel: checked unpacked
            yield path, path.read_text()


def test_the_package_holds_what_students_need_and_nothing_of_the_instructors(unpacked, wheel):
    info = next(unpacked.glob("*.dist-info"))
    assert {p.name for p in unpacked.iterdir()} == PACKAGES | {info.name}
    assert wheel.name == f"attention_course_student-{first_cell.VERSION}-py3-none-any.whl"  # pure Python
    shipped = {p.relative_to(unpacked / "grader").as_posix() for p in (unpacked / "grader").rglob("*.py")}
    assert shipped == set(bundle.student_files()) and "checks/diagnosis/analysis.py" in shipped
    assert not (unpacked / "grader" / "answers").exists() and not (unpacked / "grader" / "instructor").exists()
    released = notebooks.notebook_paths("notebooks")
    packaged = sorted((unpacked / "attention_student" / "notebooks").glob("*/*.ipynb"))
    assignments = {p.parent.name for p in notebooks.notebook_paths("solutions")}
    assert len(packaged) == len(released) == len(assignments) >= 9  # every assignment, 09 too
    assert {p.parent.name for p in packaged} == assignments
    for path in released:  # the student versions, unchanged
        assert (unpacked / "attention_student" / path.relative_to(REPO)).read_bytes() == path.read_bytes()
    assert (unpacked / "notebook_helpers" / "data" / "corpus.txt").read_bytes() == (REPO / "data" / "corpus.txt").read_bytes()
    references = {p.name for p in (unpacked / "grader" / "data" / "references").glob("*.pt")}
    assert references == {p.name for p in (REPO / "data" / "references").glob("*.pt")}
    table = torch.load(unpacked / "grader" / "data" / "stored_outputs.pt", weights_only=True)
    assert table and all(isinstance(k, str) for k in table)
    metadata = (info / "METADATA").read_text()
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert "torch>=2.3" in requires  # any build: no CUDA build pinned, none named
    assert not [r for r in requires if re.match(r"(nvidia|triton|pytest|dask)", r)], requires
    assert any(r.startswith("jupyterlab") and 'extra == "lab"' in r for r in requires), requires
    # nbgrader only with the course server's extra (fetch, submit, the Assignment List)
    assert [r for r in requires if r.startswith("nbgrader")] == ['nbgrader<0.10,>=0.9.6; extra == "exchange"'], requires
    assert "attention-student = attention_student.launch:main" in (info / "entry_points.txt").read_text()


def test_the_bundle_is_the_package_with_its_readme_and_make_lab(built, wheel):
    assert {p.name for p in built.iterdir()} == TOP_LEVEL | {wheel.name}
    for name in ("install.mk", "requirements.lock"):  # installed exactly as the course is
        assert (built / name).read_bytes() == (REPO / name).read_bytes(), name
    assert (built / "installer.py").read_bytes() == (REPO / "student" / "attention_student" / "installer.py").read_bytes()
    readme = (built / "README.md").read_text()
    assert f'pip install "{wheel.name}[lab]" -c requirements.lock' in readme
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in readme and "make lab" in readme


def test_every_make_target_the_bundle_names_exists(built, tmp_path):
    """Its README, Makefile and installer name only targets its Makefile has (`make clean`
    too); make lab takes PORT and LAB_OPTS; nothing is built beside the notebooks."""
    listing = subprocess.run(["make", "-s", "help"], cwd=built, capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr
    targets = {line.split()[1] for line in listing.stdout.splitlines()}
    assert {"lab", "install", "clean", "help", "torch"} <= targets, listing.stdout
    texts = "".join((built / n).read_text() for n in ("README.md", "Makefile", "installer.py", "install.mk"))
    named = set(re.findall(r"`make ([a-z][a-z-]*)", texts)) | set(re.findall(r"\bmake ([a-z][a-z-]*) ", texts))
    assert named and named <= targets, named - targets
    venv = tmp_path / "venv"
    plan = subprocess.run(["make", "-n", "lab", f"VENV={venv}", "NVIDIA_DRIVER=", "PORT=8123",
                           "LAB_OPTS=--no-browser --ServerApp.token=x"], cwd=built, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    assert "installer.py --venv" in plan.stdout and f'--wheel "{next(built.glob("*.whl")).name}[lab]"' in plan.stdout
    assert f'attention-student "notebooks" --port 8123 -- --no-browser --ServerApp.token=x' in plan.stdout
    assert "-e " not in plan.stdout and "egg-info" not in plan.stdout  # the wheel, never an editable build
    assert "[lab]" in plan.stdout and "exchange" not in plan.stdout and "server extension" not in plan.stdout
    # a course server's environment: nbgrader too, with its instructor panels off (Validate and
    # the Assignment List stay)
    server = subprocess.run(["make", "-n", "install", f"VENV={venv}", "NVIDIA_DRIVER=", "EXCHANGE=1"], cwd=built,
                            capture_output=True, text=True)
    assert server.returncode == 0, server.stderr
    assert f'--wheel "{next(built.glob("*.whl")).name}[lab,exchange]"' in server.stdout
    disabled = " ".join(server.stdout.split())
    assert (f"{venv}/bin/jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:formgrader "
            "@jupyter/nbgrader:create-assignment @jupyter/nbgrader:course-list") in disabled, disabled
    assert (f"{venv}/bin/jupyter server extension disable --sys-prefix nbgrader.server_extensions.formgrader "
            "nbgrader.server_extensions.course_list") in disabled, disabled


def test_no_solution_hidden_test_or_reference_code_is_in_the_package_or_the_bundle(built, unpacked):
    texts = {**dict(_text_files(built)), **dict(_text_files(unpacked))}
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
    # no function of the answers is defined anywhere in the package's grader
    defined = {n.name for path in (unpacked / "grader").rglob("*.py")
               for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
    answer_names = {fn.__name__ for fn in [*course.reference.values(), *course.knobs.values()]}
    assert not defined & (answer_names - {"forward"}), defined & answer_names


def test_every_visible_check_in_the_package_passes_the_answer_and_names_the_mistakes(unpacked):
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("bundle_probe.py")), str(unpacked), str(REPO)],
                          cwd=unpacked, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(report["grader"]).is_relative_to(unpacked)
    assert len(report["correct"]) > 50 and len(report["named"]) > 80
    assert {k: v for k, v in report["correct"].items() if v is not True} == {}
    assert {k: v for k, v in report["named"].items() if v is not True} == {}
    assert "values differ from the reference" in report["unknown_wrong_answer"]
    assert "NotShipped" in report["hidden"] and "graded" in report["hidden"]
    assert report["answers_from"] == ["grader.checks.stored"]  # lookups, never the course's answers


def test_every_function_of_the_answers_is_stored(unpacked):
    """The bundle's checks rebuild their answers from the table's listing: every reference
    function, every catalogued mistake (name and hint) and the diagnosis' attention."""
    listing = torch.load(unpacked / "grader" / "data" / "stored_outputs.pt", weights_only=True)[stored.LISTING]
    course = course_answers()
    assert listing["reference"] == sorted(course.reference)
    assert listing["knobs"] == sorted(course.knobs)
    assert {key: [(k, name, hint) for _, k, name, hint in catalogue]
            for key, catalogue in listing["mistakes"].items()} == {
        key: [(m.key, m.name, m.hint) for m in catalogue] for key, catalogue in course.mistakes.items()}


def test_the_build_says_what_it_does_step_by_step_with_counts(student_bundle):
    from grader.checks.exercises import EXERCISES

    lines, n = student_bundle[3], len(EXERCISES)
    recording = [line for line in lines if line.startswith("recording the visible checks: exercise ")]
    assert [line.split()[5] for line in recording] == [f"{k}/{n}" for k in range(1, n + 1)], lines
    count = len(notebooks.notebook_paths("notebooks"))
    assert any(re.fullmatch(rf"student package: {count} notebooks, \d+ files of the checks, \d+ reference files, "
                            r"\d+ stored outputs, \d+ helper modules", line) for line in lines), lines
    assert re.fullmatch(r"student package: .*\.whl \([\d.]+ MiB\)", lines[-1]), lines


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
