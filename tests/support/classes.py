"""The graded class (tests/grading/conftest.py's graded_class, graded once per session) and
the small classes graded beside it: the assignment they hand in, their budgets, the secret
the grading process holds, and the variants whose scores and reasons the tests check
(tests/grading/test_autograde.py, tests/grading/test_trust.py)."""

CLASS_ASSIGNMENT = "05_scaled_attention"  # 5 test cells: 1 + 1 points for properties, 3 + 3 + 2 for values
CLASS_BUDGET = 90  # seconds per notebook: roomy, since the suite grades and runs notebooks in parallel on two cores
CLASS_CALL_TIMEOUT = 2  # seconds per call of the student's code (an honest call needs milliseconds): short, for the looping and sleeping answers
CLASS_CELL_TIMEOUT = 5  # seconds per cell (the course's is 60; an honest cell of 05 needs under 0.5): the given cell that calls a hanging answer
SECRET_ENV = "COURSE_INSTRUCTOR_SECRET"  # set in the grading process; must never reach a student

EXPECTED = {  # variant -> exact score
    "correct": 10, "softmax_wrong_dim": 2, "missing_scale": 2, "exception": 0,
    "infinite_loop": 0, "stub": 0, "deleted_test_cell": 10, "edited_test_cell": 10,
    "stderr_warning": 10, "forged_plan": 2,  # its test cells' metadata claims to check shapes only
    "tampered_metadata": 10,  # put back from the source, graded, and flagged
}
BROKEN = {  # variant -> words the reason must contain
    "kernel_death": "kernel died", "invalid_json": "not a readable notebook",
    "empty_notebook": "empty", "missing_notebook": "missing", "renamed_notebook": "renamed",
}
HONEST_MINOR = "honest_nbformat_4_4"  # an honest answer in an nbformat 4.4 notebook
