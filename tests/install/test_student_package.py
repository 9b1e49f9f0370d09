"""The student package's own parts, in this process: the command's copying and its JupyterLab
arguments, the installer's reading of a torch index, and the first cell of every notebook,
which installs the package where the course's code is missing and does nothing elsewhere.
(Installed for real, in a fresh environment: tests/install/test_student_install.py.)"""
import json
import re
import socket
import subprocess
import sys

import nbformat
import pytest

from grader.instructor import first_cell
from grader.instructor.notebooks import notebook_paths
from support.paths import ROOT

sys.path.insert(0, str(ROOT / "student"))
from attention_student import installer, launch  # noqa: E402


def _fake_source(tmp_path):
    source = tmp_path / "package-notebooks"
    for name in ("01_a", "02_b"):
        (source / name).mkdir(parents=True)
        (source / name / f"{name}.ipynb").write_text(f'{{"given": "{name}"}}')
    return source


def test_copying_adds_what_is_missing_and_never_overwrites(tmp_path):
    source, folder = _fake_source(tmp_path), tmp_path / "my work"
    first = launch.copy_notebooks(folder, source)
    assert [p.relative_to(folder).as_posix() for p in first.new] == ["01_a/01_a.ipynb", "02_b/02_b.ipynb"]
    assert first.summary() == f"{folder}: copied 2 notebook(s)"
    mine = folder / "01_a" / "01_a.ipynb"
    mine.write_text("my answer")
    (folder / "02_b" / "02_b.ipynb").unlink()
    again = launch.copy_notebooks(folder, source)
    assert mine.read_text() == "my answer" and again.kept == [mine]
    assert again.summary() == f"{folder}: copied 1 notebook(s); 1 already there, left as they are"
    assert launch.copy_notebooks(folder, source).summary() == f"{folder}: all 2 notebooks are there already (yours, left as they are)"
    with pytest.raises(SystemExit, match="no notebooks in"):
        launch.copy_notebooks(folder, tmp_path / "nothing")


def test_the_command_passes_its_options_and_jupyterlab_s_own(tmp_path):
    args = launch.parse(["course", "--no-browser", "--port", "8123", "--", "--ServerApp.token=x"])
    assert (args.folder, args.no_browser, args.port, args.extra) == ("course", True, 8123, ["--ServerApp.token=x"])
    assert launch.parse([]).folder == launch.DEFAULT_FOLDER
    lab = launch.lab_arguments(tmp_path, 8123, True, ["--ServerApp.token=x"])
    assert lab[:3] == [f"--ServerApp.root_dir={tmp_path}", "--ServerApp.ip=127.0.0.1", "--LabApp.default_url=/lab/tree"]
    assert "--ServerApp.port=8123" in lab and "--no-browser" in lab and lab[-1] == "--ServerApp.token=x"


def test_a_missing_jupyterlab_is_named_with_the_command_that_installs_it(monkeypatch):
    real = launch.metadata.version

    def version(name):
        if name == "jupyterlab":
            raise launch.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(launch.metadata, "version", version)
    problems, notes = launch.environment_notes()
    assert problems == [f"JupyterLab is not installed in this Python environment ({sys.prefix}). Install the "
                        'package with its lab: pip install "attention-course-student[lab]" (or pip install jupyterlab)']
    assert notes == []  # this torch is the CPU build


def test_the_torch_index_is_read_as_pip_reads_it(tmp_path):
    files = ["torch-2.12.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl",
             "torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl",
             "torch-2.13.0%2Bcpu-cp312-cp312-manylinux_2_28_x86_64.whl",
             "torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_aarch64.whl"]
    parser = installer._Links()
    parser.feed("".join(f'<a href="../../{f}#sha256=00">x</a>' for f in files))
    answer = installer.IndexAnswer("http://index/", True, files=parser.names)
    assert answer.builds("2.13.0+cpu", "cp311", "x86_64") == ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert answer.versions("cp311", "x86_64") == ["2.12.0+cpu", "2.13.0+cpu"]
    assert answer.builds("2.14.0+cpu", "cp311", "x86_64") == []


def test_an_index_that_does_not_answer_is_told_apart_from_one_that_lacks_torch(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = installer.probe_index(f"http://127.0.0.1:{port}/", timeout=5)
    assert not refused.reachable and refused.reason == f"127.0.0.1:{port} refused the connection"
    unknown = installer.probe_index("http://torch-index.invalid/whl/cpu", timeout=5)
    assert not unknown.reachable and unknown.reason.startswith("the host name torch-index.invalid could not be resolved")


def test_the_cpu_build_is_wanted_on_linux_without_a_driver_only():
    assert installer.wants_cpu_build("Linux", None) and installer.wants_cpu_build("Linux", "")
    assert not installer.wants_cpu_build("Linux", "/usr/bin/nvidia-smi")
    assert not installer.wants_cpu_build("Darwin", None) and not installer.wants_cpu_build("Windows", None)
    assert installer.own_sources({"cert": "c", "constraint": "x", "find-links": "/w"}) == {"find-links": "/w"}


def test_pips_extra_sources_and_constraints_become_uvs_arguments_and_a_replaced_pypi_keeps_pip():
    settings = {"cert": "c", "extra-index-url": "file:///a/simple https://b.example/simple",
                "find-links": "/w", "constraint": "/etc/pip/c.txt"}
    assert installer.uv_arguments(settings) == [
        "--extra-index-url", "file:///a/simple", "--extra-index-url", "https://b.example/simple",
        "--find-links", "/w", "--constraint", "/etc/pip/c.txt"]
    assert installer.uv_arguments({"cert": "c"}) == []
    assert installer.uv_arguments({"index-url": "https://mirror.example/simple", "find-links": "/w"}) is None
    assert installer.uv_arguments({"no-index": "1", "find-links": "/w"}) is None


def _uv_given_pips_wheel_folder(tmp_path):
    """An Installer that chose uv for a pip configuration naming a wheel folder (nothing run)."""
    inst = object.__new__(installer.Installer)
    inst.venv, inst.lock, inst.python = tmp_path, tmp_path / "requirements.lock", "/venv/bin/python"
    inst.settings = {"find-links": "/w"}
    inst.sources, inst.uv_args = installer.own_sources(inst.settings), installer.uv_arguments(inst.settings)
    inst.name, inst.env = "uv", {}
    return inst


def test_uv_that_cannot_install_from_pips_sources_hands_over_to_pip(monkeypatch, tmp_path):
    """Given pip's sources, uv fails (a source it cannot read, say): pip, which reads its own
    configuration, installs the same thing, and does the rest of the install too."""
    inst = _uv_given_pips_wheel_folder(tmp_path)
    ran = []
    monkeypatch.setattr(installer, "run", lambda cmd, env=None, quiet=False: ran.append(cmd) or len(ran) > 1)
    assert inst.install("--no-deps", "x==1")
    assert inst.name == "pip"
    assert ran[0][1:3] == ["pip", "install"] and ["--find-links", "/w"] == ran[0][5:7]
    assert ran[1][:4] == ["/venv/bin/python", "-m", "pip", "install"] and "--find-links" not in ran[1]
    assert inst.install("y==2") and len(ran) == 3 and ran[2][2] == "pip"  # pip from then on
    inst.sources, inst.name = {}, "uv"  # uv with no pip sources of the user's: its failure stands
    monkeypatch.setattr(installer, "run", lambda cmd, env=None, quiet=False: False)
    assert not inst.install("z==3") and inst.name == "uv"


def test_torch_missing_from_pips_sources_is_an_answer_and_uv_keeps_the_install(monkeypatch, tmp_path, capsys):
    """uv, given pip's sources, finds no CPU build of torch there: pip, which reads them
    itself, is asked once as well (it found it here), and uv stays the installer, with no
    word of handing over."""
    inst = _uv_given_pips_wheel_folder(tmp_path)
    ran = []
    monkeypatch.setattr(installer, "run", lambda cmd, env=None, quiet=False: ran.append(cmd) or len(ran) > 1)
    assert installer.install_torch(inst, "2.0.0", system="Linux", driver=None) == "pip"
    assert [cmd[:3] for cmd in ran] == [[inst.uv_path, "pip", "install"], ["/venv/bin/python", "-m", "pip"]]
    assert all(cmd[-1] == "torch==2.0.0+cpu" for cmd in ran)
    assert inst.name == "uv" and "from here on" not in capsys.readouterr().out


# --- the first cell -------------------------------------------------------------------------

@pytest.fixture
def shell(monkeypatch, tmp_path):
    """IPython's own shell, as a notebook's kernel runs a cell, with a subprocess.Popen that
    records the command it was given instead of running pip (and says one line, as pip
    would); cwd an empty folder. Yields (run(source), the commands pip got)."""
    import subprocess

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.chdir(tmp_path)
    ran = []

    class Pip:
        def __init__(self, command, **kwargs):
            ran.append(command)
            self.stdout = iter([f"Successfully installed {command[-1]}\n"])

        def wait(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Pip)
    ip = InteractiveShell.instance(config=Config({"HistoryManager": {"enabled": False}}))

    def run(source):
        result = ip.run_cell(source, store_history=False)
        result.raise_error()
        return [" ".join(command[1:]) for command in ran]

    try:
        yield run
    finally:
        InteractiveShell.clear_instance()


def test_the_first_cell_installs_the_package_only_where_it_is_missing(shell, monkeypatch, tmp_path, capsys):
    source = first_cell.install_cell_source()
    assert shell(source) == []  # the course, the package, a grading kernel (its stub)
    monkeypatch.setitem(sys.modules, "notebook_helpers", None)  # `import notebook_helpers` fails
    with pytest.raises(FileNotFoundError, match=r"upload its wheel \(attention_course_student-0\.1\.0-py3-none-any"
                                                r"\.whl\) into this notebook's folder, then run this cell again"):
        shell(source)  # no wheel, and no name it could be installed by from someone else's upload
    url = "https://example.org/attention_course_student-0.1.0-py3-none-any.whl"
    assert shell(first_cell.install_cell_source(url)) == [f"-m pip install {url}"]  # a course that publishes it
    assert f"Successfully installed {url}" in capsys.readouterr().out  # what pip says shows in the cell
    monkeypatch.setitem(sys.modules, "grader", None)
    for name in ("attention_course_student-0.1.0-py3-none-any.whl", "attention_course_student-0.2.0-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"")  # uploaded beside the notebook: the newest is taken
    assert shell(source)[-1] == "-m pip install attention_course_student-0.2.0-py3-none-any.whl"
    assert shell(first_cell.install_cell_source(url))[-1] == "-m pip install attention_course_student-0.2.0-py3-none-any.whl"
    assert "importlib" not in source and "--quiet" not in source  # pip's progress shows
    assert "%" not in source and "!" not in source  # no magic, no shell: a bare kernel's PATH has no `sh`


def test_the_first_cell_says_when_pip_fails(shell, monkeypatch, tmp_path):
    import subprocess

    class Failing:
        def __init__(self, command, **kwargs):
            self.stdout = iter(["ERROR: No matching distribution found for torch\n"])

        def wait(self):
            return 1

    monkeypatch.setattr(subprocess, "Popen", Failing)
    monkeypatch.setitem(sys.modules, "grader", None)
    (tmp_path / "attention_course_student-0.1.0-py3-none-any.whl").write_bytes(b"")
    with pytest.raises(RuntimeError, match="pip could not install the course's package: its messages are above"):
        shell(first_cell.install_cell_source())


def test_the_first_cell_is_put_first_once_and_replaces_an_older_one(tmp_path):
    path = next(iter(notebook_paths("notebooks")))
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if not first_cell.is_install_cell(c)]  # a notebook from before the cell
    without = nbformat.writes(nb)
    cells = len(nb.cells)
    first_cell.with_install_cell(nb)
    assert first_cell.first_cell_is_install_cell(nb) and len(nb.cells) == cells + 1
    first_cell.with_install_cell(nb, "https://example.org/x.whl")  # a newer source replaces it
    assert len(nb.cells) == cells + 1 and "example.org/x.whl" in nb.cells[0].source
    assert not first_cell.first_cell_is_install_cell(nb)
    assert first_cell.first_cell_is_install_cell(nb, "https://example.org/x.whl")
    nbformat.validate(nb)
    copy = tmp_path / path.name
    copy.write_text(without)
    assert first_cell.main(["--check", str(copy)]) == 1
    assert first_cell.main([str(copy)]) == 0 and first_cell.main(["--check", str(copy)]) == 0
    once = copy.read_bytes()
    assert first_cell.main([str(copy)]) == 0 and copy.read_bytes() == once  # unchanged the second time
    executed = nbformat.read(copy, as_version=4)
    executed.cells[0].execution_count = 1  # as make execute leaves it: kept as it is
    nbformat.write(executed, copy)
    once = copy.read_bytes()
    assert first_cell.main([str(copy)]) == 0 and copy.read_bytes() == once


def test_every_notebook_starts_with_the_install_cell():
    """solutions/ and notebooks/ (the student versions, which the package ships): the first
    cell of each is first_cell's, with its default source."""
    paths = notebook_paths("solutions") + notebook_paths("notebooks")
    assert len(paths) >= 18 and len(paths) == 2 * len(notebook_paths("solutions"))
    missing = [str(p) for p in paths if not first_cell.first_cell_is_install_cell(nbformat.read(p, as_version=4))]
    assert missing == []


def test_the_projects_own_packages_are_compiled_with_the_environment(tmp_path):
    """make install byte-compiles the project's packages with the environment (an editable
    install leaves them uncompiled, and a sandbox or PYTHONDONTWRITEBYTECODE never writes
    their bytecode): the folders pyproject.toml's find/include patterns name, nothing else."""
    assert [p.name for p in installer.project_packages(ROOT)] == ["grader", "notebook_helpers"]
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.packages.find]\ninclude = ["mine*"]\n')
    for name in ("mine", "mine_too", "other", "mine_data"):
        (tmp_path / name).mkdir()
    for name in ("mine", "mine_too", "other"):
        (tmp_path / name / "__init__.py").write_text("")
    assert [p.name for p in installer.project_packages(tmp_path)] == ["mine", "mine_too"]
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert installer.project_packages(tmp_path) == []
    assert installer.project_packages(tmp_path / "nowhere") == []


def test_what_the_install_leaves_uncompiled_is_nothing_the_course_imports():
    """make install byte-compiles the environment except installer.NOT_COMPILED (the packages'
    own tests/ folders, pip, networkx): no module that a grading kernel, the grader, the lab
    or the tests import is among them (each would be compiled again by every process that
    may not write bytecode), and only paths below site-packages are matched (a checkout
    in a folder named test/ is compiled)."""
    code = ("import json, sys, torch, torch._dynamo, ipykernel.kernelapp, matplotlib.pyplot, ipywidgets, "
            "nbgrader.apps, nbconvert, distributed, jupyterlab, jupyter_server, grader.grading.autograde, "
            "grader.instructor.cli, notebook_helpers\n"
            "print(json.dumps([getattr(m, '__file__', None) or '' for m in list(sys.modules.values())]))")
    files = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                      cwd=ROOT).stdout)
    files += [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]  # pytest's plugins too
    skip = re.compile(installer.NOT_COMPILED)
    assert len(files) > 1000
    assert [f for f in files if skip.search(f)] == []
    site = "/home/me/test/course/.venv/lib/python3.11/site-packages"
    assert [bool(skip.search(f"{site}/{p}")) for p in (
        "numpy/_core/tests/test_a.py", "pip/_internal/main.py", "networkx/algorithms/a.py", "sympy/core/tests/t.py",
        "torch/nn/functional.py", "jinja2/tests.py", "torch/testing/_internal/common.py", "pipx/main.py")] == [
        True, True, True, True, False, False, False, False]
