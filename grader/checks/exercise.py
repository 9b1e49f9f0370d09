"""What an exercise is, as the checks see it: how to call the student's code, its
reference, its inputs and sizes, its focuses (what each test cell checks) and invariants,
and what the diagnosis knows of it. The exercises themselves live in exercises/."""
from dataclasses import dataclass
from typing import Callable, Optional

from grader.checks.diagnosis import PLAIN, Diagnosis


@dataclass
class Invariant:
    """A property every correct answer has, tested before the values."""
    name: str
    fn: Callable  # fn(ctx) -> None, a message, or (message, finding key) when it names the mistake


@dataclass
class Focus:
    """What one test cell checks: a fixed case, some invariants, and maybe the values."""
    description: str
    case: str = "main"
    invariants: tuple = ()
    values: bool = False


@dataclass
class Exercise:
    name: str  # also the name the student's function has in the notebook
    call: Callable  # call(inputs) -> a call for grader.checks.student_call.execute
    reference: Callable  # reference(*inputs.values()) in float64
    draw: Callable  # draw(gen, case, dims) -> inputs (float64, CPU)
    dims: dict  # name -> (fixed value, (low, high) for hidden checks)
    shape: Callable  # shape(inputs) -> (expected shape, the name of each dimension: ("B", "T", "C"))
    focuses: dict
    mistakes: tuple = ()
    module: bool = False
    distinct: tuple = ()  # dims that must all differ from each other
    out_dtype: Optional[Callable] = None  # expected dtype when not the inputs' dtype
    # attends(ctx) -> None, or how the output shows that it does no attention (it ignores
    # the queries, the scores, the model...): such an answer earns no points in any check
    attends: Optional[Callable] = None
    repeatable: bool = True  # two calls on the same inputs must agree (random weights do not)
    shortcuts: tuple = ()  # functions that would do the whole exercise (grader.checks.shortcuts)
    key: str = ""  # its key in EXERCISES (check_<key>); set there
    diagnosis: Diagnosis = PLAIN  # what grader.checks.diagnosis knows of it (sizes, crops, families)
