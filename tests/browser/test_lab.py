"""`make lab` serves JupyterLab as a student sees it: the widgets and nbgrader's Validate, only
the Python 3 kernel, none of the instructor's or the exchange's panels; `make formgrader`
serves the instructor's lab (tests/browser/test_browser.py drives both)."""
import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from support.paths import ROOT


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    port, token = _free_port(), "course-test-token"
    words = subprocess.run(["make", "-s", "lab-command", f"PORT={port}"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    env = dict(os.environ)
    while "=" in words[0] and not words[0].startswith("-"):  # the variables make lab sets
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    proc = subprocess.Popen(words + ["--no-browser", f"--IdentityProvider.token={token}"], cwd=ROOT, env=env,
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
    assert "lab: $(STAMP) work\n\t$(STUDENT_LAB_ENV) $(VENV)/bin/jupyter lab $(LAB_ARGS)" in makefile
    assert "formgrader: $(STAMP)\n\t$(VENV)/bin/jupyter lab $(FORMGRADER_ARGS)" in makefile
    formgrader = subprocess.run(["make", "-s", "formgrader-command", "PORT=9999"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout
    assert re.search(r"--LabApp.default_url=/formgrader .*--port=9999", formgrader), formgrader
    assert "JUPYTER_CONFIG_PATH" not in formgrader  # the instructor's lab: every panel and kernel


def test_lab_serves_the_widgets_and_validate_but_no_instructor_panel(lab):
    extensions = json.load(lab("/lab/api/extensions"))
    names = {e["name"]: e for e in extensions}
    for name in ("jupyter-nbgrader", "jupyter-widgets-jupyterlab-manager"):  # @jupyter/nbgrader, ...
        assert name in names and names[name]["enabled"], name
    assert lab("/lab/tree/notebooks").status == 200
    page = lab("/lab").read().decode()
    config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                  page, re.S).group(1))
    hidden = {f"@jupyter/nbgrader:{p}" for p in ("formgrader", "create-assignment", "assignment-list",
                                                  "course-list", "menu")}
    assert hidden <= set(config["disabledExtensions"]), config["disabledExtensions"]
    assert "@jupyter/nbgrader:validate-assignment" not in config["disabledExtensions"]
    assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    for path in ("/formgrader", "/assignments", "/formgraders"):  # nor their server side
        with pytest.raises(urllib.error.HTTPError, match="404"):
            lab(path)


def test_the_student_is_offered_only_the_python_kernel(lab):
    installed = subprocess.run([str(ROOT / ".venv" / "bin" / "jupyter"), "kernelspec", "list", "--json"],
                               capture_output=True, text=True, check=True).stdout
    assert "attention-grading" in json.loads(installed)["kernelspecs"]  # there, for grading
    assert list(json.load(lab("/api/kernelspecs"))["kernelspecs"]) == ["python3"]
