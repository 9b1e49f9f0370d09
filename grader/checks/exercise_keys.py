"""The course's exercise keys, in the course's order, read from the exercises' own
definitions without importing them (so torch-free: grader/__init__.py, the instructor's
tools and the grading kernel's stub read them): the NOTEBOOKS tuple of
grader/checks/exercises/__init__.py gives the notebooks' order, and each notebook's module
the keys of its EXERCISES dict, written as string literals (in the dict, or in module-level
`EXERCISES["key"] = ...` lines after it). grader.check_<key> is each one's check. Adding an
exercise to a notebook's module adds its key here."""
import ast
from pathlib import Path

from grader.checks.parsing import parse

FOLDER = Path(__file__).resolve().parent / "exercises"


def _literal(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _module_keys(path):
    """The string keys EXERCISES is given at module level, in order: `EXERCISES = {...}`
    and `EXERCISES["key"] = ...` lines."""
    keys, found = [], False
    for node in parse(path.read_text(encoding="utf-8"), str(path)).body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if getattr(target, "id", None) == "EXERCISES":
            if not isinstance(node.value, ast.Dict) or None in map(_literal, node.value.keys):
                raise LookupError(f"{path}: EXERCISES must be a dict written with string keys "
                                  "(the keys are read from the file without importing it)")
            found, keys = True, [_literal(k) for k in node.value.keys]
        elif isinstance(target, ast.Subscript) and getattr(target.value, "id", None) == "EXERCISES":
            if _literal(target.slice) is None:
                raise LookupError(f"{path}, line {node.lineno}: EXERCISES[...] needs a string key "
                                  "(the keys are read from the file without importing it)")
            keys.append(_literal(target.slice))
    if not found:
        raise LookupError(f"{path} assigns no EXERCISES")
    return keys


def read_keys(folder=FOLDER):
    notebooks = None
    for node in parse((folder / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NOTEBOOKS" for t in node.targets):
            notebooks = [e.id for e in node.value.elts]
    if notebooks is None:
        raise LookupError(f"{folder / '__init__.py'} assigns no NOTEBOOKS")
    return tuple(key for name in notebooks for key in _module_keys(folder / f"{name}.py"))


EXERCISE_KEYS = read_keys()
