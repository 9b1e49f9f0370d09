"""Two small nbgrader preprocessors and the gradebook's schema version, wired in by
nbgrader_config.py.

HideHiddenTracebacks: for feedback. In a test cell that contains hidden tests, an error
traceback shows the failing line of the hidden test; keep only the error's name and
message (the checks' messages never contain test source).

ClearWidgetState: for the release. The executed sources keep the state of their widgets
in the notebook's metadata; nbgrader clears cell outputs but not that, so it would ship
to students as a stale copy of the instructor's widgets.

read_schema_version_in_process: each time nbgrader creates a gradebook it starts an
`alembic heads` process to learn the newest schema version of its migrations (about 6 s of
CPU here, as that process imports nbgrader again, and a FileNotFoundError where the
virtual environment's bin/ is not on PATH). The same migrations are read here, in this
process, through alembic's own API.
"""
import functools
import os

from nbgrader.preprocessors import NbGraderPreprocessor


@functools.lru_cache(maxsize=1)
def schema_version():
    """The head revision of the installed nbgrader's gradebook migrations."""
    import nbgrader
    from alembic.script import ScriptDirectory

    return ScriptDirectory(os.path.join(os.path.dirname(nbgrader.__file__), "alembic")).get_current_head()


def read_schema_version_in_process():
    import nbgrader.api

    nbgrader.api.get_alembic_version = schema_version


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
