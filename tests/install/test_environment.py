"""Set-up files agree with each other."""
import re
from importlib.metadata import distributions
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from support.paths import ROOT


def _lines(name):
    lines = (ROOT / name).read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith("#")]


def _locked():
    return {canonicalize_name(name): version for name, version in
            (line.split("==") for line in _lines("requirements.lock"))}


def test_environment_yml_installs_from_requirements_and_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == ["-r requirements.txt", "-c requirements.lock"]
    assert "python=3.11" in env["dependencies"]


def test_every_requirement_is_locked_at_a_version_it_allows():
    locked = _locked()
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.]+", line) for line in _lines("requirements.lock"))
    for line in _lines("requirements.txt"):
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} is not in requirements.lock: run make lock"
        assert req.specifier.contains(locked[name], prereleases=True), (line, locked[name])


def test_the_installed_environment_is_the_locked_one():
    locked = _locked()
    installed = {}
    for d in distributions():  # the first found wins, as for an import (setuptools puts
        # its vendored importlib_metadata, zipp, ... on sys.path once it is imported)
        installed.setdefault(canonicalize_name(d.metadata["Name"]), d.version)
    drift = {name: (version, installed.get(name)) for name, version in locked.items()
             if Version(installed.get(name, "0")).public != version}
    assert not drift, f"installed versions differ from requirements.lock (locked, installed): {drift}"


def test_torch_is_pinned_and_makefile_never_pulls_cuda_on_a_cpu_machine():
    assert "torch==2.13.0" in _lines("requirements.txt") and _locked()["torch"] == "2.13.0"
    makefile, install_mk = (ROOT / "Makefile").read_text(), (ROOT / "install.mk").read_text()
    assert re.search(r"^include .*install\.mk$", makefile, re.M)
    assert re.search(r"NVIDIA_DRIVER \?= .*nvidia-smi", install_mk)
    assert '--nvidia-driver "$(NVIDIA_DRIVER)"' in install_mk  # the installer decides with it
    # torch is installed before the requirements, so they find it already satisfied
    assert re.search(r"\$\(STAMP\): \$\(VENV\)/\.torch ", makefile)
    assert "\t@$(SETUP) packages -r requirements.txt --editable ." in makefile
    # with the lock as constraints (tests/install/test_install.py: every version resolved is the locked one)
    installer = (ROOT / "student" / "attention_student" / "installer.py").read_text()
    assert 'args = ["--constraint", inst.lock, *args]' in installer


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme.split("\n## ")[0]
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_installed_torch_is_the_pinned_one():
    import torch
    assert torch.__version__.split("+")[0] == "2.13.0"


def test_gradebooks_get_the_schema_version_alembic_itself_reports(tmp_path):
    """nbgrader_config.py makes new gradebooks read the schema version in process; it must
    be the head that the `alembic heads` command (nbgrader's own way) prints."""
    import subprocess
    import sys

    import nbgrader.api
    from nbgrader.dbutil import _temp_alembic_ini

    from grader.instructor.nbgrader_plugins import schema_version

    alembic = Path(sys.executable).with_name("alembic")
    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'gb.db'}") as ini:
        heads = subprocess.run([str(alembic), "-c", ini, "heads"], capture_output=True, text=True, check=True)
    assert heads.stdout.split()[0] == schema_version()
    code = ("from traitlets.config.loader import PyFileConfigLoader; import nbgrader.api as a; "
            f"PyFileConfigLoader('nbgrader_config.py', path={str(ROOT)!r}).load_config(); "
            f"a.Gradebook('sqlite:///{tmp_path / 'new.db'}').close(); "
            "print(a.get_alembic_version.__module__)")
    env = {"PATH": "/usr/bin:/bin"}  # no alembic command on the PATH: nbgrader alone would fail
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "grader.instructor.nbgrader_plugins"
    with nbgrader.api.Gradebook(f"sqlite:///{tmp_path / 'new.db'}") as gb:
        from sqlalchemy import text
        assert gb.db.execute(text("select version_num from alembic_version")).scalar() == schema_version()


def test_reading_a_notebook_builds_no_parser_nobody_uses():
    """nbformat validates with jsonschema, which imports rfc3987-syntax if it is installed
    and so builds 35 parsers for formats no schema here uses (1.3 s of CPU in every process
    that reads a notebook): make install takes it out again (install.mk, UNUSED)."""
    import subprocess
    import sys

    code = "import sys, nbformat, jsonschema; print(sorted(m for m in sys.modules if m.split('.')[0] in ('rfc3987_syntax', 'lark')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    assert "rfc3987-syntax" not in (ROOT / "requirements.lock").read_text()
