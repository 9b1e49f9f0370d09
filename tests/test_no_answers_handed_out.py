"""No hint and no given code hands over an answer.

The answers are the solution regions of solutions/. A hint (any string the checks can
show: the mistakes' hints, the findings of the diagnosis, the parameter hints) must never
contain an answer's line, and no given cell of a released notebook (what a student gets,
solution regions removed) may contain a line of an earlier notebook's answer: students
who have the later notebook must still write the earlier one themselves.
"""
import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
# the modules whose strings a check can show to a student: the checks and the mistakes' hints
MESSAGE_MODULES = ("checks/**/*.py", "answers/mistakes.py")
MIN_LENGTH = 12  # shorter lines (`return wei`, `T = x.shape[1]`) say nothing of an answer


def normalise(line):
    """A line of code as comparable text: no comment, no assignment target, no `self.`,
    no spaces, one kind of quote."""
    code = line.split("#", 1)[0].strip()
    code = re.sub(r"^[\w\s,\[\]\.]+=(?!=)", "", code)  # `x = ...`, `self.k_cache, self.v_cache = ...`
    code = code.replace("self.", "").replace("'", '"')
    return re.sub(r"\s+", "", code)


def significant(code):
    """A normalised line that is a step of an answer, not a loop header or a shape."""
    return (len(code) >= MIN_LENGTH and not re.match(r"(for|if|def|class|return\w*$)", code)
            and not re.fullmatch(r"\w+\.shape(\[[-\d:]+\])?", code))


def notebooks(folder):
    return sorted((ROOT / folder).glob("*/*.ipynb"))


def given_lines(path):
    """The normalised lines of the code cells a student gets in the released notebook."""
    cells = nbformat.read(path, as_version=4).cells
    return [(i, line, normalise(line)) for i, cell in enumerate(cells) if cell.cell_type == "code"
            for line in cell.source.splitlines()]


def text_code(path):
    """The normalised code the notebook's text shows: `spans` and fenced lines."""
    found = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for block in re.findall(r"```.*?\n(.*?)```", cell.source, re.S):
                found.update(normalise(line) for line in block.splitlines())
            found.update(normalise(span) for span in re.findall(r"`([^`\n]+)`", cell.source))
    return found


def answer_lines(text_is_given=False):
    """{normalised answer line: the notebook it answers}, in notebook order. What the
    notebook itself gives in a code cell (07's demo of position embeddings) is no secret,
    nor, with text_is_given, what its text shows (06 names the layers to build)."""
    answers = {}
    for path in notebooks("solutions"):
        release = ROOT / "notebooks" / path.parent.name / path.name
        given = {code for _, _, code in given_lines(release)}
        if text_is_given:
            given |= text_code(release)
        for cell in nbformat.read(path, as_version=4).cells:
            for region in SOLUTION.findall(cell.source):
                for line in region.splitlines():
                    code = normalise(line)
                    if significant(code) and code not in given:
                        answers.setdefault(code, path.stem)
    return answers


def message_strings():
    """(module, line, normalised text) of every string literal in the message modules."""
    found = []
    paths = sorted(p for pattern in MESSAGE_MODULES for p in (ROOT / "grader").glob(pattern))
    assert any(p.name == "mistakes.py" for p in paths) and any(p.parent.name == "diagnosis" for p in paths)
    for path in paths:
        name = path.relative_to(ROOT / "grader").as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((name, node.lineno, normalise_text(node.value)))
    return found


def normalise_text(text):
    """A hint's text, compared the way answer lines are."""
    return re.sub(r"\s+", "", text.replace("self.", "").replace("'", '"'))


def test_the_answers_are_found():
    answers = answer_lines()
    assert normalise("        probs = F.softmax(logits / temperature, dim=-1)  # (B, vocab_size)") in answers
    assert normalise("x = x + self.attn(self.ln1(x))") in answers  # 07's text shows it, its code cells not
    assert len(set(answers.values())) == len(notebooks("solutions"))


def test_no_hint_holds_an_answer_line():
    answers = answer_lines()
    leaks = [f"grader/{module}:{line} holds {notebook}'s {code!r}"
             for module, line, text in message_strings()
             for code, notebook in answers.items() if code in text]
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize("path", notebooks("notebooks"), ids=lambda p: p.stem)
def test_no_given_cell_holds_an_earlier_answer(path):
    earlier = {code: nb for code, nb in answer_lines(text_is_given=True).items() if nb < path.stem}
    leaks = [f"cell {i}: {line.strip()!r} holds {nb}'s {answer!r}"
             for i, line, code in given_lines(path)
             for answer, nb in earlier.items() if answer in code]
    assert not leaks, "\n".join(leaks)


def test_the_normalisation_sees_through_names_and_spacing():
    assert normalise("  x = x + self.attn(self.ln1(x))  # tokens") == "x+attn(ln1(x))"
    assert normalise("wei=torch.softmax( wei , dim=-1)") == "torch.softmax(wei,dim=-1)"
    assert not significant(normalise("B, T, C = x.shape"))
    assert not significant(normalise("return wei"))
    assert normalise("x = x + self.attn(self.ln1(x))") in normalise_text(
        "the fix: x = x + self.attn(self.ln1(x)), then the MLP")
