"""An nbgrader preprocessor for feedback, wired in by nbgrader_config.py.

HideHiddenTracebacks: for feedback. In a test cell that contains hidden tests, an error
traceback shows the failing line of the hidden test; keep only the error's name and
message (the checks' messages never contain test source).
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
