"""The student package as a student without make installs it: a fresh virtual environment
whose pip reaches only PyPI, no `make` on the PATH, the README's commands (torch's CPU build
from PyTorch's CPU index, here a local stand-in; then the wheel, a local file, with its
dependencies at the versions of requirements.lock); then the console command, which copies
the notebooks and serves JupyterLab, and a notebook run from the folder it made, whose
visible checks pass a correct answer and name a catalogued mistake; and the hosted-notebook
route, a Python without the package where the notebook's first cell installs the wheel
uploaded beside it.

One environment for the whole module (installing it is the slow part). The installs pass
--no-compile, which only leaves byte-compiling to the first import (the README's plain
`pip install` compiles every file of the environment: a minute of CPU here)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from grader.instructor import first_cell
from support import synthetic
from support.torch_index import CUDA, ROOT, locked, name, pypi_only_env, serve, torch_wheel, write_index

pytestmark = pytest.mark.xdist_group("bundle")  # the wheel of conftest's student_bundle, built once

NOTEBOOK = "01_bag_of_words"
RUNNER = '''
import json, sys
import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
CoalesceStreamsPreprocessor().preprocess(nb, {})  # a print the kernel flushed in two pieces, as one
shown = [[o.get("text", "") or o.get("evalue", "") or o.get("data", {}).get("text/plain", "")
          for o in cell.get("outputs", [])] for cell in nb.cells]
print(json.dumps(shown))
'''


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def student(tmp_path_factory, student_bundle):
    """(python, env) of a fresh environment with the wheel installed the README's way."""
    wheel = torch_wheel()
    if wheel is None:
        pytest.skip(f"no torch {locked()['torch']}+cpu wheel for this Python in /opt/wheels to serve as "
                    "PyTorch's CPU index")
    tmp = tmp_path_factory.mktemp("student")
    env = pypi_only_env(tmp)
    # a student's Python writes the bytecode of what it imports (--no-compile below leaves it to
    # the first import); this machine's environment may say not to, which would make each of
    # the module's kernels compile torch again (about 8 s of CPU each)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env["PATH"] = str(venv / "bin")  # the environment's programs and nothing else: no make, no shell tools
    assert not any((Path(d) / "make").exists() for d in env["PATH"].split(os.pathsep))
    python = str(venv / "bin" / "python")
    built, package = student_bundle[0], student_bundle[1]
    readme = (built / "README.md").read_text()  # the commands below are the README's
    assert f'pip install "torch=={locked()["torch"]}+cpu" --extra-index-url https://download.pytorch.org/whl/cpu -c requirements.lock' in readme
    assert f'pip install "{package.name}[lab]" -c requirements.lock' in readme
    with serve(write_index(tmp / "index", wheel)) as (url, fetched):
        torch = subprocess.run([python, "-m", "pip", "install", "--no-compile", f"torch=={locked()['torch']}+cpu",
                                "--extra-index-url", url, "-c", "requirements.lock"], env=env, cwd=built,
                               capture_output=True, text=True)
    assert f"/torch/{wheel.name.replace('+', '%2B')}" in fetched, fetched
    assert torch.returncode == 0, torch.stdout[-2000:] + torch.stderr[-2000:]
    rest = subprocess.run([python, "-m", "pip", "install", "--no-compile", f"{package.name}[lab]", "-c", "requirements.lock"],
                          env=env, capture_output=True, text=True, cwd=built)
    assert rest.returncode == 0, rest.stdout[-2000:] + rest.stderr[-3000:]
    return python, env, tmp


def test_the_readme_install_gets_the_locked_versions_and_no_cuda(student):
    python, env, _ = student
    installed = json.loads(subprocess.run([python, "-m", "pip", "list", "--format", "json"], env=env,
                                          capture_output=True, text=True, check=True).stdout)
    installed = {name(p["name"]): p["version"] for p in installed}
    assert installed["torch"] == locked()["torch"] + "+cpu"
    assert not [n for n in installed if CUDA.match(n)]
    lock = locked()
    drift = {n: (v, lock[n]) for n, v in installed.items() if n in lock and v != lock[n] and n != "torch"}
    assert drift == {} and {"jupyterlab", "ipywidgets", "matplotlib", "attention-course-student"} <= set(installed)
    assert "nbgrader" not in installed  # the student package needs none of the instructor's tools


def test_the_command_copies_the_notebooks_and_serves_jupyterlab(student):
    python, env, tmp = student
    folder, port, token = tmp / "my course", _free_port(), "student-package-token"
    command = [str(Path(python).with_name("attention-student")), str(folder), "--no-browser", "--port", str(port),
               "--", f"--IdentityProvider.token={token}"]
    # PYTHONFAULTHANDLER: a lab that does not stop is sent SIGABRT below, and prints where each thread is
    proc = subprocess.Popen(command, env={**env, "PYTHONFAULTHANDLER": "1"}, cwd=tmp, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-3000:]
                time.sleep(0.5)
        specs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}"))
        assert list(specs["kernelspecs"]) == ["python3"]  # no grading kernel on the student's machine
        tree = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}"))
        assert sorted(item["name"] for item in tree["content"]) == sorted(
            p.name for p in (ROOT / "notebooks").iterdir() if any(p.glob("*.ipynb")))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGABRT)
            pytest.fail("JupyterLab did not stop within 60 s of SIGTERM; its output, then its threads' stacks:\n"
                        + proc.communicate(timeout=60)[0][-8000:])
    count = len(list((ROOT / "notebooks").glob("*/*.ipynb")))
    assert out.startswith(f"{folder}: copied {count} notebook(s)\n"), out[:2000]
    assert f"opening JupyterLab in {folder}" in out
    # again, with one notebook changed and one deleted: the change stays, the deleted one comes back
    mine = folder / NOTEBOOK / f"{NOTEBOOK}.ipynb"
    mine.write_text(mine.read_text().replace("raise NotImplementedError()", "return 42", 1))
    edited = mine.read_bytes()
    (folder / "02_tril_matmul" / "02_tril_matmul.ipynb").unlink()
    again = subprocess.run([python, "-m", "attention_student", str(folder), "--copy-only"], env=env,
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:2] == [f"{folder}: copied 1 notebook(s); {count - 1} already there, left as they are",
                                             "  02_tril_matmul/02_tril_matmul.ipynb"]
    assert mine.read_bytes() == edited


def _answered(path):
    """Notebook 01 at path with its answer filled in, and a cell after it checking a catalogued
    mistake (a running sum instead of a running mean); returns the notebook."""
    nb = nbformat.read(path, as_version=4)
    answers = synthetic._solution_code(ROOT, NOTEBOOK, NOTEBOOK)
    assert list(answers) == ["bag_of_words_loop"] and ".mean(0)" in answers["bag_of_words_loop"]
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    summed = answers["bag_of_words_loop"].replace("def bag_of_words_loop(", "def summed(").replace(".mean(0)", ".sum(0)")
    nb.cells.append(nbformat.v4.new_code_cell(
        summed + "\n\ntry:\n    check_bag_of_words_loop(summed, 'values')\nexcept Exception as err:\n    print(err)"))
    nbformat.write(nb, path)
    return nb


def _run_and_check(python, env, path, nb):
    """Run the notebook at path with nbclient in the student's environment: its visible checks
    pass the answer and the last cell names the mistake. Returns what each cell showed."""
    proc = subprocess.run([python, "-c", RUNNER, str(path), str(path.parent)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    text = "\n".join("\n".join(cell) for cell in shown)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    passed = [line for line in text.splitlines() if line.startswith("\u2713 bag_of_words_loop")]
    assert len(passed) >= len(graded) and "Error" not in "\n".join("\n".join(c) for c in shown[:-1]), text[-3000:]
    assert "Likely mistake: running sum instead of running mean" in shown[-1][-1], shown[-1]
    return shown


def test_a_notebook_from_the_folder_passes_an_answer_and_names_a_mistake(student):
    """Notebook 01 from the folder the command made, run in the student's environment by
    nbclient; its first cell (the install cell) does nothing there."""
    python, env, tmp = student
    folder = tmp / "run"
    subprocess.run([python, "-m", "attention_student", str(folder), "--copy-only"], env=env, check=True,
                   capture_output=True)
    path = folder / NOTEBOOK / f"{NOTEBOOK}.ipynb"
    nb = _answered(path)
    assert first_cell.first_cell_is_install_cell(nb)
    shown = _run_and_check(python, env, path, nb)
    assert shown[0] == []  # the package is installed: nothing to do, nothing shown


def test_a_python_without_the_package_gets_it_from_the_first_cell(student, student_bundle):
    """The hosted-notebook route: a Python with torch and Jupyter but not the course (the
    student's environment with the package uninstalled), notebook 01 and the wheel uploaded
    side by side. The first cell installs the wheel with pip (its dependencies are there
    already, so nothing is downloaded), showing pip's progress, and the notebook's checks then
    run in the same kernel."""
    python, env, tmp = student
    wheel = student_bundle[1]
    folder = tmp / "hosted"
    folder.mkdir()
    path = folder / f"{NOTEBOOK}.ipynb"
    shutil.copy2(ROOT / "notebooks" / NOTEBOOK / path.name, path)
    shutil.copy2(wheel, folder / wheel.name)
    pip = [python, "-m", "pip"]
    subprocess.run(pip + ["uninstall", "--yes", "attention-course-student"], env=env, check=True, capture_output=True)
    try:
        nb = _answered(path)
        shown = _run_and_check(python, env, path, nb)
        said = "".join(shown[0])
        assert f"Processing ./{wheel.name}" in said and "Successfully installed attention-course-student-" in said, said
    finally:  # the module's environment as it was, whatever happened above
        subprocess.run(pip + ["install", "--no-deps", "--no-compile", str(wheel)], env=env, check=True,
                       capture_output=True)
