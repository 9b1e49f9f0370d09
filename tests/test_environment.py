"""Set-up files agree with each other."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _requirements():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith("#")]


def test_environment_yml_matches_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == _requirements()
    assert "python=3.11" in env["dependencies"]


def test_torch_is_pinned_and_makefile_never_pulls_cuda_on_a_cpu_machine():
    assert "torch==2.13.0" in _requirements()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"TORCH_SPEC \?= .*nvidia-smi.*torch==2\.13\.0,torch==2\.13\.0\+cpu", makefile)
    # torch is installed before the requirements, so they find it already satisfied
    install = makefile[makefile.index("$(STAMP):"):]
    assert install.index('"$(TORCH_SPEC)"') < install.index("-r requirements.txt")


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

    from grader.nbgrader_plugins import schema_version

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
    assert proc.stdout.strip() == "grader.nbgrader_plugins"
    with nbgrader.api.Gradebook(f"sqlite:///{tmp_path / 'new.db'}") as gb:
        from sqlalchemy import text
        assert gb.db.execute(text("select version_num from alembic_version")).scalar() == schema_version()
