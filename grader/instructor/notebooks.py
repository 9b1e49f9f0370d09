"""Instructor tools for the notebooks: execute the sources, generate the release, validate.

    python -m grader.instructor.notebooks execute [NAME ...]   # run solutions/ in place, keep outputs
    python -m grader.instructor.notebooks release [NAME ...]   # solutions/ -> notebooks/, then validate

NAME is an assignment (a folder of solutions/, e.g. 09_attention_in_todays_models); without
one, every assignment. `make execute ASSIGNMENT=...` and `make release ASSIGNMENT=...` pass it.

Generation and validation use nbgrader's own API, configured by nbgrader_config.py.
"""
import argparse
import os
import sys
from pathlib import Path

import nbformat

from grader.grading.layout import ROOT, assignments, generate, load_config

SOURCE = "solutions"
RELEASE = "notebooks"


def notebook_paths(folder, root=ROOT, names=None):
    """The notebooks of folder (solutions or notebooks), of every assignment or of names."""
    return sorted(p for p in (Path(root) / folder).glob("*/*.ipynb") if not names or p.parent.name in names)


def check_names(names, root=ROOT):
    """SystemExit naming the assignments that do not exist, with the ones that do."""
    known = assignments(root)
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise SystemExit(f"no assignment called {', '.join(unknown)} in {Path(root) / SOURCE}; "
                         f"the assignments are: {', '.join(known)}")


def execute(path, timeout=120):
    """Run a notebook top to bottom in its own folder and save it with its outputs."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    nbformat.write(nb, path)
    return nb


def validate(path, invert=False):
    """nbgrader's own validation; returns its result dict (empty means it passed)."""
    from nbgrader.validator import Validator

    validator = Validator(invert=invert, config=load_config())
    validator.log.setLevel("ERROR")
    return validator.validate(str(path))


def store_plans(root=ROOT, names=None):
    """Derive each test cell's grading plan from the sources (of every assignment, or of
    names) and store it in their metadata (grader.grading.plan); SystemExit naming every
    test cell whose plan cannot be derived."""
    import grader
    from grader.checks.exercises import EXERCISES
    from grader.grading import plan

    focuses = {key: set(ex.focuses) for key, ex in EXERCISES.items()}
    problems = []
    for path in notebook_paths(SOURCE, root, names):
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        for grade_id, reason in plan.annotate(nb, grader.EXERCISE_KEYS, focuses).items():
            problems.append(f"{path.relative_to(root)}: test cell {grade_id}: {reason}")
        if nbformat.writes(nb) != before:
            nbformat.write(nb, path)
    if problems:
        raise SystemExit("cannot derive the grading plan of these test cells:\n" + "\n".join(problems))


def release(root=ROOT, names=None):
    """Generate the student versions of every assignment (or of names), then check that each
    source passes its own tests and each release none, a line per notebook with counts."""
    check_names(names, root)
    sources = notebook_paths(SOURCE, root, names)
    print(f"release: the grading plans of {len(sources)} source notebooks", flush=True)
    store_plans(root, names)
    print(f"release: generating {len(sources)} student notebooks (nbgrader generate_assignment)", flush=True)
    generate(root, names or None)
    problems = []
    for k, path in enumerate(sources, 1):
        result = validate(path)
        if result:
            problems.append(f"{path}: the source does not pass its own tests: {sorted(result)}")
        else:
            print(f"[{k}/{len(sources)}] source passes every test: {path.relative_to(root)}", flush=True)
    released = notebook_paths(RELEASE, root, names)
    for k, path in enumerate(released, 1):
        result = validate(path, invert=True)
        if result:
            problems.append(f"{path}: the release passes some tests: {sorted(result)}")
        else:
            print(f"[{k}/{len(released)}] release passes none:       {path.relative_to(root)}", flush=True)
    if problems:
        raise SystemExit("\n".join(problems))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute solutions/ notebooks in place")
    ex.add_argument("names", nargs="*", help="assignment names (default: all)")
    rel = sub.add_parser("release", help="regenerate notebooks/ and validate both sides")
    rel.add_argument("names", nargs="*", help="assignment names (default: all)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    check_names(args.names)
    if args.command == "execute":
        for name in args.names or assignments():
            for path in sorted((ROOT / SOURCE / name).glob("*.ipynb")):
                print(f"executing {path.relative_to(ROOT)}", flush=True)
                execute(path)
    else:
        release(names=args.names)


if __name__ == "__main__":
    sys.exit(main())
