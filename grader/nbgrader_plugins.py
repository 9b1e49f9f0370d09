"""Two small nbgrader preprocessors, wired in by nbgrader_config.py.

HideHiddenTracebacks: for feedback. In a test cell that contains hidden tests, an error
traceback shows the failing line of the hidden test; keep only the error's name and
message (the checks' messages never contain test source).

ClearWidgetState: for the release. The executed sources keep the state of their widgets
in the notebook's metadata; nbgrader clears cell outputs but not that, so it would ship
to students as a stale copy of the instructor's widgets.
"""
from nbgrader.preprocessors import NbGraderPreprocessor


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
