"""How the checks' messages say things (issue #29): an index along a dim is said as an index
("positions t = 0, 1, 2"), never as the dim's size ("T = 0"); the merge hint reads as a
sentence wherever it is put; sizes are named by the function's own argument and axis."""
import pytest

import run_attempts
from grader.checks.diagnosis import at_indices
from run_attempts import INDEX_AS_SIZE


def test_indices_are_said_as_indices():
    assert at_indices("T", [0, 1, 2]) == "positions t = 0, 1, 2"
    assert at_indices("T", 6) == "position t = 6"
    assert at_indices("B", "1..3") == "sequences b = 1..3"
    assert at_indices("n_heads", [2]) == "head h = 2"
    assert at_indices("dim 4", 3) == "dim 4, index 3"


@pytest.mark.parametrize("attempt_id,said", [
    ("01-divide-by-T", "at positions t = 0, 1, 2 yours are"),  # factor_along_dim
    ("01-range-T-minus-1", "right everywhere except position t = "),  # unfilled
    ("06b-merge-no-transpose", ": move the heads' dim back next to head_size"),
    ("06a-stack-interleave", "or move the heads' dim back next to head_size"),
    ("29-03-mask-hard-coded", "scores.shape[-1]"),  # the function's own argument and axis
    ("29-02-T-from-dim-0", "x.shape[1]"),
])
def test_a_message_says_it_plainly(attempt_id, said):
    result = run_attempts.run(next(a for a in run_attempts.attempts() if a.id == attempt_id))
    messages = [f.message for f in result.failures]
    assert any(said in m for m in messages), result.shown()
    for m in messages:
        assert not INDEX_AS_SIZE.search(m), m
        assert "use move" not in m, m
