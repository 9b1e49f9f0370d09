"""Calling the student's code from the checks: in this process (through
grader.checks.student_call, its prints and warnings kept out of the test cell) or in a
kernel elsewhere (RemoteStudent, the grading channel); every way it can go wrong as an
exception of its own (an error of the student's code, parameters that do not fit, inputs
changed in place, a call the exercise refuses), and the error described for the learner."""
import contextlib
import io
import os
import threading
import traceback
import warnings

import torch

from grader.checks import diagnosis, student_call
from grader.checks.feedback import CheckError

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # grader/
GRADING_ERRORS = ("TimeoutError", "MalformedReply", "MemoryLimitExceeded")  # RemoteErrors the grading side raises


class RemoteStudent:
    """The student's code running elsewhere (the verification sandbox).

    call(spec) returns the plain result, or raises RemoteError for the student's error; after
    each call, changed lists the inputs the call changed in place (plain dicts, see
    grader.checks.student_call.execute_watched). facts(spec), when given, returns
    grader.checks.student_call.code_facts of the student's code."""

    def __init__(self, name, call, facts=None):
        self.__name__, self.call, self.facts = name, call, facts
        self.changed = []


class RemoteError(Exception):
    """An error of the student's code run elsewhere, as data: the exception's type name, its
    whole message, the student's line, and the exception's own fields (plain data, e.g. a
    ParameterMismatch's expected and actual parameter shapes)."""

    def __init__(self, type_name, message, line=None, fields=None):
        super().__init__(message)
        self.type_name, self.line, self.fields = type_name, line, fields or {}


class StudentError(Exception):
    """The student's code raised err."""

    def __init__(self, err):
        super().__init__(str(err))
        self.err = err


class ParameterError(CheckError):
    """The student's module does not have the parameters the exercise asks for; fields:
    {"expected": {name: shape}, "yours": {name: shape}}."""

    def __init__(self, message, fields):
        super().__init__(message)
        self.fields = fields


class Mutated(Exception):
    """The student's code changed its inputs in place (changed: plain dicts); first: on the
    check's own first call, whose output out can still be compared."""

    def __init__(self, changed, out):
        super().__init__("inputs changed in place")
        self.changed, self.out, self.first = changed, out, False


@contextlib.contextmanager
def quiet():
    """Keep the student's prints and warnings out of the test cell (stderr costs points).

    Swapping sys.stdout and the warning filters is process-wide, so it is done only on
    the main thread (a notebook's kernel); the grading process calls checks from threads
    and has no test cell to protect."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with warnings.catch_warnings(record=True), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("always")
        yield


def call_student(exercise, student, inputs):
    """The student's output on these inputs; StudentError, ParameterError, Mutated or a
    CheckError (a call refused) for what went wrong."""
    call = exercise.call(inputs)
    try:
        if isinstance(student, RemoteStudent):
            student.changed = []
            out = student.call(call)
            changed = student.changed
        else:
            with quiet():
                out, changed = student_call.execute_watched(student, call)
    except student_call.ParameterMismatch as err:
        raise ParameterError(str(err), err.fields) from None
    except student_call.CallRefused as err:  # the code broke a rule of the exercise
        raise CheckError(str(err), finding=refusal(err.key)) from None
    except RemoteError as err:
        if err.type_name == "ParameterMismatch":
            raise ParameterError(str(err), err.fields) from None
        if err.type_name == "CallRefused":
            raise CheckError(str(err), finding=refusal(err.fields.get("key"))) from None
        raise StudentError(err) from None
    except Exception as err:  # the student's code failed; explain, do not crash
        raise StudentError(err) from None
    if changed:
        raise Mutated(changed, out)
    return out


def on_meta(student, call):
    """The student's code run with the call's tensors on the meta device (plain data), here or
    in the student's kernel (through the facts it answers), or None where it cannot be asked."""
    if isinstance(student, RemoteStudent):
        if not student.facts:
            return None
        try:
            return student.facts({"kind": "meta", "call": call})
        except Exception:  # the kernel could not answer: the probe says nothing
            return None
    with quiet():
        return student_call.execute_on_meta(student, call)


def refusal(key):
    """The named mistake of the rule a refused call broke (grader.checks.student_call.CallRefused's
    key), or None."""
    refusals = student_call.REFUSALS
    return diagnosis.Finding(key, *refusals[key]) if key in refusals else None


def code_facts(exercise, student, inputs=None):
    """grader.checks.student_call.code_facts of the student's code (plain data), or None; with
    inputs, also what an instance of a module built for them holds."""
    call = exercise.call(inputs) if inputs is not None else {"kind": "code"}
    try:
        if isinstance(student, RemoteStudent):
            return student.facts(call) if student.facts else None
        with quiet():
            return student_call.code_facts(student, call)
    except Exception:
        return None


def student_name(student, exercise):
    return getattr(student, "__name__", exercise.name)


def type_name(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__ \
        if type(obj).__module__ not in ("builtins",) else type(obj).__name__


def check_student_object(exercise, student):
    """CheckError unless the student's object is code of the kind the exercise asks for."""
    if isinstance(student, RemoteStudent):
        return
    if exercise.module:
        if isinstance(student, torch.nn.Module):
            raise CheckError(f"pass the class itself ({type(student).__name__}), "
                             f"not an instance {type(student).__name__}(...).")
        if not (isinstance(student, type) and issubclass(student, torch.nn.Module)):
            raise CheckError(f"expected an nn.Module class; got {type_name(student)}.")
    elif not callable(student):
        raise CheckError(f"expected your function itself (e.g. {exercise.name}), not its result: "
                         f"got a {type_name(student)}.")


def error_type(err):
    return err.type_name if isinstance(err, RemoteError) else type(err).__name__


def _student_frame(tb):
    """The innermost frame of the traceback that is the student's own code."""
    frames = [f for f in traceback.extract_tb(tb)
              if not f.filename.startswith(PACKAGE_DIR) and f"{os.sep}torch{os.sep}" not in f.filename]
    return frames[-1] if frames else None


def describe_exception(err):
    """The student's error, for the learner: its type, first line and the student's line."""
    if isinstance(err, RemoteError):
        if err.type_name == "NotImplementedError":
            return describe_exception(NotImplementedError())
        text = str(err).strip().splitlines()  # as for an error raised here (below)
        loc = f"\n  at line {err.line}" if err.line else ""
        return f"your code raised {err.type_name}: {text[0][:300] if text else ''}{loc}"
    if isinstance(err, NotImplementedError):
        return ("not implemented yet: replace the `raise NotImplementedError()` line in your "
                "solution cell with your code, then run that cell again.")
    text = str(err).strip().splitlines()
    text = text[0] if text else ""
    where = _student_frame(err.__traceback__)
    loc = f"\n  at line {where.lineno}: {where.line}" if where and where.line else ""
    return f"your code raised {type(err).__name__}: {text[:300]}{loc}"
