"""The first cell of every notebook: it installs the student package where the course's
code is missing (a notebook opened on a hosted service, such as Colab or Kaggle, or in a
Python without the course), and does nothing anywhere else (the course repository, the
student package, a grading kernel).

    python -m grader.instructor.first_cell [--source SOURCE] [--check] NOTEBOOK ...

puts the cell first in each notebook (replacing an earlier version of it, never adding a
second), or with --check lists the notebooks whose first cell is not it (exit status 1).
SOURCE is what `%pip install` gets: the package's name (the default, for a course that
publishes it on PyPI or an index of its own) or the address of the wheel where the course
hands it out (e.g. https://example.org/attention_course_student-0.1.0-py3-none-any.whl).
Put it in solutions/ and run `make release`: nbgrader copies a plain code cell as it is.
"""
import argparse
import sys
from pathlib import Path

import nbformat

DISTRIBUTION = "attention-course-student"  # the student package (student/attention_student)
VERSION = "0.1.0"
DEFAULT_SOURCE = f"{DISTRIBUTION}=={VERSION}"
CELL_ID = "install-course-package"  # marks the cell, so a newer version replaces it
MARKER = "# The course's package"  # the cell's first line: recognised even without its id


def install_cell_source(source=DEFAULT_SOURCE):
    """The cell's code: a %pip install guarded by an import, so that it costs nothing where
    the course's packages are importable (the next cell imports them anyway). No importlib:
    the grading scan flags import machinery in a cell a student changed."""
    return (f"{MARKER}: installed here only if this Python lacks it (a hosted notebook service);\n"
            "# anywhere else this cell does nothing.\n"
            "try:\n"
            "    import grader, notebook_helpers\n"
            "except ImportError:\n"
            f"    %pip install --quiet {source}")


def install_cell(source=DEFAULT_SOURCE):
    cell = nbformat.v4.new_code_cell(install_cell_source(source))
    cell.id = CELL_ID
    return cell


def is_install_cell(cell):
    return cell.cell_type == "code" and (cell.get("id") == CELL_ID or cell.source.startswith(MARKER))


def with_install_cell(nb, source=DEFAULT_SOURCE):
    """nb with the install cell first (an earlier install cell anywhere in it is taken
    out; nothing else changes). Returns nb."""
    nb.cells = [install_cell(source)] + [c for c in nb.cells if not is_install_cell(c)]
    return nb


def first_cell_is_install_cell(nb, source=None):
    """True where nb's first cell is the install cell (of source, if given)."""
    if not nb.cells or not is_install_cell(nb.cells[0]):
        return False
    return source is None or nb.cells[0].source == install_cell_source(source)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--source", default=DEFAULT_SOURCE, help=f"what %%pip installs (default: {DEFAULT_SOURCE})")
    parser.add_argument("--check", action="store_true", help="only list the notebooks without it")
    args = parser.parse_args(argv)
    missing = []
    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        if args.check:
            if not first_cell_is_install_cell(nb, args.source):
                missing.append(path)
            continue
        before = nbformat.writes(nb)
        with_install_cell(nb, args.source)
        if nbformat.writes(nb) != before:
            nbformat.write(nb, path)
            print(f"install cell first: {path}")
        else:
            print(f"unchanged:          {path}")
    for path in missing:
        print(f"first cell is not the install cell: {path}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
