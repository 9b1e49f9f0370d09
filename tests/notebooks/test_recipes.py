"""The recipes hold: everything a new exercise or notebook needs, checked for every exercise
and every notebook of the course, with what is missing said in words and where to add it
(README "Add an exercise" and "Add a notebook" name every step, and a test below keeps them
naming every step). Each requirement is one row of EXERCISE_NEEDS or NOTEBOOK_NEEDS: (the
step, as the README's recipe says it; the file it is done in; a function that returns what
is missing, or None)."""
import re

import nbformat
import pytest

import grader
from grader.answers import course_answers
from grader.answers.correct import CORRECT, student_from
from grader.checks import fixed
from grader.checks.exercises import EXERCISES, NOTEBOOKS
from grader.instructor import first_cell
from support.paths import ROOT

README = ROOT / "README.md"
SUMMARIES = ("Hint 1: the idea", "Hint 2: shapes and functions", "Hint 3: the tricky step")


def _baselines():
    from support.baselines import BASELINES
    return BASELINES


def _notebook_paths(root=ROOT):
    return sorted((root / "solutions").glob("*/*.ipynb"))


def _cells(path):
    return nbformat.read(path, as_version=4).cells


def _graded(cell):
    return cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")


def _plans(root=ROOT):
    """{exercise key: [(notebook folder, plan entry)]} of every test cell's stored plan."""
    out = {}
    for path in _notebook_paths(root):
        for cell in _cells(path):
            for entry in cell.metadata.get("grading_plan", ()) if _graded(cell) else ():
                out.setdefault(entry["exercise"], []).append((path.parent.name, entry))
    return out


# --- what an exercise needs -------------------------------------------------------------

def _reference(key, ex, ctx):
    name = ex.reference.__name__
    if name not in ctx["answers"].reference:
        return (f"its reference {name!r} is not a function of grader/answers/reference.py: write the float64 "
                f"reference there under that name (registry.reference({name!r}) looks it up)")


def _catalogue(key, ex, ctx):
    if not ctx["answers"].mistakes.get(key):
        return (f"no catalogued mistakes: add a tuple of Mistake(key, name, hint, fn) to grader/answers/mistakes.py "
                f"and {key!r} to BY_EXERCISE")


def _correct(key, ex, ctx):
    if key not in CORRECT:
        return f"no correct answer: add one to CORRECT in grader/answers/correct.py under {key!r}"
    if ex.module:
        wrong = student_from(key, ctx["answers"].mistakes[key][0].fn) if ctx["answers"].mistakes.get(key) else None
        if wrong is not None and not isinstance(wrong, type):
            return ("a module exercise whose mistakes cannot become modules: add a class maker for it to "
                    "student_from in grader/answers/correct.py (as _cache_from for 08's cache)")


def _refuses_skipping(key, ex, ctx):
    if ex.attends is None and ex.diagnosis.baselines is None:
        return ("neither an attends= hook nor Diagnosis(baselines=...): an answer that skips the exercise (it "
                "returns an input or zeros, ignores the scores, the queries and keys, the positions...) then earns "
                "the points of the property checks; give Exercise(attends=...) a test that fails on such an answer "
                "(grader/checks/exercises/common.py: changes_with) or list those outputs in its Diagnosis")


def _no_attention_answers(key, ex, ctx):
    if not ctx["baselines"].get(key):
        return (f"no answers without attention in tests/support/baselines.py: add BASELINES[{key!r}] (zeros, an input "
                "returned, uniform or random weights...), which tests/checks/test_no_points_without_attention.py grades")


def _stored_cases(key, ex, ctx):
    path = ctx["references"] / f"{key}.pt"
    if not path.exists():
        return f"no stored inputs and outputs for its visible checks: run `make references` (writes {path.name})"
    cases = {f.case for f in ex.focuses.values()}
    stored = set(fixed.load(key, ctx["references"]))
    if cases != stored:
        return f"{path.name} holds cases {sorted(stored)}, the focuses use {sorted(cases)}: run `make references`"


def _checked_in_a_notebook(key, ex, ctx):
    entries = ctx["plans"].get(key)
    if not entries:
        return (f"no test cell checks it: add test cells calling check_{key}(...) to its notebook in solutions/, "
                "then `make release ASSIGNMENT=...` (it stores each test cell's plan)")
    if not any(e["hidden"] and EXERCISES[key].focuses[e["focus"]].values for _, e in entries):
        return (f"no hidden values check: add check_{key}(..., hidden=True) between ### BEGIN HIDDEN TESTS and "
                "### END HIDDEN TESTS in a values test cell")


def _importable(key, ex, ctx):
    if key not in grader.EXERCISE_KEYS:
        return (f"grader.check_{key} does not exist: the exercise's module must be in NOTEBOOKS of "
                "grader/checks/exercises/__init__.py, its EXERCISES written with string keys")


EXERCISE_NEEDS = [
    ("the float64 reference", "grader/answers/reference.py", _reference),
    ("the Exercise, in its notebook's module", "grader/checks/exercises/", _importable),
    ("an attends= hook or Diagnosis baselines", "grader/checks/exercises/", _refuses_skipping),
    ("its catalogued mistakes", "grader/answers/mistakes.py", _catalogue),
    ("a correct answer", "grader/answers/correct.py", _correct),
    ("answers without attention", "tests/support/baselines.py", _no_attention_answers),
    ("stored references", "make references", _stored_cases),
    ("test cells and a hidden values check", "make release", _checked_in_a_notebook),
]


def exercise_problems(key, ex, ctx):
    """What exercise key still lacks, one sentence per missing step."""
    return [f"{key}: {problem}" for _, _, need in EXERCISE_NEEDS if (problem := need(key, ex, ctx))]


# --- what a notebook needs ---------------------------------------------------------------

def _named_as_folder(path, ctx):
    if path.stem != path.parent.name:
        return f"the notebook is {path.name} in {path.parent.name}/: the folder and the notebook share one name"


def _module(path, ctx):
    keys = {e["exercise"] for cell in _cells(path) if _graded(cell) for e in cell.metadata.get("grading_plan", ())}
    if any(_graded(c) for c in _cells(path)) and not keys:
        return ("its test cells have no stored grading plan: add its exercises' module to NOTEBOOKS in "
                "grader/checks/exercises/__init__.py, then `make release ASSIGNMENT=...`")


def _imports_its_checks(path, ctx):
    cells = _cells(path)
    wanted = sorted({re.match(r"(check_\w+)\(", line).group(1) for c in cells if _graded(c)
                     for line in c.source.splitlines() if re.match(r"check_\w+\(", line)})
    # the first code cell after the install cell (grader/instructor/first_cell.py), which comes first
    first = next((c.source for c in cells if c.cell_type == "code" and not first_cell.is_install_cell(c)), "")
    missing = [name for name in wanted if name not in first]
    if missing:
        return f"its first code cell does not import {', '.join(missing)}: `from grader import ...` there"


def _parts(path, ctx):
    cells = _cells(path)
    first_test = next((i for i, c in enumerate(cells) if _graded(c)), None)
    if first_test is not None and not any(c.cell_type == "markdown" and re.search(r"^## Part \w \(\d+ points?\)",
                                                                                  c.source, re.M)
                                          for c in cells[:first_test]):
        return "no \"## Part A (N points)\" heading above its first test cell (tests/grading/test_points.py adds them up)"


def _hint_ladders(path, ctx):
    cells = _cells(path)
    checked = {m for c in cells if _graded(c) for m in re.findall(r"check_\w+\(\s*(\w+)", c.source)}
    for i, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and meta.get("grade_id") in checked:
            hints = cells[i - 1].source if i and cells[i - 1].cell_type == "markdown" else ""
            if re.findall(r"<summary>(.*?)</summary>", hints) != list(SUMMARIES):
                return (f"no hint ladder right before the solution cell {meta['grade_id']}: a Markdown cell of "
                        "three collapsed <details>, summaries " + ", ".join(f'"{s}"' for s in SUMMARIES)
                        + ", between the exercise's prompt and its solution cell")


def _check_yourself(path, ctx):
    text = next((c.source for c in _cells(path) if c.cell_type == "markdown" and "**Check yourself**" in c.source), None)
    if text is None:
        return ("no \"**Check yourself**\" section: end the notebook with one, three or more numbered questions, each "
                "with a collapsed answer <details><summary>Answer</summary> ... </details>")
    text = text.split("**Check yourself**")[1]
    questions = re.findall(r"^\d+\. ", text, re.M)
    answers = re.findall(r"<details><summary>Answer</summary>\n\n(.+?)\n\n</details>", text, re.S)
    if len(questions) < 3 or len(answers) != len(questions):
        return (f"its \"Check yourself\" has {len(questions)} questions and {len(answers)} collapsed answers: three "
                "or more questions, each followed by <details><summary>Answer</summary>, a blank line, the "
                "answer, a blank line, </details>")


def _executed(path, ctx):
    code = [c for c in _cells(path) if c.cell_type == "code"]
    if code and not any(c.get("outputs") for c in code):
        return "it has no outputs: `make execute ASSIGNMENT=...` runs it in place (its outputs are committed)"


def _released(path, ctx):
    release = ctx["root"] / "notebooks" / path.parent.name / path.name
    if not release.exists():
        return f"no student version {release.relative_to(ctx['root'])}: run `make release ASSIGNMENT={path.parent.name}`"


def _contents_row(path, ctx):
    if f"| `{path.parent.name}` |" not in ctx["readme"]:
        return f"no row for `{path.parent.name}` in the README's Contents table"


NOTEBOOK_NEEDS = [
    ("the folder and the notebook share one name", "solutions/", _named_as_folder),
    ("its module in NOTEBOOKS", "grader/checks/exercises/__init__.py", _module),
    ("its checks imported in its first code cell", "solutions/", _imports_its_checks),
    ("Part headings with points", "solutions/", _parts),
    ("a hint ladder per exercise", "solutions/", _hint_ladders),
    ("a Check yourself section", "solutions/", _check_yourself),
    ("executed, outputs committed", "make execute", _executed),
    ("its student version", "make release", _released),
    ("a row in Contents", "README.md", _contents_row),
]


def notebook_problems(path, ctx):
    return [f"{path.parent.name}: {problem}" for _, _, need in NOTEBOOK_NEEDS if (problem := need(path, ctx))]


def _context(root=ROOT):
    return {"answers": course_answers(), "baselines": _baselines(), "plans": _plans(root), "root": root,
            "references": fixed.references_dir(), "readme": README.read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def ctx():
    return _context()


def test_every_exercise_has_everything_the_recipe_asks_for(ctx):
    problems = [p for key, ex in EXERCISES.items() for p in exercise_problems(key, ex, ctx)]
    assert not problems, "missing:\n" + "\n".join(problems)


def test_every_notebook_has_everything_the_recipe_asks_for(ctx):
    problems = [p for path in _notebook_paths() for p in notebook_problems(path, ctx)]
    assert not problems, "missing:\n" + "\n".join(problems)


def test_every_notebook_module_is_a_notebook():
    names = {p.parent.name for p in _notebook_paths()}
    planned = {folder for entries in _plans().values() for folder, _ in entries}
    assert len(NOTEBOOKS) == len(names) == len(planned), (len(NOTEBOOKS), sorted(names), sorted(planned))


def test_the_readme_recipes_name_every_step():
    text = README.read_text(encoding="utf-8")
    recipes = text[text.index("### Add an exercise"):text.index("### How the checks work")]
    for step, where, _ in EXERCISE_NEEDS + NOTEBOOK_NEEDS:
        assert where in recipes, f"the README's recipes never say where {step!r} goes ({where})"
    for phrase in ("attends=", "baselines", "Check yourself", "Hint 1: the idea", "ASSIGNMENT=", "Part A",
                   "hidden=True", "raises-exception"):
        assert phrase in recipes, f"the README's recipes never mention {phrase!r}"


# --- the contract says what is missing, in words -------------------------------------------

def test_an_exercise_missing_every_step_is_told_each_of_them(tmp_path):
    from dataclasses import replace

    from grader.checks.diagnosis import PLAIN

    bare = replace(EXERCISES["masked_softmax"], attends=None, diagnosis=PLAIN)
    answers = course_answers()
    ctx = {"answers": type(answers)(reference={}, mistakes={}, knobs={}), "baselines": {}, "plans": {},
           "references": tmp_path, "root": ROOT, "readme": ""}
    problems = "\n".join(exercise_problems("softmax_rows", bare, ctx))
    for words in ("grader/answers/reference.py", "grader.check_softmax_rows does not exist",
                  "neither an attends= hook nor Diagnosis(baselines=...)", "no catalogued mistakes", "no correct answer", "tests/support/baselines.py",
                  "make references", "no test cell checks it"):
        assert words in problems, problems


def test_a_notebook_missing_its_parts_is_told_each_of_them(tmp_path):
    folder = tmp_path / "solutions" / "10_next"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    test_cell = nbformat.v4.new_code_cell('"""Check it."""\ncheck_softmax_rows(softmax_rows, "values")')
    test_cell.metadata["nbgrader"] = {"grade": True, "grade_id": "t", "points": 1, "solution": False, "locked": True}
    solution = nbformat.v4.new_code_cell("def softmax_rows(s):\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION")
    solution.metadata["nbgrader"] = {"grade": False, "grade_id": "softmax_rows", "solution": True, "locked": False}
    nb.cells = [nbformat.v4.new_code_cell("import torch"), nbformat.v4.new_markdown_cell("# 10"), solution, test_cell]
    path = folder / "10_other.ipynb"
    nbformat.write(nb, path)
    ctx = {"root": tmp_path, "readme": ""}
    problems = "\n".join(notebook_problems(path, ctx))
    for words in ("share one name", "no stored grading plan", "does not import check_softmax_rows",
                  "no \"## Part A (N points)\" heading", "no hint ladder right before the solution cell softmax_rows",
                  "no \"**Check yourself**\" section", "make execute", "make release ASSIGNMENT=10_next",
                  "Contents table"):
        assert words in problems, problems


# --- the commands the recipes use take a notebook's name -----------------------------------

def test_execute_and_release_take_an_assignments_name():
    from grader.instructor import notebooks

    one = notebooks.notebook_paths("solutions", names=["09_attention_in_todays_models"])
    assert [p.parent.name for p in one] == ["09_attention_in_todays_models"]
    assert len(notebooks.notebook_paths("solutions")) == len(_notebook_paths())
    with pytest.raises(SystemExit, match="no assignment called 09_attention_in_todays_model in "):
        notebooks.main(["release", "09_attention_in_todays_model"])
    with pytest.raises(SystemExit, match="the assignments are: 01_bag_of_words"):
        notebooks.main(["execute", "nine"])


def test_the_makefile_passes_the_name_on():
    import subprocess

    for target, command in (("execute", "notebooks execute 09_x"), ("release", "notebooks release 09_x"),
                            ("references", "fixtures apply_rope")):
        var = "EXERCISES=apply_rope" if target == "references" else "ASSIGNMENT=09_x"
        out = subprocess.run(["make", "-n", "-W", ".venv/.installed", target, var], cwd=ROOT, capture_output=True,
                             text=True).stdout
        assert command in out, out
