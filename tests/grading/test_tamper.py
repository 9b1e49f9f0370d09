"""Tampering is shown, not punished: which graded and locked cells a submission changed."""
import copy

import nbformat
import pytest

from support import synthetic
from grader.grading import layout
from grader.grading.tamper import changes

A = "05_scaled_attention"
ROOT = layout.ROOT


def source():
    return nbformat.read(ROOT / "solutions" / A / f"{A}.ipynb", as_version=4)


def graded_cells(nb):
    return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
            and not c.metadata["nbgrader"].get("solution")]


@pytest.mark.parametrize("variant", sorted(set(synthetic.HONEST) - {"duplicated_test_cell"}))
def test_honest_submissions_are_not_flagged(variant):
    nb = synthetic.HONEST[variant](ROOT, A, A)
    assert changes(nb, source()) == []


@pytest.mark.parametrize("variant", ["correct", "stub", "softmax_wrong_dim"])
def test_released_and_answered_notebooks_are_not_flagged(variant):
    assert changes(synthetic.VARIANTS[variant](ROOT, A, A), source()) == []


def _ids(flags):
    return sorted((f.kind, f.detail.split()[2] if f.kind != "unknown" else f.detail.split()[1]) for f in flags)


def test_edited_deleted_duplicated_test_cells_are_named():
    nb = synthetic.answered(ROOT, A, A)
    tests = graded_cells(nb)
    tests[0].source += "\nprint('all good')"
    nb.cells.remove(tests[1])
    nb.cells.insert(nb.cells.index(tests[2]) + 1, copy.deepcopy(tests[2]))
    flags = changes(nb, source())
    gid = lambda c: c.metadata["nbgrader"]["grade_id"]
    assert _ids(flags) == sorted([("edited", gid(tests[0])), ("deleted", gid(tests[1])),
                                  ("duplicated", gid(tests[2]))])
    assert all("graded from the source" in f.detail or "first is graded" in f.detail for f in flags)


def test_changed_metadata_is_named_and_put_back():
    nb = synthetic.answered(ROOT, A, A)
    test = graded_cells(nb)[0]
    test.metadata["nbgrader"].update(locked=False, solution=True, grade=False)
    graded_cells(nb)[-1].metadata["nbgrader"]["points"] = 100
    flags = changes(nb, source(), restore=True)
    assert [f.kind for f in flags] == ["metadata", "metadata"]
    assert "solution: False -> True" in flags[0].detail and "points: 2 -> 100" in flags[1].detail
    assert changes(nb, source()) == []  # restored: nothing left to flag


def test_a_cell_claiming_a_grade_id_the_source_lacks_is_named():
    nb = synthetic.answered(ROOT, A, A)
    extra = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "my_bonus", "locked": True, "points": 50, "solution": False}})
    nb.cells.append(extra)
    flags = changes(nb, source())
    assert [(f.kind, "my_bonus" in f.detail) for f in flags] == [("unknown", True)]


def test_every_notebook_answered_is_unflagged():
    for src in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        a = src.parent.name
        nb = synthetic.answered(ROOT, a, src.stem)
        assert changes(nb, nbformat.read(src, as_version=4)) == [], a


def test_an_answer_moved_out_of_a_deleted_solution_cell_is_not_tampering():
    nb = synthetic.answered(ROOT, A, A)
    solution = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    nb.cells[nb.cells.index(solution)] = nbformat.v4.new_code_cell(solution.source)
    assert changes(nb, source()) == []


def test_flags_quote_no_markup_from_a_forged_cell():
    nb = synthetic.answered(ROOT, A, A)
    nb.cells.append(nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "<img src=x onerror=alert(1)>", "locked": True, "points": 1,
        "solution": "<b>yes</b>"}}))
    text = " ".join(f.text() for f in changes(nb, source()))
    assert text and "<" not in text and ">" not in text


BAD_ID = 'zz"><img src=x onerror=alert(1)>'


def test_a_cell_id_that_breaks_the_format_is_repaired_and_flagged():
    """nbconvert validates the notebook after each preprocessor: FlagTampering, the first,
    gives the cell a new id by nbformat's own normalisation, so the notebook is graded."""
    from grader.grading.tamper import FlagTampering

    nb = synthetic.answered(ROOT, A, A)
    ids = [c.get("id") for c in nb.cells]
    nb.cells[3]["id"] = BAD_ID
    nb.cells[5]["id"] = ids[4]  # and a duplicate, which the same normalisation makes unique
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(copy.deepcopy(nb))
    resources = {"nbgrader": {"assignment": A, "notebook": A}}
    tamper = FlagTampering(config=layout.load_config(ROOT))
    nb, _ = tamper.preprocess(nb, resources)
    nbformat.validate(nb)
    assert nb.cells[3]["id"] not in (BAD_ID, ids[3]) and len({c["id"] for c in nb.cells}) == len(nb.cells)
    flags = nb.metadata["grading"]["tampering"]
    assert [(f["kind"], f["cell"]) for f in flags] == [("cell_id", 3)]
    assert "<" not in flags[0]["quote"] and "zz" in flags[0]["quote"]


def test_a_notebook_over_the_bounds_is_refused_by_every_way_of_grading():
    """nbgrader autograde and the formgrader run FlagTampering first too."""
    from grader.grading.tamper import FlagTampering, NotebookTooLarge

    nb = synthetic.answered(ROOT, A, A)
    nb.cells += [nbformat.v4.new_code_cell("pass") for _ in range(600)]
    with pytest.raises(NotebookTooLarge, match=f"{len(nb.cells)} cells; a notebook may have at most 500"):
        FlagTampering().preprocess(nb, {})


def test_outputs_and_metadata_that_break_the_format_are_thrown_away_and_the_notebook_graded():
    """Outputs are cleared by grading anyway; metadata the format does not allow is
    stripped (nbformat's normalisation); a cell type the format does not know is refused."""
    from grader.grading.tamper import FlagTampering, NotANotebook

    nb = synthetic.answered(ROOT, A, A)
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[0]["outputs"] = [{"output_type": "stream", "name": "stdout"}]  # no text
    code[1]["execution_count"] = "x"
    nb.cells[0]["metadata"]["jupyter"] = {"source_hidden": "yes"}
    tamper = FlagTampering(config=layout.load_config(ROOT))
    nb, _ = tamper.preprocess(nb, {"nbgrader": {"assignment": A, "notebook": A}})
    nbformat.validate(nb)
    assert nb.metadata["grading"]["tampering"] == []
    nb.cells[2]["cell_type"] = "poem"
    with pytest.raises(NotANotebook, match="breaks the notebook format"):
        tamper.preprocess(nb, {"nbgrader": {"assignment": A, "notebook": A}})
