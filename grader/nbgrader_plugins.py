"""Three small nbgrader preprocessors, wired in by nbgrader_config.py.

BudgetedExecute: nbgrader's Execute with a time budget for the whole notebook. Each
cell may run for the per-cell timeout, but never past the notebook's budget; once the
budget is spent, the remaining code cells are not run and get an error output (so their
tests score 0). A hanging submission therefore costs one budget, not timeout x cells.

HideHiddenTracebacks: for feedback. In a test cell that contains hidden tests, an error
traceback shows the failing line of the hidden test; keep only the error's name and
message (the checks' messages never contain test source).

ClearWidgetState: for the release. The executed sources keep the state of their widgets
in the notebook's metadata; nbgrader clears cell outputs but not that, so it would ship
to students as a stale copy of the instructor's widgets.
"""
import time

from nbformat.notebooknode import NotebookNode
from traitlets import Integer

from nbgrader.preprocessors import Execute, NbGraderPreprocessor

BUDGET_ERROR = "NotebookTimeBudgetExceeded"


class BudgetedExecute(Execute):
    notebook_budget = Integer(
        180, help="Seconds the whole notebook may run; later cells are skipped.").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_budget
        return super().preprocess(nb, resources, km)

    def _remaining(self):
        return getattr(self, "_deadline", float("inf")) - time.monotonic()

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        remaining = self._remaining()
        if remaining == float("inf"):
            return timeout
        return max(1, min(timeout or remaining, int(remaining) + 1))

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self._remaining() <= 0:
            message = (f"the notebook used up its time budget of {self.notebook_budget} s; "
                       "this cell was not run")
            cell.outputs = [NotebookNode(output_type="error", ename=BUDGET_ERROR, evalue=message,
                                         traceback=[f"{BUDGET_ERROR}: {message}"])]
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


class HideHiddenTracebacks(NbGraderPreprocessor):
    begin = "### BEGIN HIDDEN TESTS"

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self.begin in cell.source:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


class ClearWidgetState(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return nb, resources
