"""One check's case: what it runs the student's code on and compares with (CheckCase), and
what an invariant sees of it (Context: the student's output, and a way to run the student
again on other inputs)."""
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from grader.checks.calling import (StudentError, call_student, check_student_object, code_facts,
                                   describe_exception, on_meta, student_name)
from grader.checks.compare import close, to_cpu64
from grader.checks.devices import resolve_device, to_device, tolerance
from grader.checks.exercise import Exercise, Focus
from grader.checks.feedback import CheckError
from grader.checks.inputs import case_inputs
from grader.checks.naming import diagnose
from grader.checks.output import check_tensor
from grader.outcome import check_label


@dataclass
class Context:
    """What an invariant sees: the student's output and a way to run the student again."""
    exercise: Exercise
    student: object
    inputs: dict  # on the check's device and dtype
    out: torch.Tensor  # the student's output, float64 on the CPU
    tol: dict
    facts: Optional[Callable] = None  # () -> grader.checks.student_call.code_facts of the student's code

    def run(self, inputs):
        out = call_student(self.exercise, self.student, inputs)
        check_tensor(self.exercise, out, inputs, self.exercise.shape(inputs))
        return to_cpu64(out)

    def run_raw(self, inputs):
        """The student's output on these inputs, float64 on the CPU: its type and shape are
        checked, NaN and inf are let through."""
        out = call_student(self.exercise, self.student, inputs)
        shape, names = self.exercise.shape(inputs)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(shape):
            return to_cpu64(check_tensor(self.exercise, out, inputs, (shape, names)))
        return to_cpu64(out)

    def try_run(self, inputs):
        """(output, None) when the student's code runs cleanly on these inputs (the output as
        run() gives it), else (None, what went wrong)."""
        try:
            return self.run(inputs), None
        except StudentError as wrapped:
            return None, describe_exception(wrapped.err)
        except CheckError as err:
            return None, str(err)

    def on_meta(self):
        """The student's code run with its inputs on the meta device (plain data), here or in
        the student's kernel; None where it cannot be asked."""
        return on_meta(self.student, self.exercise.call(self.inputs))

    def close(self, a, b):
        return close(a, b, self.tol)


@dataclass
class CheckCase:
    """What one check runs the student's code on and compares with: the inputs (float64 on
    the CPU as drawn or stored, on the check's device and dtype, and in float64 on that
    device for the diagnosis), the stored expected output of a visible check, and the
    check's label. The facts about the student's code and the reference output are computed
    once, when first asked for."""
    exercise: Exercise
    student: object
    focus: Focus
    name: str  # the student's function's name
    label: str
    dev: torch.device
    dtype: torch.dtype
    tol: dict
    inputs64: dict
    inputs: dict
    inputs64_dev: dict
    shape_info: tuple  # exercise.shape(inputs): (expected shape, the name of each dimension)
    expected: Optional[torch.Tensor] = None
    used: Optional[str] = None  # a function the code uses that does the whole exercise (a shortcut)
    known: dict = field(default_factory=dict)
    focus_name: str = ""  # the focus's key in exercise.focuses
    hidden: bool = False
    prefer: tuple = ()  # the mistakes earlier checks of this exercise named (grader.checks.recall)

    @property
    def key(self):
        return self.exercise.key

    def facts(self, instance=True):
        """grader.checks.student_call.code_facts of the student's code; with instance, also what
        an instance built for the inputs holds (looked at only when something failed)."""
        name = "facts" if instance else "static"
        if name not in self.known:
            self.known[name] = code_facts(self.exercise, self.student, self.inputs if instance else None)
        return self.known[name]

    def reference(self):
        """The expected output, float64 on the CPU: the stored one, else the reference's."""
        if "expected" not in self.known:
            self.known["expected"] = self.expected if self.expected is not None else to_cpu64(
                self.exercise.reference(*self.inputs64.values()))
        return self.known["expected"]

    def explain(self, actual=None, error=None):
        """The mistake that this output (or this exception) shows, if any (diagnose)."""
        return diagnose(self.exercise, self.inputs64_dev, actual, error, self.tol, facts=self.facts(),
                        expected=self.reference(), names=list(self.shape_info[1]), prefer=self.prefer)


def prepare_case(exercise, student, focus, *, hidden, seed, device, dtype, fixed):
    """The case one focus of a check runs: ValueError for an unknown focus, CheckError when
    the student's object is not code of the kind the exercise asks for."""
    if focus not in exercise.focuses:
        raise ValueError(f"unknown focus {focus!r} for {exercise.name}; "
                         f"choose from {sorted(exercise.focuses)}")
    spec = exercise.focuses[focus]
    check_student_object(exercise, student)
    dev = resolve_device(device)
    tol = tolerance(dev, dtype)
    inputs64, expected, seed = case_inputs(exercise, spec, hidden, seed, fixed)
    inputs = to_device(inputs64, dev, dtype)
    name = student_name(student, exercise)
    return CheckCase(exercise, student, spec, name, check_label(name, spec.description, hidden, seed),
                     dev, dtype, tol, inputs64, inputs, to_device(inputs64, dev, torch.float64),
                     exercise.shape(inputs), expected, focus_name=focus, hidden=hidden)
