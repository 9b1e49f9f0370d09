"""A pytest plugin for the nbval runs of tests/notebooks/test_notebooks.py, which run every
notebook of a folder in one process: it records, per notebook (its folder's name), the
cells that passed, the ones that failed with nbval's report (in setting up, running or
tearing down), a notebook that could not be
collected, and, for every test cell, whether running it raised. It writes them as JSON to the
file named by $NBVAL_RECORD:

    {notebook: {"passed": n, "failed": {cell: report}, "broken": report or null,
                "test_cells": {grade_id: raised}}}

One run of a student version then shows both that only exercise cells fail (nbval-lax) and
that no test cell passes without an answer."""
import json
import os
import re
from pathlib import Path

RECORD = {}
COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # nbval colours its reports whatever pytest is told


def _text(longrepr, limit):
    return COLOUR.sub("", str(longrepr))[-limit:]


def _notebook(path):
    name = Path(str(path)).parent.name
    return RECORD.setdefault(name, {"passed": 0, "failed": {}, "broken": None, "test_cells": {}})


def pytest_collectreport(report):
    if report.failed and str(report.nodeid).endswith(".ipynb"):
        _notebook(report.nodeid)["broken"] = _text(report.longrepr, 4000)


def pytest_runtest_makereport(item, call):
    cell = getattr(item, "cell", None)
    if call.when != "call" or cell is None:
        return
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("grade") and cell.cell_type == "code":
        outputs = getattr(item, "test_outputs", None) or []
        _notebook(item.path)["test_cells"][meta["grade_id"]] = any(
            o.get("output_type") == "error" for o in outputs)


def pytest_runtest_logreport(report):
    """A cell's run passes once (its call); it fails in any phase (a kernel that would not
    start or stop fails its setup or teardown)."""
    record = _notebook(report.nodeid.split("::")[0])
    if report.failed:
        cell = report.nodeid.split("::", 1)[-1]
        record["failed"][cell if report.when == "call" else f"{cell} ({report.when})"] = _text(report.longrepr, 3000)
    elif report.passed and report.when == "call":
        record["passed"] += 1


def pytest_sessionfinish(session):
    path = os.environ.get("NBVAL_RECORD")
    if path:
        with open(path, "w") as f:
            json.dump(RECORD, f)
