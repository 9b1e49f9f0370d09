"""`make lab` serves JupyterLab with the nbgrader and widgets extensions enabled."""
import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    port, token = _free_port(), "course-test-token"
    cmd = subprocess.run(["make", "-s", "lab-command", f"PORT={port}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    proc = subprocess.Popen(cmd + ["--no-browser", f"--IdentityProvider.token={token}"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    get = lambda path: urllib.request.urlopen(f"{base}{path}?token={token}", timeout=10)
    for _ in range(120):
        try:
            get("/api/status")
            break
        except OSError:
            time.sleep(0.5)
    yield get
    proc.terminate()
    proc.wait(timeout=30)


def test_lab_command_is_the_one_make_lab_runs():
    makefile = (ROOT / "Makefile").read_text()
    assert "lab: $(STAMP) work\n\t$(VENV)/bin/jupyter lab $(LAB_ARGS)" in makefile


def test_lab_serves_with_nbgrader_and_widgets_extensions(lab):
    extensions = json.load(lab("/lab/api/extensions"))
    names = {e["name"]: e for e in extensions}
    for name in ("jupyter-nbgrader", "jupyter-widgets-jupyterlab-manager"):  # @jupyter/nbgrader, ...
        assert name in names and names[name]["enabled"], name
    assert lab("/lab/tree/notebooks").status == 200


def test_formgrader_is_served_for_the_course(lab):
    page = lab("/formgrader").read().decode()
    assert "formgrader" in page.lower()
