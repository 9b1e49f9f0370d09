"""On a machine whose pip reaches only PyPI, `make` installs torch's CPU build from PyTorch's
CPU wheel index (here a local stand-in for it, given through TORCH_INDEX_URL) and the locked
packages from PyPI, without a single CUDA package, showing the installer's progress; where
the index cannot be reached or lacks the build, it stops and says which, and downloads
nothing of PyPI's CUDA build."""
import json
import re
import subprocess
import sys

import pytest

from support.torch_index import CUDA, ROOT, locked, name, pypi_only_env, serve, torch_wheel, write_index

VERSION = locked()["torch"]


def _unused():
    """The packages pip brings that make install takes out again (install.mk's UNUSED)."""
    line = re.search(r"^UNUSED := (.*)$", (ROOT / "install.mk").read_text(), re.M)
    return {name(n) for n in line.group(1).split()}


@pytest.fixture
def pypi_only(tmp_path):
    return pypi_only_env(tmp_path)


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    """A virtual environment with nothing installed, shared by the tests whose install stops
    before anything is installed (each checks that it is still bare)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv


def _make_torch(venv, env, *settings):
    return subprocess.run(["make", "-s", "torch", f"VENV={venv}", "NVIDIA_DRIVER=", "SYSTEM=Linux", *settings],
                          cwd=ROOT, env=env, capture_output=True, text=True)


def _installed(venv, env):
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return {name(p["name"]): p["version"] for p in json.loads(out)}


def test_the_makefile_asks_the_torch_index_by_its_variable_and_no_wheel_folder():
    install = (ROOT / "install.mk").read_text()
    assert '--index-url "$(TORCH_INDEX_URL)"' in install
    assert "TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu" in install
    assert '--allow-cuda "$(ALLOW_CUDA)"' in install and "ALLOW_CUDA ?=\n" in install
    installer = (ROOT / "student" / "attention_student" / "installer.py").read_text()
    # the installer names pip's source flags only to hand pip's own settings on to uv
    installer = re.sub(r"(?ms)^UV_ARGUMENTS = \{.*?\}$", "", installer)
    everything = install + (ROOT / "Makefile").read_text() + installer
    assert not re.search(r"--find-links|/opt/wheels|--extra-index-url|--quiet", everything)


def test_a_pypi_only_machine_gets_the_cpu_build_and_no_cuda_package(tmp_path, pypi_only):
    wheel = torch_wheel()
    if wheel is None:
        pytest.skip(f"no torch {VERSION}+cpu wheel for this Python in /opt/wheels to serve as PyTorch's CPU index")
    venv = tmp_path / "venv"
    # uv's cache as a fresh machine has it: the user's cache outlives test runs, and where this
    # run's stand-in index got the port of an earlier run's, uv took torch from it unasked
    fresh = {**pypi_only, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    with serve(write_index(tmp_path / "index", wheel)) as (url, fetched):
        make = _make_torch(venv, fresh, f"TORCH_INDEX_URL={url}")
    out = make.stdout + make.stderr
    assert make.returncode == 0, out[-3000:]
    lines = make.stdout.splitlines()
    assert f"==> installer: uv, installing uv=={locked()['uv']} with pip first" in lines, lines
    assert f"==> torch {VERSION}+cpu (CPU build: no NVIDIA driver): from {url}" in lines, lines
    assert f"==> torch {VERSION}+cpu (CPU build): installed from {url}" in lines, lines
    # the installer's own progress: what it downloads, with its size, and what it installed
    assert re.search(r"Downloading torch \([\d.]+MiB\)", out) and re.search(r"Installed 1 package in", out), out
    # the wheel came from the stand-in index, not from a wheel folder this machine has
    assert f"/torch/{wheel.name.replace('+', '%2B')}" in fetched, fetched
    assert any((tmp_path / "uv-cache").iterdir())  # uv kept it in the fresh cache, not the user's
    installed = _installed(venv, pypi_only)
    assert installed["torch"] == VERSION + "+cpu" and installed["uv"] == locked()["uv"]

    # the rest, as `make install` asks for it on this machine (the installer the torch step
    # chose: uv, given no sources of pip's), resolved on PyPI without installing; uv's plan as
    # JSON (pip's own `--dry-run --report` took 20 s of CPU for the same answer)
    rest = subprocess.run([str(venv / "bin" / "uv"), "pip", "install", "--python", str(venv / "bin" / "python"),
                           "--dry-run", "--output-format", "json", "-r", str(ROOT / "requirements.txt"),
                           "-c", str(ROOT / "requirements.lock")], env=pypi_only, capture_output=True, text=True)
    assert rest.returncode == 0, rest.stderr[-3000:]
    # (a package the torch step brought at another version, filelock, is replaced: "uninstalled", then "installed")
    wanted = {name(change["name"]): change["version"] for change in json.loads(rest.stdout)["changes"]
              if change["action"] == "installed"}
    unused = _unused()
    assert unused and unused <= set(wanted)  # the resolver still brings them: make install takes them out
    wanted = {n: v for n, v in wanted.items() if n not in unused}
    assert not [n for n in {**installed, **wanted} if CUDA.match(n)]
    assert "torch" not in wanted  # the CPU build already satisfies requirements.txt
    lock = locked()
    assert {n: lock.get(n) for n in wanted} == wanted  # every version is the locked one
    assert set(lock) <= set(wanted) | set(installed)  # and the lock names nothing unused


def _stopped(make, venv, env):
    """The install stopped before any torch, naming the ways out; nothing was installed."""
    assert make.returncode != 0
    err = " ".join(make.stderr.split())
    assert "INSTALL STOPPED:" in err, make.stdout + make.stderr
    assert f"Stopped before PyPI's torch=={VERSION}: on Linux it is the CUDA build" in err, err
    for way in ("TORCH_INDEX_URL=", "TORCH_SPEC=", "ALLOW_CUDA=1"):
        assert way in err, err
    assert "ResolutionImpossible" not in make.stdout + make.stderr
    assert "torch" not in _installed(venv, env) and not [n for n in _installed(venv, env) if CUDA.match(n)]
    return err


def test_an_unreachable_torch_index_stops_the_install_and_says_so(bare_venv, pypi_only):
    """Host unknown, or nothing listening: the index cannot be reached, in those words, and
    nothing is downloaded from PyPI instead."""
    with serve(bare_venv.parent) as (url, _):
        pass  # the server is gone: its port refuses connections now
    make = _make_torch(bare_venv, pypi_only, f"TORCH_INDEX_URL={url}", "INSTALLER=pip")
    err = _stopped(make, bare_venv, pypi_only)
    assert f"the torch index {url} cannot be reached from this machine: 127.0.0.1:{url.split(':')[-1].strip('/')} refused the connection" in err, err
    make = _make_torch(bare_venv, pypi_only, "TORCH_INDEX_URL=http://torch-index.invalid/whl/cpu", "INSTALLER=pip")
    err = _stopped(make, bare_venv, pypi_only)
    assert ("the torch index http://torch-index.invalid/whl/cpu cannot be reached from this machine: "
            "the host name torch-index.invalid could not be resolved") in err, err


def test_an_index_without_the_build_says_what_it_has(bare_venv, pypi_only, tmp_path):
    """Reachable, but without torch or without its locked version: said so, with the versions it
    has for this Python; ALLOW_CUDA=1 then goes to PyPI's build, announced (a version PyPI does
    not have here, so nothing is downloaded)."""
    (tmp_path / "empty").mkdir()
    with serve(tmp_path / "empty") as (url, fetched):
        make = _make_torch(bare_venv, pypi_only, f"TORCH_INDEX_URL={url}", "INSTALLER=pip")
    err = _stopped(make, bare_venv, pypi_only)
    assert f"{url} can be reached, but it has no torch page" in err, err
    assert "/torch/" in fetched
    wheel = torch_wheel()
    if wheel is None:
        pytest.skip("no torch CPU wheel in /opt/wheels for an index that has another version")
    with serve(write_index(tmp_path / "index", wheel)) as (url, _):
        make = _make_torch(bare_venv, pypi_only, f"TORCH_INDEX_URL={url}", "INSTALLER=pip", "TORCH_VERSION=99.0.0")
        allowed = _make_torch(bare_venv, pypi_only, f"TORCH_INDEX_URL={url}", "INSTALLER=pip",
                              "TORCH_VERSION=99.0.0", "ALLOW_CUDA=1")
    err = " ".join(make.stderr.split())
    assert make.returncode != 0
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert (f"{url} can be reached, but it has {VERSION}+cpu for Python {tag} on x86_64: torch 99.0.0+cpu, "
            "the version requirements.lock gives, is missing there") in err or "x86_64" not in wheel.name, err
    assert allowed.returncode != 0  # no torch 99.0.0 on PyPI either
    assert "ALLOW_CUDA=1: installing PyPI's torch==99.0.0, the CUDA build" in " ".join(allowed.stdout.split())
    assert "torch" not in _installed(bare_venv, pypi_only)
