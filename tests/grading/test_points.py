"""Points: every "Part X (N points)" heading adds up to the test cells below it, and in
every part the value checks carry most of the points (the property checks are feedback)."""
import re

import nbformat
import pytest

from grader.instructor import notebooks
from grader.checks.exercises import EXERCISES
from grader.grading import plan

SOLUTIONS = notebooks.notebook_paths("solutions")
PART = re.compile(r"^## Part (\w) \((\d+) points?\)", re.M)


def parts(path):
    """[(letter, announced points, [(points, is a value check), ...]), ...] in notebook order."""
    out = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            out += [(letter, int(points), []) for letter, points in PART.findall(cell.source)]
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            check = plan.derive(cell.source, EXERCISES)[0]
            assert out, f"{path.name}: test cell {meta['grade_id']} before any Part heading"
            out[-1][2].append((meta["points"], EXERCISES[check.exercise].focuses[check.focus].values))
    return out


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name)
def test_part_headings_announce_the_points_of_their_test_cells(path):
    found = parts(path)
    assert found, f"{path.name} has no Part heading"
    for letter, announced, cells in found:
        assert cells, f"Part {letter} has no test cells"
        assert announced == sum(points for points, _ in cells), f"Part {letter}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name)
def test_value_checks_carry_most_of_each_part(path):
    for letter, _, cells in parts(path):
        total = sum(points for points, _ in cells)
        values = sum(points for points, is_value in cells if is_value)
        assert values >= 0.6 * total, f"Part {letter}: value checks carry {values} of {total} points"
