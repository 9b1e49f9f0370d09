"""On a machine whose pip reaches only PyPI, `make` installs torch's CPU build from PyTorch's
CPU wheel index (here a local stand-in for it, given through TORCH_INDEX_URL) and the locked
packages from PyPI, without a single CUDA package."""
import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WHEELS = Path("/opt/wheels")  # where this machine's own pip configuration finds torch's CPU build
CUDA = re.compile(r"^(nvidia-|triton)")


def _locked():
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    return {_name(name): version for name, version in pins.items()}


def _name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _unused():
    """The packages pip brings that make install takes out again (install.mk's UNUSED)."""
    line = re.search(r"^UNUSED := (.*)$", (ROOT / "install.mk").read_text(), re.M)
    return {_name(name) for name in line.group(1).split()}


def _torch_wheel():
    version = _locked()["torch"]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = sorted(WHEELS.glob(f"torch-{version}+cpu-{tag}-*.whl"))
    if not wheels:
        pytest.skip(f"no torch {version}+cpu wheel for {tag} in {WHEELS} to serve as PyTorch's CPU index")
    return wheels[0]


class _Index(http.server.SimpleHTTPRequestHandler):
    """A PEP 503 index over HTTP that records what was fetched from it."""

    def __init__(self, *args, fetched, **kwargs):
        self.fetched = fetched
        super().__init__(*args, **kwargs)

    def do_GET(self):
        self.fetched.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


def _serve(folder):
    fetched = []
    handler = functools.partial(_Index, directory=str(folder), fetched=fetched)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread, f"http://127.0.0.1:{server.server_port}/", fetched


@pytest.fixture
def torch_index(tmp_path):
    """PyTorch's CPU wheel index, standing in: /torch/ lists the local torch CPU wheel."""
    wheel = _torch_wheel()
    project = tmp_path / "index" / "torch"
    project.mkdir(parents=True)
    (project / wheel.name).symlink_to(wheel)
    href = wheel.name.replace("+", "%2B")
    (project / "index.html").write_text(f'<!DOCTYPE html><html><body><a href="{href}">{wheel.name}</a></body></html>\n')
    server, thread, url, fetched = _serve(tmp_path / "index")
    yield url, wheel.name, fetched
    server.shutdown()
    thread.join()


@pytest.fixture
def empty_index(tmp_path):
    """An index without torch."""
    (tmp_path / "empty").mkdir()
    server, thread, url, fetched = _serve(tmp_path / "empty")
    yield url, fetched
    server.shutdown()
    thread.join()


@pytest.fixture
def pypi_only(tmp_path):
    """The environment of a machine whose pip reaches only PyPI: an empty configuration file
    in place of this machine's (which finds the CPU build in a local wheel folder), and no
    PIP_* variables."""
    config = tmp_path / "pip.conf"
    config.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
    env.update(PIP_CONFIG_FILE=str(config), PIP_DISABLE_PIP_VERSION_CHECK="1")
    shown = subprocess.run([sys.executable, "-m", "pip", "config", "list"], env=env,
                           capture_output=True, text=True, check=True).stdout
    assert not re.search(r"find-links|index-url", shown), shown
    return env


def _pip(venv, env, *args):
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], env=env,
                          capture_output=True, text=True)


def test_the_makefile_asks_the_torch_index_by_its_variable_and_no_wheel_folder():
    install = (ROOT / "install.mk").read_text()
    assert '--index-url "$(TORCH_INDEX_URL)"' in install
    assert "TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu" in install
    assert not re.search(r"find-links|/opt/wheels|extra-index-url", install + (ROOT / "Makefile").read_text())


def test_a_pypi_only_machine_gets_the_cpu_build_and_no_cuda_package(tmp_path, torch_index, pypi_only):
    url, wheel, fetched = torch_index
    venv = tmp_path / "venv"
    make = subprocess.run(["make", "-s", "torch", f"VENV={venv}", f"TORCH_INDEX_URL={url}", "NVIDIA_DRIVER="],
                          cwd=ROOT, env=pypi_only, capture_output=True, text=True)
    assert make.returncode == 0, make.stdout[-3000:] + make.stderr[-3000:]
    assert f"installed from {url}" in make.stdout, make.stdout
    assert "NOTE" not in make.stdout
    # the wheel came from the stand-in index, not from a wheel folder this machine has
    assert f"/torch/{wheel.replace('+', '%2B')}" in fetched, fetched
    installed = {_name(p["name"]): p["version"]
                 for p in json.loads(_pip(venv, pypi_only, "list", "--format", "json").stdout)}
    assert installed["torch"] == _locked()["torch"] + "+cpu"

    # the rest, as `make install` asks for it, resolved on PyPI (metadata only)
    report = tmp_path / "report.json"
    rest = _pip(venv, pypi_only, "install", "--dry-run", "--quiet", "--report", str(report),
                "-r", str(ROOT / "requirements.txt"), "-c", str(ROOT / "requirements.lock"))
    assert rest.returncode == 0, rest.stderr[-3000:]
    wanted = {_name(item["metadata"]["name"]): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    unused = _unused()
    assert unused and unused <= set(wanted)  # pip still brings them: make install takes them out
    wanted = {name: version for name, version in wanted.items() if name not in unused}
    assert not [name for name in {**installed, **wanted} if CUDA.match(name)]
    assert "torch" not in wanted  # the CPU build already satisfies requirements.txt
    locked = _locked()
    assert {name: locked.get(name) for name in wanted} == wanted  # every version is the locked one
    assert set(locked) <= set(wanted) | set(installed)  # and the lock names nothing unused


def test_the_cuda_build_is_a_last_resort_announced_by_a_note(tmp_path, empty_index, pypi_only):
    """A torch version that no index has (so nothing is downloaded): your pip, then the CPU
    index are asked, and only then PyPI's build, after the note."""
    url, fetched = empty_index
    make = subprocess.run(["make", "-s", "torch", f"VENV={tmp_path / 'venv'}", f"TORCH_INDEX_URL={url}",
                           "NVIDIA_DRIVER=", "TORCH_VERSION=99.0.0"],
                          cwd=ROOT, env=pypi_only, capture_output=True, text=True)
    assert make.returncode != 0  # no torch 99.0.0 anywhere
    assert "/torch/" in fetched  # the CPU index was asked
    lines = make.stdout.splitlines()
    assert lines[0] == f"torch 99.0.0+cpu (CPU build): not found by your pip; trying {url}", lines
    note = " ".join(line.strip() for line in lines[1:])
    assert note.startswith(f"NOTE: the CPU build of torch 99.0.0 was found neither by your pip nor on {url};")
    assert "the CUDA build with its nvidia-* packages" in note
    asked = [line for line in make.stderr.splitlines() if line.startswith("ERROR: Cannot install torch==")]
    assert asked[-1].startswith("ERROR: Cannot install torch==99.0.0 because"), asked  # PyPI's build, last
