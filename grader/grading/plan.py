"""What each test cell checks, derived once from the instructor's source at release.

    derive(source) -> [Check(exercise, student, focus, hidden, seed), ...]

`make release` parses every test cell of solutions/ with `ast` (the instructor's own
code, never a student's) and stores the result in the cell's metadata under
PLAN_KEY, beside nbgrader's own metadata (whose schema admits no extra keys). Grading
reads the plan of a test cell from the source notebook by its grade_id, so nothing a
student writes into a submission can change what is checked or how many points it is
worth. A test cell whose plan cannot be derived stops the release with the reason.
"""
import ast
from dataclasses import asdict, dataclass
from typing import Optional

from grader.checks.parsing import parse

PLAN_KEY = "grading_plan"
HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
HIDDEN_END = "### END HIDDEN TESTS"


class PlanError(ValueError):
    """A test cell whose checks cannot be read from its source."""


@dataclass(frozen=True)
class Check:
    exercise: str  # a key of grader.EXERCISE_KEYS
    student: str  # the name the student's function or class has in the notebook
    focus: str
    hidden: bool = False
    seed: Optional[int] = None

    def to_json(self):
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data):
        return cls(**data)


def _hidden_lines(source):
    """Line numbers (1-based) inside the hidden-test markers."""
    hidden, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped == HIDDEN_BEGIN:
            inside = True
        elif stripped == HIDDEN_END:
            inside = False
        elif inside:
            hidden.add(number)
    return hidden


def _check_name(func):
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "grader":
        return func.attr
    return None


def _constant(node, what, kinds):
    if isinstance(node, ast.Constant) and isinstance(node.value, kinds):
        return node.value
    raise PlanError(f"{what} must be a literal, got `{ast.unparse(node)}`")


def derive(source, exercise_keys):
    """The checks a test cell's source calls, in order; PlanError when it cannot tell."""
    try:
        tree = parse(source)
    except SyntaxError as err:
        raise PlanError(f"the test cell is not valid Python: {err.msg} (line {err.lineno})") from None
    hidden_lines = _hidden_lines(source)
    checks = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _check_name(node.func)
        if not name or not name.startswith("check_"):
            continue
        key = name[len("check_"):]
        if key not in exercise_keys:
            raise PlanError(f"`{name}` is not a check of this course")
        if not node.args or not isinstance(node.args[0], ast.Name):
            raise PlanError(f"`{ast.unparse(node)}`: the first argument must be the student's "
                            "function or class, by name")
        focus = _constant(node.args[1], "focus", str) if len(node.args) > 1 else "values"
        if len(node.args) > 2:
            raise PlanError(f"`{ast.unparse(node)}`: pass options by keyword")
        hidden, seed = node.lineno in hidden_lines, None
        for kw in node.keywords:
            if kw.arg == "focus":
                focus = _constant(kw.value, "focus", str)
            elif kw.arg == "hidden":
                hidden = bool(_constant(kw.value, "hidden", bool)) or hidden
            elif kw.arg == "seed":
                seed = _constant(kw.value, "seed", int)
            else:
                raise PlanError(f"`{ast.unparse(node)}`: option `{kw.arg}` cannot be graded "
                                "(the grader owns device and dtype)")
        checks.append((node.lineno, node.col_offset, Check(key, node.args[0].id, focus, hidden, seed)))
    if not checks:
        raise PlanError("the test cell calls no check")
    return [check for _, _, check in sorted(checks, key=lambda c: (c[0], c[1]))]


def is_test_cell(cell):
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def annotate(nb, exercise_keys, focuses):
    """Store the plan of every test cell of a source notebook in its metadata; return the
    problems found (grade_id: reason), empty when every plan was derived."""
    problems = {}
    for cell in nb.cells:
        if not is_test_cell(cell):
            cell.metadata.pop(PLAN_KEY, None)
            continue
        grade_id = cell.metadata["nbgrader"].get("grade_id", "?")
        try:
            checks = derive(cell.source, exercise_keys)
            for check in checks:
                if check.focus not in focuses[check.exercise]:
                    raise PlanError(f"unknown focus {check.focus!r} for check_{check.exercise}; "
                                    f"choose from {sorted(focuses[check.exercise])}")
        except PlanError as err:
            problems[grade_id] = str(err)
            continue
        cell.metadata[PLAN_KEY] = [c.to_json() for c in checks]
    return problems


def read(source_nb):
    """{grade_id: [Check, ...]} of a source notebook (plans stored by annotate)."""
    plans = {}
    for cell in source_nb.cells:
        if is_test_cell(cell):
            stored = cell.metadata.get(PLAN_KEY)
            if not stored:
                raise PlanError(f"test cell {cell.metadata['nbgrader'].get('grade_id')} has no "
                                "grading plan: run `make release`")
            plans[cell.metadata["nbgrader"]["grade_id"]] = [Check.from_json(c) for c in stored]
    return plans
