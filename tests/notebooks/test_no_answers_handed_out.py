"""No answer on screen: nothing a student can read holds an exercise's answer.

The answers are the solution regions of solutions/ (### BEGIN SOLUTION ... ### END
SOLUTION). What a student reads is the released notebook (notebooks/: its code cells
outside the solution regions, its Markdown, the code spans and code blocks of its text,
the collapsed hints and answers included) and notebook_helpers/. For every exercise, its
own notebook (every cell, before and after the exercise: a student sees the whole
notebook), every later notebook and notebook_helpers/ must hold its answer neither

- line for line: no answer line that computes something (normalised: no assignment
  target, no `self.`, no spaces, one kind of quote) appears in a line of code or text;
- in substance: no tree of operations of the answer with two operations or more
  (tests/support/code_shapes.py: names, layout and spelling taken out, `.mT` the same as
  `.transpose(-2, -1)`, variables followed back to what was assigned to them, so a
  demonstration split over several lines or cells counts too) appears in a tree of the
  given code.

Demonstrations teach the idea on numbers, a picture or another operation; the few
building blocks a notebook demonstrates on purpose are listed in ALLOWED with the reason.

A hint the checks can show (the mistakes' hints, the findings of the diagnosis) must not
hold an answer's line either.
"""
import ast
import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from support.code_shapes import Shapes, contains, ops, show, subtrees, trees_of
from support.paths import ROOT

SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
MESSAGE_MODULES = ("checks/**/*.py", "answers/mistakes.py")  # the strings a check can show
MIN_LENGTH = 12  # shorter lines (`return wei`, `T = x.shape[1]`) say nothing of an answer
HELPERS = "notebook_helpers"
# (the answer's notebook, a tree of it shown by code_shapes.show): why a notebook may show it
ALLOWED = {
    ("02_tril_matmul", "tril(ones(?, ?))"):
        "02 demonstrates running sums with tril(ones) @ b (the curriculum's first matrix trick); "
        "the exercise is the row normalisation that turns them into averages",
}
# Answers too short to hold a tree of two operations: only their lines that compute something
# (if any) are looked for.
SHORT = {
    ("02_tril_matmul", "bag_of_words_matmul"): "Part A's weights times x, one product (the table above the exercise shows its shapes)",
    ("06_multi_head", "MultiHeadAttention"): "the student's heads in a ModuleList, one torch.cat, one projection",
}
# The notebooks as they were when issue #29 was filed (main, d8a8f05), and the places the
# issue names that hold an answer: the test must find each of them there.
BEFORE = "d8a8f05"
NAMED_BY_THE_ISSUE = {
    ("02_tril_matmul", "02_tril_matmul", 3), ("03_masked_softmax", "03_masked_softmax", 3),
    ("04_single_head", "04_single_head", 14), ("04_single_head", "04_single_head", 23),
    ("07_transformer_block", "07_transformer_block", 6), ("07_transformer_block", "07_transformer_block", 17),
    ("07_transformer_block", "07_transformer_block", 24), ("07_transformer_block", "07_transformer_block", 35),
    ("05_scaled_attention", "08_attention_at_scale", 20), ("06_multi_head", "06_multi_head", 14),
    ("04_single_head", "05_scaled_attention", 19), ("05_scaled_attention", "05_scaled_attention", 19),
    ("07_transformer_block", "08_attention_at_scale", 42), ("07_transformer_block", f"{HELPERS}/tinylm.py", 0),
    ("06_multi_head", "06_multi_head", 3), ("03_masked_softmax", "03_masked_softmax", 0),
}


@dataclass(frozen=True)
class Answer:
    notebook: str  # the folder of the notebook it answers
    grade_id: str
    patterns: frozenset  # trees of two operations or more
    lines: frozenset  # normalised lines that compute something


@dataclass(frozen=True)
class Screen:
    """What a student reads in one place: a notebook's cell, or a helper module (cell 0)."""
    place: str  # a notebook's folder, or notebook_helpers/<module>.py
    cell: int
    trees: tuple
    lines: tuple  # normalised


# --- normalising lines -----------------------------------------------------------------

def normalise(line):
    """A line of code as comparable text: no comment, no assignment target, no `return`,
    no `self.`, no spaces, one kind of quote."""
    code = line.split("#", 1)[0].strip()
    code = re.sub(r"^[\w\s,\[\]\.]+=(?!=)", "", code)  # `x = ...`, `self.k_cache, self.v_cache = ...`
    code = re.sub(r"^return\s+", "", code.strip())
    code = code.replace("self.", "").replace("'", '"')
    return re.sub(r"\s+", "", code)


def computes(line):
    """Whether a line of an answer computes something: a torch operation, not a size, a
    loop header or the declaration of a layer (the exercise's own text names its layers)."""
    code = re.sub(r"^[\w\s,\[\]\.]+=(?!=)", "", line.split("#", 1)[0].strip()).strip()
    code = re.sub(r"^return\s+", "", code)
    if re.match(r"(for|if|elif|while|with|def|class|else)\b", code):
        return False
    if re.match(r"(torch\.)?nn\.\w+\(", code):
        return False  # a layer the exercise declares: its text names it
    return any(ops(tree) >= 1 for tree in trees_of(code))


def significant(code):
    return len(code) >= MIN_LENGTH and not re.fullmatch(r"\w+\.shape(\[[-\d:]+\])?", code)


# --- the answers -----------------------------------------------------------------------

def region_lines(source):
    """The 1-based numbers of the lines inside the solution regions of a cell."""
    lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside:
            lines.add(number)
    return lines


@functools.lru_cache(maxsize=None)
def answers(root=ROOT):
    """Every solution cell's answer, in notebook order."""
    found = []
    for path in sorted(Path(root, "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("solution") or meta.get("grade"):
                continue
            trees = Shapes().add(cell.source, lines=region_lines(cell.source))
            patterns = {sub for tree in trees for sub in subtrees(tree) if ops(sub) >= 2}
            lines = {normalise(line) for region in SOLUTION.findall(cell.source)
                     for line in region.splitlines() if computes(line)}
            found.append(Answer(path.parent.name, meta["grade_id"], frozenset(patterns),
                                frozenset(code for code in lines if significant(code))))
    return tuple(found)


# --- what a student reads ----------------------------------------------------------------

def text_code(markdown):
    """The pieces of code a Markdown cell shows: its code blocks and its `code spans`."""
    blocks = re.findall(r"```[^\n]*\n(.*?)```", markdown, re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", markdown, flags=re.S))
    return blocks + spans


def notebook_screens(path):
    nb = nbformat.read(path, as_version=4)
    shapes, screens = Shapes(), []  # one Shapes: the cells share their variables
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code":
            if meta.get("grade"):
                continue  # a test cell: calls of the checks
            source = "\n".join(line for line in cell.source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            trees = shapes.add(source, tag=index)
            lines = [normalise(line) for line in cell.source.splitlines()]
        else:
            pieces = text_code(cell.source)
            trees = [tree for piece in pieces for tree in trees_of(piece)]
            lines = [normalise(line) for piece in pieces for line in piece.splitlines()]
        screens.append(Screen(path.parent.name, index, tuple(trees), tuple(lines)))
    return screens


@functools.lru_cache(maxsize=None)
def screens(root=ROOT):
    """Everything a student reads: every released notebook's cells, every helper module."""
    found = []
    for path in sorted(Path(root, "notebooks").glob("*/*.ipynb")):
        found += notebook_screens(path)
    for path in sorted(Path(root, HELPERS).glob("*.py")):
        source = path.read_text()
        found.append(Screen(f"{HELPERS}/{path.name}", 0, tuple(Shapes().add(source)),
                            tuple(normalise(line) for line in source.splitlines())))
    return tuple(found)


def in_view(answer, place):
    """The places where an answer must not be: its own notebook, later ones, the helpers."""
    return place.startswith(f"{HELPERS}/") or place >= answer.notebook


def leaks(root=ROOT):
    """[(answer's notebook, place, cell, what it holds)] for every answer in view."""
    found = []
    for answer in answers(root):
        allowed = {shown for (notebook, shown) in ALLOWED if notebook == answer.notebook}
        patterns = [p for p in answer.patterns if show(p) not in allowed]
        for screen in screens(root):
            if not in_view(answer, screen.place):
                continue
            hits = [p for p in patterns if any(contains(p, tree) for tree in screen.trees)]
            if hits:
                largest = max(hits, key=lambda p: (ops(p), show(p)))
                found.append((answer.notebook, screen.place, screen.cell,
                              f"{answer.grade_id}'s {show(largest)}"))
            for code in sorted(answer.lines):
                if any(code in line for line in screen.lines):
                    found.append((answer.notebook, screen.place, screen.cell, f"{answer.grade_id}'s line {code!r}"))
    return found


def _report(found):
    return "\n".join(f"{place} cell {cell}: holds {notebook} {what}" for notebook, place, cell, what in found)


# --- the tests ---------------------------------------------------------------------------

def test_every_exercise_has_an_answer_to_look_for():
    found = {(a.notebook, a.grade_id): a for a in answers()}
    exercises = {(p.parent.name, c.metadata["nbgrader"]["grade_id"])
                 for p in sorted((ROOT / "solutions").glob("*/*.ipynb"))
                 for c in nbformat.read(p, as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("solution") and not c.metadata["nbgrader"].get("grade")}
    assert set(found) == exercises
    assert {k for k, a in found.items() if not a.patterns} == set(SHORT)


def test_no_answer_on_screen():
    found = leaks()
    assert not found, "answers a student can read:\n" + _report(found)


def test_the_allowed_building_blocks_are_still_answers_and_still_shown():
    """An entry of ALLOWED that no longer names a tree of an answer, or that no notebook shows
    any more, is stale."""
    for (notebook, shown), why in ALLOWED.items():
        owners = [a for a in answers() if a.notebook == notebook and shown in {show(p) for p in a.patterns}]
        assert owners, f"{shown} is not a tree of {notebook}'s answers any more"
        pattern = next(p for p in owners[0].patterns if show(p) == shown)
        assert any(contains(pattern, tree) for s in screens() if s.place == notebook for tree in s.trees), why


def _before(tmp_path_factory):
    """The course as it was when the issue was filed, from git (skips without the commit)."""
    folder = tmp_path_factory.mktemp("before")
    probe = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{BEFORE}^{{commit}}"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"commit {BEFORE} (the notebooks issue #29 was filed on) is not in this clone")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "solutions", "notebooks", HELPERS],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def test_the_notebooks_the_issue_was_filed_on_fail_at_the_places_it_names(tmp_path_factory):
    found = leaks(_before(tmp_path_factory))
    places = {(notebook, place, cell) for notebook, place, cell, _ in found}
    missed = NAMED_BY_THE_ISSUE - places
    assert not missed, f"not found: {sorted(missed)}\nfound:\n" + _report(found)


# --- the comparison itself ---------------------------------------------------------------

SDPA = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q @ k^T / sqrt(head_size), hiding mask == True) @ v."""
    ### BEGIN SOLUTION
    head_size = q.shape[-1]
    wei = q @ k.transpose(-2, -1) * head_size**-0.5  # (..., T, T)
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    wei = torch.softmax(wei, dim=-1)  # (..., T, T)
    return wei @ v  # (..., T, head_size)
    ### END SOLUTION
'''
PLANTED = {
    "the same lines": "wei = q @ k.transpose(-2, -1) * head_size**-0.5\nwei = torch.softmax(wei.masked_fill(mask, float('-inf')), dim=-1)",
    "other names, .mT, one line": "out = F.softmax((a @ b.mT / math.sqrt(d)).masked_fill(hide, -float('inf')), -1) @ c",
    "split over two cells": ["scores = query @ key.swapaxes(-1, -2) / d ** 0.5", "probs = scores.masked_fill(m, -torch.inf).softmax(-1)"],
    "a helper that is inlined": "def attend(x, y):\n    return (x @ y.mT) * x.shape[-1] ** -0.5\nw = attend(q, k).masked_fill(mask, float('-inf'))",
    "methods for operators": "s = torch.matmul(q, k.transpose(-1, -2)).mul(q.size(-1) ** -0.5)",
}
NOT_PLANTED = {
    "the variance demo": "dots = (q * k).sum(-1)\nprint(dots.var(), (dots * head_size ** -0.5).var())",
    "one query against its keys": "scores = keys @ query * factor",
    "PyTorch's own attention": "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
    "a running sum": "sums = torch.tril(torch.ones(5, 5)) @ b",
}


def _pattern_hits(code):
    answer_trees = Shapes().add(SDPA, lines=region_lines(SDPA))
    patterns = {sub for tree in answer_trees for sub in subtrees(tree) if ops(sub) >= 2}
    shapes = Shapes()
    cells = code if isinstance(code, list) else [code]
    trees = [tree for cell in cells for tree in shapes.add(cell)]
    return [show(p) for p in patterns if any(contains(p, tree) for tree in trees)]


@pytest.mark.parametrize("name", PLANTED)
def test_a_planted_answer_is_found_however_it_is_written(name):
    assert _pattern_hits(PLANTED[name]), f"{name}: not found"


@pytest.mark.parametrize("name", NOT_PLANTED)
def test_a_demonstration_of_another_operation_is_not_an_answer(name):
    assert not _pattern_hits(NOT_PLANTED[name]), name


def test_an_answer_planted_in_a_released_notebook_fails_the_test(tmp_path):
    """The whole test, on a copy of the course where a later notebook's given cell holds
    notebook 05's answer under other names."""
    import shutil

    for folder in ("solutions", "notebooks", HELPERS):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    path = tmp_path / "notebooks" / "06_multi_head" / "06_multi_head.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell(PLANTED["other names, .mT, one line"]))
    nbformat.write(nb, path)
    found = leaks(tmp_path)
    assert ("05_scaled_attention", "06_multi_head", 2) in {(n, p, c) for n, p, c, _ in found}, _report(found)


def test_the_normalisation_sees_through_names_and_spacing():
    assert normalise("  x = x + self.attn(self.ln1(x))  # tokens") == "x+attn(ln1(x))"
    assert normalise("wei=torch.softmax( wei , dim=-1)") == "torch.softmax(wei,dim=-1)"
    assert normalise("    return wei.nan_to_num(0.0)") == "wei.nan_to_num(0.0)"
    assert not computes("B, T, C = x.shape")
    assert not computes("self.query = nn.Linear(C, head_size, bias=False)")
    assert computes("xbow = torch.zeros_like(x)")


# --- hints the checks can show -------------------------------------------------------

def message_strings():
    """(module, line, normalised text) of every string literal in the message modules."""
    found = []
    paths = sorted(p for pattern in MESSAGE_MODULES for p in (ROOT / "grader").glob(pattern))
    assert any(p.name == "mistakes.py" for p in paths) and any(p.parent.name == "diagnosis" for p in paths)
    for path in paths:
        name = path.relative_to(ROOT / "grader").as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((name, node.lineno, re.sub(r"\s+", "", node.value.replace("self.", "").replace("'", '"'))))
    return found


def test_no_hint_holds_an_answer_line():
    lines = {code: a.notebook for a in answers() for code in a.lines}
    assert normalise("        probs = F.softmax(logits / temperature, dim=-1)  # (B, vocab_size)") in lines
    leaked = [f"grader/{module}:{line} holds {notebook}'s {code!r}"
              for module, line, text in message_strings()
              for code, notebook in lines.items() if code in text]
    assert not leaked, "\n".join(leaked)


# --- what a newcomer found on screen after the comparison above passed ------------------
# Shapes of an answer too short, or spread too thin, for the trees above: each pinned where
# the newcomer met it, by its structure.

def _code_cells(notebook):
    """(index, parsed source) of the released notebook's code cells a student reads."""
    path = ROOT / "notebooks" / notebook / f"{notebook}.ipynb"
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("grade"):
            source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            yield index, ast.parse(source)


def _loops_slicing_to_their_index(tree):
    """The for loops whose body slices up to their own variable + 1 (`x[b, : t + 1]`): 01's answer."""
    found = []
    for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)):
        for node in ast.walk(loop):
            upper = node.upper if isinstance(node, ast.Slice) else None
            if (isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add)
                    and isinstance(upper.left, ast.Name) and upper.left.id == loop.target.id):
                found.append(loop.lineno)
    return found


def _generation_loops(tree):
    """The loops that grow a sequence of ids by torch.cat along dim 1: 07's generate."""
    found = []
    for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))):
        for call in (n for n in ast.walk(loop) if isinstance(n, ast.Call)):
            if (isinstance(call.func, ast.Attribute) and call.func.attr == "cat"
                    and any(k.arg == "dim" and isinstance(k.value, ast.Constant) and k.value.value == 1
                            for k in call.keywords)):
                found.append(loop.lineno)
    return found


def test_01_draws_its_weights_from_numbers_not_from_the_answer_s_loop():
    found = [i for i, tree in _code_cells("01_bag_of_words") if _loops_slicing_to_their_index(tree)]
    assert not found, f"01's cells {found} slice up to a loop's index + 1, Part A's answer"
    assert _loops_slicing_to_their_index(ast.parse("for t in range(8):\n    w[t, : t + 1] = 1 / (t + 1)"))


@pytest.mark.parametrize("notebook", ["08_attention_at_scale"])  # 09's WindowLM cell still runs its own loop
def test_no_later_notebook_shows_07_s_generation_loop(notebook):
    found = [i for i, tree in _code_cells(notebook) if _generation_loops(tree)]
    assert not found, f"{notebook}'s cells {found} generate in a loop, as 07's Part C does"
    assert _generation_loops(ast.parse("for _ in range(n):\n    idx = torch.cat([idx, nxt], dim=1)"))


def test_09_s_hints_name_the_pairs_without_writing_their_slices():
    """The hints of apply_rope say what the pairs are; the strided slices that take them
    (`x[..., 0::2]`) are the answer's first step."""
    path = ROOT / "notebooks" / "09_attention_in_todays_models" / "09_attention_in_todays_models.ipynb"
    hints = [c.source for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "markdown" and "Hint 1: the idea" in c.source]
    strided = re.compile(r"\[[^\]`]*::2\]")
    assert strided.search("`x[..., 0::2]`") and strided.search("`x[..., ::2]`")
    shown = [strided.search(h).group() for h in hints if strided.search(h)]
    assert hints and not shown, f"09's hints write the pairs' slices: {shown}"
