"""The checking engine shared by every exercise.

A check takes the student's function (or nn.Module class), builds the inputs itself,
runs the student's code, and then tests, in order: the returned type, the shape, the
dtype and device, NaN/inf, the invariants of the exercise, and finally the values
against a float64 reference. The first failure raises ``CheckError`` with a short
message; before raising, the output is compared with a catalogue of known mistakes so
the message can name the likely one.
"""
import contextlib
import io
import os
import random
import re
import threading
import traceback
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from grader import student_call

# (device type, dtype) -> tolerances for torch.testing.assert_close.
TOLERANCES = {
    ("cpu", torch.float32): dict(rtol=1e-4, atol=1e-5),
    ("cpu", torch.float64): dict(rtol=1e-7, atol=1e-9),
    ("cuda", torch.float32): dict(rtol=1e-3, atol=1e-4),
    ("cuda", torch.float64): dict(rtol=1e-7, atol=1e-9),
}
DEVICE_ENV = "GRADER_DEVICE"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class CheckError(AssertionError):
    """A check failed; the message is meant for the learner."""

    def _render_traceback_(self):
        """IPython shows exactly these lines for a failing check: the message, without
        the grader's frames (the cell still fails, so it still scores 0)."""
        first, *rest = str(self).splitlines() or [""]
        return [f"\x1b[0;31mCheckError\x1b[0m: {first}", *rest]


def resolve_device(device=None):
    """The device a check runs on: the argument, else $GRADER_DEVICE, else the CPU."""
    name = device or os.environ.get(DEVICE_ENV) or "cpu"
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"{DEVICE_ENV}/device asks for {name}, but torch sees no CUDA device")
    return dev


def tolerance(device, dtype):
    return TOLERANCES[(torch.device(device).type, dtype)]


@dataclass
class Invariant:
    """A property every correct answer has, tested before the values."""
    name: str
    fn: Callable  # fn(ctx) -> None or a message


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
    call: Callable  # call(inputs) -> a call for grader.student_call.execute
    reference: Callable  # reference(*inputs.values()) in float64
    draw: Callable  # draw(gen, case, dims) -> inputs (float64, CPU)
    dims: dict  # name -> (fixed value, (low, high) for hidden checks)
    shape: Callable  # shape(inputs) -> (expected shape, its names)
    focuses: dict
    mistakes: tuple = ()
    module: bool = False
    distinct: tuple = ()  # dims that must all differ from each other
    out_dtype: Optional[Callable] = None  # expected dtype when not the inputs' dtype


@dataclass
class Context:
    """What an invariant sees: the student's output and a way to run the student again."""
    exercise: Exercise
    student: object
    inputs: dict  # on the check's device and dtype
    out: torch.Tensor  # the student's output, float64 on the CPU
    tol: dict

    def run(self, inputs):
        out = _call_student(self.exercise, self.student, inputs)
        _check_tensor(self.exercise, out, inputs, self.exercise.shape(inputs))
        return _to_cpu64(out)

    def close(self, a, b):
        return _close(a, b, self.tol)


# --- inputs --------------------------------------------------------------------------

def draw_dims(exercise, gen):
    """Random sizes for a hidden check, all different from each other where it matters."""
    for _ in range(1000):
        dims = {k: int(torch.randint(lo, hi + 1, (1,), generator=gen)) for k, (_, (lo, hi))
                in exercise.dims.items()}
        if "block_size" in dims:  # drawn as how much longer than T the module is built for
            dims["block_size"] += dims["T"]
        picked = [dims[k] for k in exercise.distinct]
        if len(set(picked)) == len(picked) and _dims_ok(dims):
            return dims
    raise RuntimeError(f"could not draw distinct sizes for {exercise.name}")


def _dims_ok(dims):
    if "n_heads" in dims and "head_size" in dims and "C" in dims:
        return dims["n_heads"] * dims["head_size"] != dims["C"]
    return True


def fixed_dims(exercise):
    return {k: fixed for k, (fixed, _) in exercise.dims.items()}


def to_device(inputs, device, dtype):
    out = {}
    for key, val in inputs.items():
        if isinstance(val, torch.Tensor):
            val = val.to(device=device, dtype=dtype if val.is_floating_point() else val.dtype)
        out[key] = val
    return out


# --- running the student's code ------------------------------------------------------

def _student_frame(tb):
    """The innermost frame of the traceback that is the student's own code."""
    frames = [f for f in traceback.extract_tb(tb)
              if not f.filename.startswith(PACKAGE_DIR) and f"{os.sep}torch{os.sep}" not in f.filename]
    return frames[-1] if frames else None


def _describe_exception(err):
    if isinstance(err, RemoteError):
        if err.type_name == "NotImplementedError":
            return _describe_exception(NotImplementedError())
        loc = f"\n  at line {err.line}" if err.line else ""
        return f"your code raised {err.type_name}: {str(err)[:300]}{loc}"
    if isinstance(err, NotImplementedError):
        return ("not implemented yet: replace the `raise NotImplementedError()` line in your "
                "solution cell with your code, then run that cell again.")
    text = str(err).strip().splitlines()
    text = text[0] if text else ""
    where = _student_frame(err.__traceback__)
    loc = f"\n  at line {where.lineno}: {where.line}" if where and where.line else ""
    return f"your code raised {type(err).__name__}: {text[:300]}{loc}"


class _StudentError(Exception):
    def __init__(self, err):
        super().__init__(str(err))
        self.err = err


@contextlib.contextmanager
def _quiet():
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


class RemoteStudent:
    """The student's code running elsewhere (the verification sandbox).

    call(spec) returns the plain result, or raises RemoteError for the student's error."""

    def __init__(self, name, call):
        self.__name__, self.call = name, call


class RemoteError(Exception):
    def __init__(self, type_name, message, line=None):
        super().__init__(message)
        self.type_name, self.line = type_name, line


def _call_student(exercise, student, inputs):
    call = exercise.call(inputs)
    try:
        if isinstance(student, RemoteStudent):
            return student.call(call)
        with _quiet():
            return student_call.execute(student, call)
    except student_call.ParameterMismatch as err:
        raise CheckError(str(err)) from None
    except RemoteError as err:
        if err.type_name == "ParameterMismatch":
            raise CheckError(str(err)) from None
        raise _StudentError(err) from None
    except Exception as err:  # the student's code failed; explain, do not crash
        raise _StudentError(err) from None


def _type_name(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__ \
        if type(obj).__module__ not in ("builtins",) else type(obj).__name__


def _check_tensor(exercise, out, inputs, shape_info):
    """Returned type, shape, dtype/device and finiteness: raise CheckError on the first problem."""
    shape, names = shape_info
    want = f"a tensor of shape {tuple(shape)} = {names}"
    if out is None:
        raise CheckError(f"returned None; expected {want}.\n  Did you forget the `return`?")
    if isinstance(out, (list, tuple)):
        extra = " Stack them with torch.stack(...)." if out and all(
            isinstance(o, torch.Tensor) for o in out) else ""
        raise CheckError(f"returned a {type(out).__name__} of {len(out)} items; expected {want}.{extra}")
    if isinstance(out, (bool, int, float, complex)):
        raise CheckError(f"returned a single {type(out).__name__} ({out!r}); expected {want}.")
    if type(out).__module__.startswith("numpy"):
        raise CheckError(f"returned a {_type_name(out)}; expected {want}.\n"
                         "  Keep the computation in torch (no .numpy()).")
    if isinstance(out, torch.nn.Parameter):
        out = out.data
    if not isinstance(out, torch.Tensor):
        raise CheckError(f"returned a {_type_name(out)}; expected {want}.")
    if type(out) is not torch.Tensor:
        raise CheckError(f"returned a {_type_name(out)} (a Tensor subclass); return a plain torch.Tensor.")
    if tuple(out.shape) != tuple(shape):
        raise CheckError(f"returned shape {tuple(out.shape)}; expected {tuple(shape)} = {names}.")
    dev = _input_device(inputs)
    if dev is not None and out.device != dev:
        raise CheckError(f"returned a tensor on {out.device}; the inputs are on {dev}.\n"
                         "  Create new tensors with device=x.device (or register a buffer).")
    want_dtype = exercise.out_dtype(inputs) if exercise.out_dtype else _input_dtype(inputs)
    if want_dtype is not None and out.dtype != want_dtype:
        raise CheckError(f"returned dtype {out.dtype}; expected {want_dtype} like the inputs.\n"
                         "  Did you create a tensor without dtype=x.dtype?")
    if out.is_floating_point() and not torch.isfinite(out).all():
        bad = (~torch.isfinite(out)).nonzero()[0].tolist()
        n = int((~torch.isfinite(out)).sum())
        raise CheckError(f"output has {n} NaN/inf value(s), the first at index {tuple(bad)}.")
    return out


def _input_device(inputs):
    for val in inputs.values():
        if isinstance(val, torch.Tensor):
            return val.device
    return None


def _input_dtype(inputs):
    for val in inputs.values():
        if isinstance(val, torch.Tensor) and val.is_floating_point():
            return val.dtype
    return None


def _safe_cpu64(t):
    """The tensor as float64 on the CPU, or None when it cannot be read (not a tensor, meta...)."""
    try:
        return _to_cpu64(t) if isinstance(t, torch.Tensor) else None
    except Exception:
        return None


def _to_cpu64(t):
    if isinstance(t, torch.nn.Parameter):
        t = t.data
    return t.detach().to("cpu", torch.float64)


# --- comparing -----------------------------------------------------------------------

def _close(a, b, tol):
    if a.shape != b.shape:
        return False
    try:
        torch.testing.assert_close(a, b, equal_nan=True, check_dtype=False, **tol)
        return True
    except AssertionError:
        return False


def largest_difference(actual, expected):
    """One line: where the two tensors differ most."""
    diff = (actual - expected).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    idx = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    return (f"largest difference {float(diff[idx]):.4g} at index {idx}: "
            f"expected {float(expected[idx]):.6g}, got {float(actual[idx]):.6g}")


def diagnose(exercise, inputs64, actual=None, error=None, tol=None):
    """The catalogued mistake that reproduces this output (or this exception), if any."""
    for mistake in exercise.mistakes:
        try:
            with _quiet():
                guess = mistake.fn(*inputs64.values())
        except Exception as err:  # a variant that raises is matched by its error
            if error is not None and _same_error(err, error):
                return mistake
            continue
        if actual is None or not isinstance(guess, torch.Tensor):
            continue
        guess = _to_cpu64(guess)
        if _close(actual, guess, tol) or _close(actual.nan_to_num(0.0), guess.nan_to_num(0.0), tol):
            return mistake
    return None


def _same_error(a, b):
    """Same exception type, and the same sizes in the message (the wording may differ)."""
    numbers = lambda e: sorted(re.findall(r"\d+", str(e)))
    name = lambda e: e.type_name if isinstance(e, RemoteError) else type(e).__name__
    return name(a) == name(b) and numbers(a) == numbers(b)


def _named(mistake):
    return f"\n  Likely mistake: {mistake.name} \u2014 {mistake.hint}" if mistake else ""


class _Named(CheckError):
    """A CheckError that knows which catalogued mistake it named."""

    def __init__(self, message, mistake=None):
        super().__init__(message + _named(mistake))
        self.mistake = (mistake.key, mistake.name) if mistake else (None, None)


# --- the check -----------------------------------------------------------------------

@dataclass
class Outcome:
    """The result of one check, as data: what the test cell shows and the merge reads."""
    exercise: str  # the exercise's name (the student's object is expected under it)
    student: str  # the name of the object that was checked
    focus: str
    hidden: bool
    seed: Optional[int]
    passed: bool
    label: str  # "<student>: <what the focus checks>[ (hidden check, seed N)]"
    message: str = ""  # for the learner when it failed: what is wrong, maybe the likely mistake
    mistake: Optional[str] = None  # the key of the named catalogued mistake
    mistake_name: Optional[str] = None  # and its name, as the message gives it

    def line(self):
        """The one line a passing check prints."""
        return f"\u2713 {self.label}"

    def to_json(self):
        return dict(vars(self))


def evaluate(exercise, student, focus="values", *, hidden=False, seed=None, device=None,
             dtype=torch.float32, fixed=None):
    """Run one focus of one exercise on the student's code and return its Outcome."""
    __tracebackhide__ = True
    if focus not in exercise.focuses:
        raise ValueError(f"unknown focus {focus!r} for {exercise.name}; "
                         f"choose from {sorted(exercise.focuses)}")
    spec = exercise.focuses[focus]
    dev = resolve_device(device)
    tol = tolerance(dev, dtype)
    if hidden:
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    where = f" (hidden check, seed {seed})" if hidden else ""
    label = f"{_student_name(student, exercise)}: {spec.description}{where}"
    outcome = lambda passed, message="", mistake=(None, None): Outcome(
        exercise.name, _student_name(student, exercise), focus, hidden, seed if hidden else None,
        passed, label, message, *mistake)
    try:
        _check_student_object(exercise, student)
        _run(exercise, student, spec, hidden, seed, dev, dtype, tol, fixed)
    except _Named as err:
        return outcome(False, f"{label}\n  {err}", err.mistake)
    except CheckError as err:
        return outcome(False, f"{label}\n  {err}")
    return outcome(True)


def _run(exercise, student, spec, hidden, seed, dev, dtype, tol, fixed):
    if hidden:
        gen = torch.Generator().manual_seed(seed)
        inputs64 = exercise.draw(gen, spec.case, draw_dims(exercise, gen))
        expected = None
    else:
        case = (fixed or _load_fixed(exercise))[spec.case]
        inputs64, expected = case["inputs"], case["expected"]
    inputs = to_device(inputs64, dev, dtype)
    inputs64_dev = to_device(inputs64, dev, torch.float64)
    shape_info = exercise.shape(inputs)
    try:
        out = _call_student(exercise, student, inputs)
        try:
            out = _check_tensor(exercise, out, inputs, shape_info)
        except CheckError as err:
            actual = _safe_cpu64(out)
            raise _Named(str(err), diagnose(exercise, inputs64_dev, actual, tol=tol)) from None
        ctx = Context(exercise, student, inputs, _to_cpu64(out), tol)
        for inv in spec.invariants:
            problem = inv.fn(ctx)
            if problem:
                raise _Named(problem, diagnose(exercise, inputs64_dev, ctx.out, tol=tol))
        if spec.values:
            if expected is None:
                expected = _to_cpu64(exercise.reference(*inputs64.values()))
            try:
                torch.testing.assert_close(ctx.out, expected, check_dtype=False, **tol)
            except AssertionError:
                raise _Named(f"values differ from the reference: "
                             f"{largest_difference(ctx.out, expected)}",
                             diagnose(exercise, inputs64_dev, ctx.out, tol=tol)) from None
    except _StudentError as wrapped:
        raise _Named(_describe_exception(wrapped.err),
                     diagnose(exercise, inputs64_dev, error=wrapped.err, tol=tol)) from None


def run_check(exercise, student, focus="values", *, hidden=False, seed=None, device=None,
              dtype=torch.float32, fixed=None, quiet=False):
    """Run one focus of one exercise on the student's code: print one line starting with a
    tick, or raise CheckError naming what went wrong."""
    __tracebackhide__ = True
    result = evaluate(exercise, student, focus, hidden=hidden, seed=seed, device=device,
                      dtype=dtype, fixed=fixed)
    if not result.passed:
        raise CheckError(result.message)
    if not quiet:
        print(result.line())


def _student_name(student, exercise):
    return getattr(student, "__name__", exercise.name)


def _check_student_object(exercise, student):
    if isinstance(student, RemoteStudent):
        return
    if exercise.module:
        if isinstance(student, torch.nn.Module):
            raise CheckError(f"pass the class itself ({type(student).__name__}), "
                             f"not an instance {type(student).__name__}(...).")
        if not (isinstance(student, type) and issubclass(student, torch.nn.Module)):
            raise CheckError(f"expected an nn.Module class; got {_type_name(student)}.")
    elif not callable(student):
        raise CheckError(f"expected your function itself (e.g. {exercise.name}), not its result: "
                         f"got a {_type_name(student)}.")


_FIXED_CACHE = {}


def _load_fixed(exercise):
    from grader import fixtures
    from grader.exercises import EXERCISES

    key = next(k for k, ex in EXERCISES.items() if ex is exercise)
    if key not in _FIXED_CACHE:
        _FIXED_CACHE[key] = fixtures.load(key)
    return _FIXED_CACHE[key]
