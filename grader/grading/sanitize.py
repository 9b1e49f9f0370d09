"""A sanitizing preprocessor for autograde, configured in nbgrader_config.py.

DropDuplicateIds: a student who copies a solution or test cell hands in two cells with
one grade_id. nbgrader's DeduplicateIds keeps the last and empties the other's nbgrader
metadata, which OverwriteCells then trips over (KeyError: 'grade_id'), failing the whole
notebook. Here the copy loses its nbgrader metadata entirely: it becomes an ordinary
cell of the student's, run like any other, and the first cell with that grade_id is the
one graded.
"""
from nbgrader.preprocessors import DeduplicateIds


class DropDuplicateIds(DeduplicateIds):
    def preprocess(self, nb, resources):
        self.grade_ids = set()
        for index, cell in enumerate(nb.cells):
            nb.cells[index], resources = self.preprocess_cell(cell, resources, index)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader")
        if not meta or not (meta.get("grade") or meta.get("solution") or meta.get("locked")):
            return cell, resources
        grade_id = meta.get("grade_id")
        if grade_id in self.grade_ids:
            self.log.warning("Cell with id '%s' exists more than once; the copy is graded as "
                             "an ordinary cell", grade_id)
            del cell.metadata["nbgrader"]
        else:
            self.grade_ids.add(grade_id)
        return cell, resources
