"""An honest student graded in the same run as hostile classmates (two workers of the
embedded Dask cluster, the `make autograde` path) keeps the score of a quiet run: the
classmates' processes spend their own sandbox's CPU, memory and process limits, never
the honest student's budget."""
import nbformat
import pytest

from conftest import CLASS_ASSIGNMENT as A, db_scores
from support import synthetic
from grader.grading.autograde import Grading
from grader.grading.status import Status
from grader.isolation import cgroups, isolation_available

available, why = isolation_available()
support = cgroups.support()
pytestmark = [pytest.mark.skipif(not available, reason=f"no isolation here: {why}"),
              pytest.mark.skipif(not support.version, reason=support.reason),
              pytest.mark.xdist_group("isolation")]

GiB = 2**30
BUDGET = 40  # CPU seconds per notebook (the honest notebook needs well under 10)
HOSTILE = {
    "spinners": "import subprocess\n"
                "spinners = [subprocess.Popen(['/bin/sh', '-c', 'while :; do :; done']) for _ in range(120)]",
    "memory_spread": "import subprocess, sys\n"
                     "code = \"x = bytearray(300 * 2**20); x[::4096] = b'1' * len(x[::4096]); "
                     "import time; time.sleep(600)\"\n"
                     "hogs = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(8)]",
    "fork_bomb": "import os\nwhile True:\n    os.fork()",
}


def hostile(root, name, code):
    """A correct submission with `code` in a cell of its own after the first code cell."""
    folder = synthetic.make_submission(root, name, A, "correct")
    path = folder / f"{A}.ipynb"
    nb = nbformat.read(path, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(code))
    nbformat.write(nb, path)


def test_an_honest_student_keeps_a_quiet_runs_score_beside_hostile_classmates(tmp_path):
    root = synthetic.make_course(tmp_path / "course")
    with open(root / "nbgrader_config.py", "a") as config:  # 2 GiB per sandbox, all processes
        config.write(f"\nc.SandboxProvisioner.total_memory = {2 * GiB}\n")
    synthetic.make_submission(root, "honest", A, "correct")
    Grading(root, jobs=1, budget=BUDGET).run(progress=False)
    quiet = db_scores(root)["honest"]
    verdicts = lambda entry: {cell: [(o["label"].split(" (hidden")[0], o["passed"]) for o in outs]
                              for cell, outs in entry["notebooks"][A]["outcomes"].items()}
    quiet_verdicts = verdicts(Status(root).get("honest", A))

    for name, code in HOSTILE.items():
        hostile(root, name, code)
    Grading(root, jobs=2, budget=BUDGET, force=True).run(progress=False)
    status, scores = Status(root), db_scores(root)
    honest = status.get("honest", A)
    assert honest["status"] == "graded", honest.get("reason")
    assert scores["honest"] == quiet and verdicts(honest) == quiet_verdicts
    for name in HOSTILE:
        entry = status.get(name, A)
        assert entry["status"] in ("graded", "needs_attention"), (name, entry)
        if entry["status"] == "needs_attention":
            assert entry.get("reason"), name
