"""What a graded notebook keeps of its outputs is bounded in bytes: each output, each cell,
the whole notebook, with a note where something was cut; and a submitted notebook is read
within bounds (cells, text, JSON nesting and size), else it needs attention with the reason."""
import json

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode

from grader.grading.bounds import OutputBounds, cut, output_size

KB = 2**10
NOTE = 512  # at most, the note that says what was cut


def stream(text):
    return NotebookNode(output_type="stream", name="stdout", text=text)


def test_one_long_line_keeps_its_head_and_a_note():
    bounds = OutputBounds(output=10 * KB, cell=40 * KB, notebook=100 * KB)
    kept = bounds.admit(stream("x" * (3 * 2**20)), 0)
    assert output_size(kept) <= 10 * KB
    assert kept.text.startswith("x" * 1000) and "output cut: 3.0 MiB of output" in kept.text
    assert "one output" in kept.text
    # the cell still has room: a later, small output of it is kept whole
    assert bounds.admit(stream("after\n"), 0).text == "after\n"


def test_a_cell_and_the_notebook_are_bounded_in_all():
    bounds = OutputBounds(output=10 * KB, cell=20 * KB, notebook=60 * KB)
    kept = [bounds.admit(stream("y" * (8 * KB)), 0) for _ in range(6)]
    assert [k is None for k in kept] == [False, False, False, True, True, True]
    assert kept[1].text == "y" * (8 * KB)
    assert "this cell's outputs" in kept[2].text and sum(output_size(k) for k in kept[:3]) <= 20 * KB
    for cell in range(1, 10):
        for _ in range(4):
            bounds.admit(stream("z" * (8 * KB)), cell)
    assert 60 * KB - 8 * KB < bounds.total <= 60 * KB + NOTE  # a cut output carries its note
    assert bounds.admit(stream("late"), 11) is None


def test_multibyte_text_is_counted_in_bytes_and_cut_between_characters():
    bounds = OutputBounds(output=4 * KB, cell=8 * KB, notebook=8 * KB)
    kept = bounds.admit(stream("\u00e9\u4e2d" * 10_000), 0)
    assert len(json.dumps(dict(kept), ensure_ascii=False).encode()) <= 4 * KB + 200
    kept.text.encode("utf-8")  # whole characters only


def test_images_and_errors_keep_their_text_only():
    image = NotebookNode(output_type="display_data", metadata={},
                         data={"image/png": "A" * 50_000, "text/plain": "<Figure>"})
    small = cut(image, 1 * KB, "too big")
    assert set(small.data) == {"text/plain"} and small.data["text/plain"].startswith("<Figure>")
    error = NotebookNode(output_type="error", ename="ValueError", evalue="v" * 50_000,
                         traceback=["t" * 50_000])
    assert output_size(cut(error, 2 * KB, "too big")) <= 2 * KB
    nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        outputs=[small, cut(error, 2 * KB, "too big"), cut(stream("s" * 9000), KB, "x")])]))


def test_a_graded_run_keeps_a_bounded_notebook(tmp_path):
    """The grading preprocessor, in a real kernel: a 30 MB line and many small prints."""
    from grader.grading.execute import GradingExecute

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("print('a' * 30_000_000)"),
        nbformat.v4.new_code_cell("for i in range(20000): print('line', i)"),
        nbformat.v4.new_code_cell("print('still here')"),
    ])
    ex = GradingExecute(kernel_name="python3", timeout=120, max_output_bytes=64 * KB,
                        max_cell_output_bytes=128 * KB, max_notebook_output_bytes=512 * KB)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    size = len(nbformat.writes(nb).encode())
    assert size < 600 * KB, size
    first = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert first.startswith("aaaa") and "output cut: 28.6 MiB of output" in first
    second = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    # (how the 20,000 lines are split into messages depends on the kernel's timing: the cell
    # keeps at most its bound, whichever messages that is)
    assert second.startswith("line 0\n") and "output cut" in second
    assert len(second.encode()) <= 128 * KB + 2 * KB
    assert "".join(o.get("text", "") for o in nb.cells[2].outputs) == "still here\n"


# --- a submitted notebook is read within bounds ------------------------------------------------

def _notebook_text(cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    return nbformat.writes(nb)


def test_a_notebook_of_twenty_thousand_cells_needs_attention_with_the_reason():
    from grader.grading.submission import check_notebooks

    text = _notebook_text([nbformat.v4.new_code_cell("pass") for _ in range(20_000)])
    reason = check_notebooks({"05.ipynb": text.encode()}, ["05"])
    assert reason == "05.ipynb is larger than a notebook may be: it has 20,000 cells; a notebook may have at most 500"


def test_a_notebook_of_nested_markup_over_the_bounds_needs_attention_with_the_reason():
    """The issue's 5.3 MB notebook of nested <div> cells (it held a worker 20 minutes)."""
    from grader.grading.submission import check_notebooks

    cell = "<div>" * 20_000 + "x" + "</div>" * 20_000  # 220 KB
    text = _notebook_text([nbformat.v4.new_markdown_cell(cell) for _ in range(24)])
    assert len(text) > 5_000_000
    reason = check_notebooks({"05.ipynb": text.encode()}, ["05"])
    assert reason == ("05.ipynb is larger than a notebook may be: its cells hold 5.0 MiB of text; a notebook "
                      "may hold at most 2.0 MiB")


@pytest.mark.parametrize("build,words", [
    (lambda: '{"cells": [], "metadata": {"x": ' + "[" * 5000 + "]" * 5000 + "}}", "nested more than 64 deep"),
    (lambda: '{"cells": [], "metadata": {"x": ' + "[" * 70 + "]" * 70 + "}}", "nested more than 64 deep"),
    (lambda: '{"cells": [], "metadata": {"x": [' + ",".join(["0"] * 20_001) + "]}}", "more than 20,000 values"),
    (lambda: _notebook_text([nbformat.v4.new_code_cell("x = 1; " * 100_000)]), "cell 1 holds"),
])
def test_json_nested_or_counted_beyond_the_bounds_is_refused_unread(build, words):
    from dataclasses import replace

    from grader.grading.bounds import LIMITS, too_large

    assert words in too_large(build(), replace(LIMITS, values=20_000))


def test_the_course_notebooks_are_well_within_the_bounds():
    from grader.grading.bounds import too_large
    from grader.grading.layout import ROOT

    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        assert too_large(path.read_text()) is None, path


def test_a_message_over_the_bound_is_refused_unread_and_the_notebook_says_so(tmp_path):
    """Code that goes around the kernel's own bounds and sends a 20 MB message itself, on
    IOPub and on the shell channel: the grading process's sockets refuse it before reading
    it (its memory stays small), connect again, and the cells say an output was dropped;
    the cells after it run and are read as usual. An exception with a 30 MB message is cut
    in the kernel."""
    import resource

    from grader.grading.execute import GradingExecute
    from grader.grading.kernel_client import DROPPED

    send = ("k = get_ipython().kernel\nk.session.send({socket}, {kind!r}, {{'name': 'stdout', 'status': 'ok', "
            "'text': 'x' * 20_000_000}}, parent=k.get_parent(){ident})\n")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(send.format(socket="k.iopub_socket", kind="stream", ident="")),
        nbformat.v4.new_code_cell("print('still here')"),
        nbformat.v4.new_code_cell(send.format(socket="k.shell_stream", kind="execute_reply",
                                              ident=", ident=k._parent_ident['shell']")),
        nbformat.v4.new_code_cell("raise ValueError('y' * 30_000_000)"),
        nbformat.v4.new_code_cell("print('the end')"),
    ])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ex = GradingExecute(kernel_name="python3", timeout=120)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    text = ["".join(o.get("text", "") + o.get("evalue", "") for o in cell.outputs) for cell in nb.cells]
    assert "output dropped unread: the kernel sent a message of more than 16.0 MiB" in text[0]
    assert text[1] == "still here\n"
    assert DROPPED in [o.get("ename") for o in nb.cells[2].outputs], nb.cells[2].outputs
    assert text[3].startswith("yyyy") and "output cut: 28.6 MiB of output" in text[3]
    assert len(nbformat.writes(nb)) < 3 * 2**20
    assert text[4] == "the end\n"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 2**10  # KiB: nothing of 20 MB read
