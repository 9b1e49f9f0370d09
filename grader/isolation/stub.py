"""The `grader` package as the grading kernel sees it: the names the notebooks import,
and no checks.

The notebooks' first cell does `from grader import check_masked_softmax, ...`; in the
isolated kernel that import must succeed (the cell also imports torch and the helpers),
but the checks themselves run outside the kernel while grading. Each `check_*` here
raises a short error saying so. `grader.reference` holds only the functions a released
notebook is given (notebook 02 reuses notebook 01's loop), copied from the source
without importing it.
"""
import ast
from pathlib import Path

from grader import EXERCISE_KEYS
from grader.checks.parsing import parse

GRADER_DIR = Path(__file__).resolve().parent.parent
# grader.reference functions that released notebooks import as given code.
GIVEN_REFERENCES = ("bag_of_words",)

INIT = '''"""The course's checks are not in this kernel: while grading, they run outside it,
on the objects this notebook defines."""
EXERCISE_KEYS = {keys!r}

__all__ = ["CheckError", "ChecksRunOutsideKernel"] + [f"check_{{key}}" for key in EXERCISE_KEYS]


class CheckError(AssertionError):
    """A check failed; the message is meant for the learner."""


class ChecksRunOutsideKernel(RuntimeError):
    """Raised by every check in the grading kernel."""

    def _render_traceback_(self):
        return [f"{{type(self).__name__}}: {{self}}"]


def _unavailable(key):
    def check(*args, **kwargs):
        __tracebackhide__ = True
        raise ChecksRunOutsideKernel(
            f"check_{{key}} does not run in the grading kernel: while grading, the "
            "checks run outside this kernel, on the objects your notebook defines.")

    check.__name__ = check.__qualname__ = f"check_{{key}}"
    return check


for _key in EXERCISE_KEYS:
    globals()[f"check_{{_key}}"] = _unavailable(_key)
del _key
'''


def _given_functions(names):
    """Source of the named top-level functions of grader/answers/reference.py, and its imports."""
    source = (GRADER_DIR / "answers" / "reference.py").read_text(encoding="utf-8")
    tree = parse(source)  # each sandbox's start, in a grading thread: parse's lock (grader.checks.parsing)
    imports = [ast.get_source_segment(source, node) for node in tree.body  # not grader's own:
               if isinstance(node, ast.Import)                              # the stub has none of it
               or isinstance(node, ast.ImportFrom) and not (node.module or "").startswith("grader")]
    found = {node.name: ast.get_source_segment(source, node) for node in tree.body
             if isinstance(node, ast.FunctionDef) and node.name in names}
    missing = sorted(set(names) - set(found))
    if missing:
        raise LookupError(f"grader/answers/reference.py has no function {', '.join(missing)}")
    return imports, [found[name] for name in names]


def stub_files(keys=EXERCISE_KEYS, given=GIVEN_REFERENCES):
    """{file name: text} of the stub package."""
    imports, functions = _given_functions(given)
    reference = ('"""The functions a notebook is given from an earlier one."""\n'
                 + "\n".join(imports) + "\n\n\n" + "\n\n\n".join(functions) + "\n")
    return {"__init__.py": INIT.format(keys=tuple(keys)), "reference.py": reference}


def write_stub(folder):
    """Write the stub package into folder (created); returns folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in stub_files().items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder
