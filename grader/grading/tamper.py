"""Tampering, shown and not punished: which graded or locked cells a submission changed.

nbgrader already restores edited test cells and locked cells from the source (and, with
``OverwriteCells.add_missing_cells``, deleted ones), so a changed test cell is graded as
the course wrote it. What it does not do is tell the instructor, and its own "checksum has
changed" warning fires on honest submissions whenever a test cell has hidden tests, so it
cannot tell the two apart.

FlagTampering runs first among autograde's sanitizing preprocessors, on the notebook as
the student handed it in, and compares each cell that carries nbgrader metadata with the
source as the student received it (the release: hidden tests removed, solutions not
compared): test cells and locked cells edited, deleted or duplicated, nbgrader metadata
changed (a test cell's points, a locked cell made a solution, ...; put back from the
source, so the cell is graded as the course wrote it), graded cells the source does not
have. What it finds is kept in the notebook's metadata under
``grading.tampering`` for grader.grading.execute, which reports it with the grade.

Being first, it also makes the notebook one nbgrader can grade, whichever way it is
graded (make autograde, nbgrader autograde, the formgrader): a notebook over the bounds
of a submitted notebook (grader.grading.bounds) is refused with the reason before
anything else reads it, and a cell id that breaks the notebook format (nbconvert
validates the notebook after every preprocessor, so one bad id made the whole notebook
fail) is replaced by nbformat's own normalisation, and flagged.
"""
import re
import warnings
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.grading import bounds
from grader.grading.scan import Flag, cell_text, normal_source, quoted, shown

METADATA_KEY = "grading"
COMPARED = ("grade", "solution", "locked", "task", "points")
VALID_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")  # nbformat 4.5's schema for a cell id
_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)


def released_source(cell):
    """The cell's source as the student received it: hidden tests removed."""
    return _HIDDEN.sub("", cell_text(cell.source))


def _kind(meta):
    if meta.get("grade") and not meta.get("solution"):
        return "test cell"
    if meta.get("solution"):
        return "solution cell"
    if meta.get("task"):
        return "task cell"
    return "locked cell"


def _graded(cell):
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade_id")) and any(meta.get(k) for k in ("grade", "solution", "locked", "task"))


def changes(submitted, source, restore=False):
    """Flags for every graded or locked cell of the source that the submission changed.
    restore: also put back the source's nbgrader metadata and cell type where they were
    changed, so that nbgrader grades the cell as the course wrote it (nbgrader itself
    refuses the whole notebook over "inconsistent checksums" otherwise)."""
    flags = []
    by_id = {}
    for index, cell in enumerate(submitted.cells):
        if _graded(cell):
            by_id.setdefault(cell.metadata["nbgrader"]["grade_id"], []).append((index, cell))
    known = set()
    for cell in source.cells:
        if not _graded(cell):
            continue
        meta = cell.metadata["nbgrader"]
        grade_id, kind = meta["grade_id"], _kind(meta)
        known.add(grade_id)
        found = by_id.get(grade_id, [])
        if not found:
            if not meta.get("solution"):  # an answer may move to a cell of the student's own
                flags.append(Flag("deleted", -1, 0, f"{kind} {grade_id} was deleted (graded from the source)"))
            continue
        if len(found) > 1 and not meta.get("solution"):  # a copied answer cell is the student's own
            cells = ", ".join(str(i + 1) for i, _ in found)
            flags.append(Flag("duplicated", found[1][0], 0,
                              f"{kind} {grade_id} appears {len(found)} times (cells {cells}); the first is graded"))
        index, mine = found[0]
        theirs = mine.metadata["nbgrader"]
        changed = [f"{k}: {meta.get(k)!r} -> {shown(repr(theirs.get(k)), 20)}" for k in COMPARED
                   if (meta.get(k) or None) != (theirs.get(k) or None)
                   and not (k == "points" and not meta.get("grade"))]
        if mine.cell_type != cell.cell_type and not meta.get("solution"):  # (an answer typed as
            # Markdown by accident is graded as nbgrader grades it, unflagged)
            changed.insert(0, f"cell type: {cell.cell_type} -> {shown(mine.cell_type, 20)}")
        if changed:
            flags.append(Flag("metadata", index, 0,
                              f"{kind} {grade_id}: nbgrader metadata changed ({'; '.join(changed)}); "
                              "graded from the source"))
            if restore:
                _restore(submitted, index, cell)
        if (meta.get("locked") or kind == "test cell") and not meta.get("solution") and \
                normal_source(released_source(cell)) != normal_source(mine.source):
            flags.append(Flag("edited", index, 0, f"{kind} {grade_id} was edited (graded from the source)"))
    for grade_id, found in by_id.items():
        if grade_id not in known:
            index, _ = found[0]
            flags.append(Flag("unknown", index, 0,
                              f"cell {shown(grade_id)} claims to be graded but is not in the "
                              "assignment; run as an ordinary cell"))
    return flags


def _restore(submitted, index, source_cell):
    mine = submitted.cells[index]
    meta = mine.metadata["nbgrader"]
    for key in COMPARED:
        if key in source_cell.metadata["nbgrader"]:
            meta[key] = source_cell.metadata["nbgrader"][key]
        else:
            meta.pop(key, None)
    if mine.cell_type != source_cell.cell_type and not source_cell.metadata["nbgrader"].get("solution"):
        make = nbformat.v4.new_code_cell if source_cell.cell_type == "code" else nbformat.v4.new_markdown_cell
        submitted.cells[index] = make(mine.source, metadata=mine.metadata)


class NotebookTooLarge(ValueError):
    """A submitted notebook over the bounds of grader.grading.bounds (the message says which)."""


def repair_ids(nb):
    """Give every cell whose id breaks the notebook format (nbformat 4.5 and later) a new one,
    by nbformat's own normalisation (which also makes ids unique); a flag for each."""
    if (nb.get("nbformat", 4), nb.get("nbformat_minor", 0)) < (4, 5):
        return []
    bad = [i for i, cell in enumerate(nb.cells)
           if "id" in cell and not (isinstance(cell["id"], str) and VALID_ID.match(cell["id"]))]
    flags = []
    for index in bad:
        flags.append(Flag("cell_id", index, 0, "the cell's id breaks the notebook format; it was given a new one",
                          quoted(repr(nb.cells[index]["id"]), 60)))
        del nb.cells[index]["id"]
    if bad:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbformat's warning that ids were missing: they were
            _, fixed = nbformat.validator.normalize(nb)
        for index in bad:
            nb.cells[index]["id"] = fixed["cells"][index]["id"]
    return flags


class NotANotebook(ValueError):
    """A submitted notebook that breaks the notebook format beyond what is repaired."""


def repair(nb):
    """Make a notebook nbconvert accepts (it validates it after every preprocessor): cell ids
    (repair_ids, flagged); where it is still invalid, what grading throws away anyway (code
    cells' outputs and execution counts, as nbgrader's ClearOutput does next) and metadata
    that breaks the format (nbformat's normalisation). NotANotebook where that is not enough."""
    flags = repair_ids(nb)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(nb)
        return flags
    except nbformat.ValidationError:
        pass
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, fixed = nbformat.validator.normalize(nb, strip_invalid_metadata=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(fixed)
    except nbformat.ValidationError as err:
        raise NotANotebook(f"the notebook breaks the notebook format: {shown(str(err).splitlines()[0], 200)}") from None
    nb.clear()
    nb.update(nbformat.from_dict(fixed))
    return flags


class FlagTampering(NbGraderPreprocessor):
    """Record (never undo or punish) what a submission changed in graded and locked cells;
    refuse a notebook over the bounds, and repair cell ids that break the format."""

    def preprocess(self, nb, resources):
        problem = bounds.cells_problem(nb)
        if problem:
            raise NotebookTooLarge(f"the notebook is larger than a notebook may be: {problem}")
        info = resources.get("nbgrader", {})
        source = self._source(info.get("assignment"), info.get("notebook"))
        found = repair(nb)
        found += changes(nb, source, restore=True) if source is not None else []
        nb.metadata.setdefault(METADATA_KEY, {})["tampering"] = [vars(f) for f in found]
        return nb, resources

    def _source(self, assignment, notebook):
        if not assignment or not notebook:
            return None
        from nbgrader.coursedir import CourseDirectory

        coursedir = CourseDirectory(config=self.config)
        path = Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / f"{notebook}.ipynb"
        return nbformat.read(path, as_version=4) if path.is_file() else None


def taken(nb):
    """The tampering flags FlagTampering left in the notebook, removed from it."""
    meta = nb.metadata.get(METADATA_KEY, {})
    found = [Flag(**f) for f in meta.pop("tampering", [])]
    if not meta:
        nb.metadata.pop(METADATA_KEY, None)
    return found

