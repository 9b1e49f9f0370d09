"""A notebook's idle time is its own, through the pipeline make autograde runs (nbgrader
autograde in a sandboxed kernel, the worker's result, the merge into the gradebook and
autograded/.status.json, the next run's plan), graded in this process:

- a notebook that sleeps through its budget (13 cells of `time.sleep(59)`) is graded,
  once: the checks before the sleep keep their points, the cells after time out, and it
  takes about its budget, not its wall-clock ceiling;
- a notebook the machine starves (a CPU quota on its sandbox while one cell runs:
  tests/support/starve.py) needs attention the first time, "the machine was too busy"
  with what was measured, and the next run grades it on its wall-clock ceiling: the
  checks before keep their points, the rest time out; the run after that skips it.

Both verdicts hold on any machine: the sleep and the quota spend the time by construction."""
import tempfile
import warnings

import nbformat
import pytest

from grader.grading import layout
from grader.grading.autograde import Grading
from grader.grading.results import GRADED, NEEDS_ATTENTION
from grader.grading.status import Status
from grader.grading.submission import grade_submission
from grader.isolation import cgroups, isolation_available
from support import starve, synthetic

available, why = isolation_available()
support = cgroups.support()
pytestmark = [pytest.mark.skipif(not available, reason=f"no isolation here: {why}"),
              pytest.mark.skipif(not support.version, reason=support.reason),
              pytest.mark.grading, pytest.mark.xdist_group("idle_time")]

A = "03_masked_softmax"  # masked_softmax's checks (10 points), then causal_weights' (10)
FIRST = {"test_masked_softmax_output", "test_masked_softmax_rows", "test_masked_softmax_masked",
         "test_masked_softmax_empty_rows", "test_masked_softmax_values"}
SECOND = {"test_causal_weights_output", "test_causal_weights_rows", "test_causal_weights_causal",
          "test_causal_weights_values"}
SLEEP_BUDGET = 10  # the cells before the sleep are charged about 1.7 s (2-core machine, load 9)
STARVED_BUDGET, STARVED_WALL_FACTOR = 6, 3


def _submission(root, student, extra_cells):
    """A correct notebook with extra_cells put after masked_softmax's last check."""
    nb = synthetic.answered(root, A, A)
    at = next(i for i, c in enumerate(nb.cells)
              if c.metadata.get("nbgrader", {}).get("grade_id") == "test_masked_softmax_values")
    nb.cells[at + 1:at + 1] = [nbformat.v4.new_code_cell(src) for src in extra_cells]
    folder = root / "submitted" / student / A
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{A}.ipynb")


def _run(root, budget):
    """One make-autograde run, graded in this process: plan, grade each job, merge.
    [(job, result)] and the number skipped as unchanged."""
    grading = Grading(root, jobs=1, budget=budget)
    layout.ensure_gradebook(root, grading.config)
    todo, refused, skipped = grading.plan()
    assert not refused, refused
    layout.add_students(root, grading.config, sorted({s for s, *_ in todo}))
    done = []
    with tempfile.TemporaryDirectory(prefix="idle-") as work, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy notices, as make autograde does
        for job, fp in grading.complete_jobs(todo, work):
            result = grade_submission(job)
            grading.merge(result, fp)
            done.append((job, result))
    grading.status.flush()
    return done, skipped


def _errors(cell):
    return " ".join(o.get("evalue", "") for o in cell.get("outputs", []) if o.output_type == "error")


def _points(result):
    grades = result.notebooks[A].grades
    return {g: grades[g].auto_score for g in FIRST | SECOND}


def test_a_notebook_that_sleeps_is_graded_once_with_its_early_points(tmp_path):
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    _submission(root, "sleeper", ["import time\ntime.sleep(59)"] * 13)
    [(job, result)], _ = _run(root, SLEEP_BUDGET)
    assert result.status == GRADED and not result.retry, result.reason
    points = _points(result)
    assert sum(points[g] for g in FIRST) == 10, points  # the checks before the sleep
    assert sum(points[g] for g in SECOND) == 0, points  # not reached: timed out
    checks = result.notebooks[A].checks
    assert checks.budget_exceeded and not checks.stalled  # stopped at its budget, not its ceiling
    graded = nbformat.reads(result.files[f"{A}.ipynb"].decode(), as_version=4)
    slept = [_errors(c) for c in graded.cells if c.source == "import time\ntime.sleep(59)"]
    assert "ran for more than" in slept[0] and "waiting" in slept[0], slept[0]
    assert all(f"timed out: the notebook used up its time budget of {SLEEP_BUDGET} s" in text
               for text in slept[1:]), "\n".join(slept)  # in full: pytest cuts a list's repr
    entry = Status(root).get("sleeper", A)
    assert entry["status"] == GRADED and entry["fingerprint"]
    for cell in SECOND:  # each test cell not reached says so in the status, as the report reads it
        [outcome] = entry["notebooks"][A]["outcomes"][cell]
        assert not outcome["passed"] and "not checked: timed out: the notebook used up its time budget" \
            in outcome["message"], outcome
    assert _run(root, SLEEP_BUDGET) == ([], 1)  # graded once: the next run skips it


def test_a_starved_notebook_needs_attention_once_then_is_graded_on_its_ceiling(tmp_path):
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    with open(root / "nbgrader_config.py", "a") as f:
        f.write("\n# the machine starves the sandbox while a cell marked '# starved' runs\n"
                "c.Autograde.autograde_preprocessors = [\n"
                "    'support.starve.StarvedExecute' if p == 'grader.grading.execute.GradingExecute' else p\n"
                "    for p in c.Autograde.autograde_preprocessors]\n"
                f"c.GradingExecute.wall_factor = {STARVED_WALL_FACTOR}\n")
    _submission(root, "starved", [f"{starve.MARK}\nwhile True:\n    pass"])

    [(job, result)], _ = _run(root, STARVED_BUDGET)
    assert not job.settings.grade_at_ceiling
    assert result.status == NEEDS_ATTENTION and result.retry
    assert "the machine was too busy" in result.reason and "for a CPU" in result.reason, result.reason
    entry = Status(root).get("starved", A)
    assert entry["status"] == NEEDS_ATTENTION and entry["fingerprint"] is None and entry["starved"]

    [(job, result)], _ = _run(root, STARVED_BUDGET)  # the second time: graded on its ceiling
    assert job.settings.grade_at_ceiling
    assert result.status == GRADED and not result.retry, result.reason
    points = _points(result)
    assert sum(points[g] for g in FIRST) == 10 and sum(points[g] for g in SECOND) == 0, points
    assert result.notebooks[A].checks.budget_exceeded
    entry = Status(root).get("starved", A)
    assert entry["status"] == GRADED and "starved" not in entry
    assert _run(root, STARVED_BUDGET) == ([], 1)
