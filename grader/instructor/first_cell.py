"""The first cell of every notebook: it installs the student package where the course's
code is missing (a notebook opened on a hosted service, such as Colab or Kaggle, or in a
Python without the course), and does nothing anywhere else (the course repository, the
student package, a grading kernel).

    python -m grader.instructor.first_cell [--source SOURCE] [--check] NOTEBOOK ...

puts the cell first in each notebook (replacing an earlier version of it, never adding a
second), or with --check lists the notebooks whose first cell is not it (exit status 1).
By default the cell installs the package's wheel that the student put in the notebook's
folder (on a hosted service: uploaded beside it), and says so where there is none. SOURCE,
for a course that publishes the package, is what pip installs where no wheel is
there: the package's name on the course's index (attention-course-student==0.1.0) or the
address of the wheel (https://example.org/attention_course_student-0.1.0-py3-none-any.whl).
Never a name the course has not published: anyone could publish that name on PyPI, and the
cell would install their package.
Put it in solutions/, then `make execute` and `make release`: nbgrader copies a plain code
cell as it is.
"""
import argparse
import sys
from pathlib import Path

import nbformat

DISTRIBUTION = "attention-course-student"  # the student package (student/attention_student)
VERSION = "0.1.0"
DEFAULT_SOURCE = None  # the wheel in the notebook's folder, and nothing else
CELL_ID = "install-course-package"  # marks the cell, so a newer version replaces it
MARKER = "# The course's package"  # the cell's first line: recognised even without its id
WHEEL_PATTERN = DISTRIBUTION.replace("-", "_") + "-*.whl"  # the wheel's file name (PEP 427)


# pip run by the kernel's own Python (never a shell: IPython's %pip needs `sh` on the PATH
# or in $SHELL, which a kernel started with a bare environment lacks), its lines printed
# in the cell as they come, and its failure raised.
PIP = ("    _pip = subprocess.Popen([sys.executable, \"-m\", \"pip\", \"install\", _wheel[-1]],\n"
       "                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)\n"
       "    for _line in _pip.stdout:\n"
       "        print(_line, end=\"\")\n"
       "    if _pip.wait():\n"
       "        raise RuntimeError(\"pip could not install the course's package: its messages are above\")")


def install_cell_source(source=DEFAULT_SOURCE):
    """The cell's code: a pip install guarded by an import, so that it costs nothing where
    the course's packages are importable (the next cell imports them anyway). The newest
    wheel of the package in the notebook's folder, else source; without a source, a message
    saying what to upload. pip is not --quiet: where torch is missing too, the download is
    long and what pip says shows. No importlib: the grading scan flags import machinery in a
    cell a student changed."""
    head = (f"{MARKER}: installed here only where this Python lacks it (a hosted notebook\n"
            "# service such as Colab), from its wheel in this notebook's folder; anywhere else this\n"
            "# cell does nothing.\n"
            "try:\n"
            "    import grader, notebook_helpers\n"
            "except ImportError:\n"
            "    import subprocess, sys\n"
            "    from glob import glob\n")
    if source:
        return head + f"    _wheel = sorted(glob(\"{WHEEL_PATTERN}\")) or [\"{source}\"]\n" + PIP
    return head + (f"    _wheel = sorted(glob(\"{WHEEL_PATTERN}\"))\n"
                   "    if not _wheel:\n"
                   "        raise FileNotFoundError(\"this Python lacks the course's package: upload its wheel \"\n"
                   f"                                \"({WHEEL_PATTERN.replace('*', VERSION + '-py3-none-any')}) into \"\n"
                   "                                \"this notebook's folder, then run this cell again\")\n"
                   + PIP)


def install_cell(source=DEFAULT_SOURCE):
    cell = nbformat.v4.new_code_cell(install_cell_source(source))
    cell.id = CELL_ID
    return cell


def is_install_cell(cell):
    return cell.cell_type == "code" and (cell.get("id") == CELL_ID or cell.source.startswith(MARKER))


def with_install_cell(nb, source=DEFAULT_SOURCE):
    """nb with the install cell first (an earlier install cell anywhere in it is taken
    out; nothing else changes; a first cell that is already this one is kept as it is, with
    its execution count). Returns nb."""
    cell = nb.cells[0] if first_cell_is_install_cell(nb, source) else install_cell(source)
    nb.cells = [cell] + [c for c in nb.cells if not is_install_cell(c)]
    return nb


def first_cell_is_install_cell(nb, source=DEFAULT_SOURCE):
    """True where nb's first cell is the install cell, as install_cell_source(source) writes it."""
    return bool(nb.cells) and is_install_cell(nb.cells[0]) and nb.cells[0].source == install_cell_source(source)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--source", default=DEFAULT_SOURCE,
                        help="what pip installs where no wheel is beside the notebook: the package's name on "
                             "the course's index, or its wheel's address (default: none, the wheel is needed)")
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
