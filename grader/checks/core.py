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
import re
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from grader.checks import diagnosis, shortcuts, stored, student_call
from grader.checks.diagnosis import PLAIN, Diagnosis
from grader.outcome import Outcome, check_label, draw_seed  # noqa: F401 (Outcome: grader.checks.core's API)

# (device type, dtype) -> tolerances for torch.testing.assert_close.
TOLERANCES = {
    ("cpu", torch.float32): dict(rtol=1e-4, atol=1e-5),
    ("cpu", torch.float64): dict(rtol=1e-7, atol=1e-9),
    ("cuda", torch.float32): dict(rtol=1e-3, atol=1e-4),
    ("cuda", torch.float64): dict(rtol=1e-7, atol=1e-9),
}
DEVICE_ENV = "GRADER_DEVICE"
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # grader/


class CheckError(AssertionError):
    """A check failed; the message is meant for the learner.

    finding: the key of the mistake the message names, if any. case: when a values check
    failed, the smallest failing case as data ({"title", "kind", "expected", "actual"}: 2-D
    tensors); picture: the same as PNG bytes, "expected | yours | difference" heatmaps
    (drawn when first asked for), else None."""

    def __init__(self, message="", *, finding=None, case=None, finding_name=None):
        super().__init__(message)
        # finding: a key, or a named mistake (Mistake / Finding) whose key and name are kept
        self.finding = getattr(finding, "key", finding)
        self.finding_name = getattr(finding, "name", None) or finding_name
        self.case, self._png = case, None

    def _render_traceback_(self):
        """IPython shows exactly these lines for a failing check: the message, without
        the grader's frames (the cell still fails, so it still scores 0)."""
        first, *rest = str(self).splitlines() or [""]
        return [f"\x1b[0;31mCheckError\x1b[0m: {first}", *rest]

    @property
    def picture(self):
        if self._png is None and self.case is not None:
            try:
                c = self.case
                self._png = diagnosis.picture(c["expected"], c["actual"], c["title"], c["kind"])
            except Exception:  # a picture that cannot be drawn is left out, never an error
                self._png = b""
        return self._png or None


@dataclass
class CheckResult:
    """A passed check: its label, and notes (e.g. a shortcut that graded runs refuse)."""
    label: str
    notes: tuple = ()


def device_name(device=None):
    """The device a check runs on: the argument, else $GRADER_DEVICE, else the CPU."""
    return device or os.environ.get(DEVICE_ENV) or "cpu"


def resolve_device(device=None):
    """device_name's device, which torch must have."""
    name = device_name(device)
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
        out = _call_student(self.exercise, self.student, inputs)
        _check_tensor(self.exercise, out, inputs, self.exercise.shape(inputs))
        return _to_cpu64(out)

    def run_raw(self, inputs):
        """The student's output on these inputs, float64 on the CPU: its type and shape are
        checked, NaN and inf are let through."""
        out = _call_student(self.exercise, self.student, inputs)
        shape, names = self.exercise.shape(inputs)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(shape):
            return _to_cpu64(_check_tensor(self.exercise, out, inputs, (shape, names)))
        return _to_cpu64(out)

    def try_run(self, inputs):
        """None when the student's code runs cleanly on these inputs, else what went wrong."""
        try:
            self.run(inputs)
        except _StudentError as wrapped:
            return _describe_exception(wrapped.err)
        except CheckError as err:
            return str(err)
        return None

    def on_meta(self):
        """The student's code run with its inputs on the meta device (plain data), or None
        where the code runs elsewhere (a sandbox gets real devices only)."""
        if isinstance(self.student, RemoteStudent):
            return None
        with _quiet():
            return student_call.execute_on_meta(self.student, self.exercise.call(self.inputs))

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

    call(spec) returns the plain result, or raises RemoteError for the student's error; after
    each call, changed lists the inputs the call changed in place (plain dicts, see
    grader.checks.student_call.execute_watched). facts(spec), when given, returns
    grader.checks.student_call.code_facts of the student's code."""

    def __init__(self, name, call, facts=None):
        self.__name__, self.call, self.facts = name, call, facts
        self.changed = []


GRADING_ERRORS = ("TimeoutError", "MalformedReply", "MemoryLimitExceeded")  # RemoteErrors the grading side raises


class RemoteError(Exception):
    """An error of the student's code run elsewhere, as data: the exception's type name, its
    whole message, the student's line, and the exception's own fields (plain data, e.g. a
    ParameterMismatch's expected and actual parameter shapes)."""

    def __init__(self, type_name, message, line=None, fields=None):
        super().__init__(message)
        self.type_name, self.line, self.fields = type_name, line, fields or {}


class _ParameterError(CheckError):
    """The student's module does not have the parameters the exercise asks for; fields:
    {"expected": {name: shape}, "yours": {name: shape}}."""

    def __init__(self, message, fields):
        super().__init__(message)
        self.fields = fields


class _Mutated(Exception):
    """The student's code changed its inputs in place (changed: plain dicts); first: on the
    check's own first call, whose output out can still be compared."""

    def __init__(self, changed, out):
        super().__init__("inputs changed in place")
        self.changed, self.out, self.first = changed, out, False


def _call_student(exercise, student, inputs):
    call = exercise.call(inputs)
    try:
        if isinstance(student, RemoteStudent):
            student.changed = []
            out = student.call(call)
            changed = student.changed
        else:
            with _quiet():
                out, changed = student_call.execute_watched(student, call)
    except student_call.ParameterMismatch as err:
        raise _ParameterError(str(err), err.fields) from None
    except student_call.CallRefused as err:  # the code broke a rule of the exercise
        raise CheckError(str(err), finding=_refusal(err.key)) from None
    except RemoteError as err:
        if err.type_name == "ParameterMismatch":
            raise _ParameterError(str(err), err.fields) from None
        if err.type_name == "CallRefused":
            raise CheckError(str(err), finding=_refusal(err.fields.get("key"))) from None
        raise _StudentError(err) from None
    except Exception as err:  # the student's code failed; explain, do not crash
        raise _StudentError(err) from None
    if changed:
        raise _Mutated(changed, out)
    return out


def _refusal(key):
    """The named mistake of the rule a refused call broke (grader.checks.student_call.CallRefused's
    key), or None."""
    refusals = student_call.REFUSALS
    return diagnosis.Finding(key, *refusals[key]) if key in refusals else None


def _type_name(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__ \
        if type(obj).__module__ not in ("builtins",) else type(obj).__name__


def shape_text(names):
    """"(B, T, C)": a shape's dimensions by name."""
    return "(" + ", ".join(names) + ")"


def _check_tensor(exercise, out, inputs, shape_info):
    """Returned type, shape, dtype/device and finiteness: raise CheckError on the first problem."""
    shape, names = shape_info[0], shape_text(shape_info[1])
    want = f"a tensor of shape {tuple(shape)} = {names}"
    if out is None:
        raise CheckError(f"returned None; expected {want}.\n  Did you forget the `return`?")
    if isinstance(out, (list, tuple)):
        tensors = [o for o in out if isinstance(o, torch.Tensor)]
        fits = [i for i, o in enumerate(out) if isinstance(o, torch.Tensor) and tuple(o.shape) == tuple(shape)]
        if len(fits) == 1:  # the answer plus extras (running statistics, a cache): not parts to stack
            extra = f"\n  Item {fits[0]} has that shape: return it alone and keep the rest inside."
        elif out and len(tensors) == len(out) and len({tuple(o.shape) for o in tensors}) == 1:
            extra = " Stack them with torch.stack(...)."
        else:
            extra = ""
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
                         "  Create new tensors with device=x.device (or register a buffer).", finding="device")
    want_dtype = exercise.out_dtype(inputs) if exercise.out_dtype else _input_dtype(inputs)
    if want_dtype is not None and out.dtype != want_dtype:
        if exercise.out_dtype:
            raise CheckError(f"returned dtype {out.dtype}; expected {want_dtype}.\n"
                             "  Keep torch's default dtype: no dtype=... when you create the tensor.",
                             finding="dtype")
        raise CheckError(f"returned dtype {out.dtype}; expected {want_dtype} like the inputs.\n"
                         "  Did you create a tensor without dtype=x.dtype?", finding="dtype")
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
    if a.dtype == b.dtype and a.device == b.device and a.is_floating_point():
        return bool(torch.allclose(a, b, equal_nan=True, **tol))  # the same test, without a report
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


def diagnose(exercise, inputs64, actual=None, error=None, tol=None, *, facts=None,
             expected=None, names=None, analyse=True):
    """The catalogued mistake that reproduces this output (or this exception), if any;
    else, with analyse, what grader.checks.diagnosis infers from the output, the expected output
    and the facts about the student's code (a Finding), or None."""
    # a NameError (the student's object, or a name inside it, not defined) is raised by no
    # catalogued mistake: running the catalogue to match it would only cost time
    unmatchable = actual is None and error is not None and _error_type(error) == "NameError"
    for mistake in () if unmatchable else exercise.mistakes:
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
        if isinstance(expected, torch.Tensor) and guess.shape == expected.shape and _close(guess, expected, tol):
            continue  # right on these inputs: a match would name a mistake the output does not show
        if _close(actual, guess, tol) or _close(actual.nan_to_num(0.0), guess.nan_to_num(0.0), tol):
            return diagnosis.refine(mistake, facts)
    if not analyse:
        return None
    try:
        cpu = {k: v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for k, v in inputs64.items()}
        err = None if error is None else (_error_type(error), str(error))
        with _quiet():
            return diagnosis.analyse(exercise, cpu, actual=actual, expected=expected,
                                     close=lambda a, b: _close(a, b, tol), tol=tol, facts=facts,
                                     names=names, error=err)
    except Exception:  # an analysis that fails leaves the message as it is
        return None


def _error_type(err):
    return err.type_name if isinstance(err, RemoteError) else type(err).__name__


def _same_error(a, b):
    """Same exception type, and the same sizes in the message (the wording may differ)."""
    numbers = lambda e: sorted(re.findall(r"\d+", str(e)))
    name = lambda e: e.type_name if isinstance(e, RemoteError) else type(e).__name__
    return name(a) == name(b) and numbers(a) == numbers(b)


def _named(mistake):
    return f"\n  Likely mistake: {mistake.name} \u2014 {mistake.hint}" if mistake else ""


# --- one check's case ----------------------------------------------------------------

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

    @property
    def key(self):
        return _exercise_key(self.exercise)

    def facts(self, instance=True):
        """grader.checks.student_call.code_facts of the student's code; with instance, also what
        an instance built for the inputs holds (looked at only when something failed)."""
        name = "facts" if instance else "static"
        if name not in self.known:
            self.known[name] = _code_facts(self.exercise, self.student, self.inputs if instance else None)
        return self.known[name]

    def reference(self):
        """The expected output, float64 on the CPU: the stored one, else the reference's."""
        if "expected" not in self.known:
            self.known["expected"] = self.expected if self.expected is not None else _to_cpu64(
                self.exercise.reference(*self.inputs64.values()))
        return self.known["expected"]

    def explain(self, actual=None, error=None):
        """The mistake that this output (or this exception) shows, if any (diagnose)."""
        return diagnose(self.exercise, self.inputs64_dev, actual, error, self.tol, facts=self.facts(),
                        expected=self.reference(), names=list(self.shape_info[1]))


def prepare_case(exercise, student, focus, *, hidden, seed, device, dtype, fixed):
    """The case one focus of a check runs: ValueError for an unknown focus, CheckError when
    the student's object is not code of the kind the exercise asks for."""
    if focus not in exercise.focuses:
        raise ValueError(f"unknown focus {focus!r} for {exercise.name}; "
                         f"choose from {sorted(exercise.focuses)}")
    spec = exercise.focuses[focus]
    _check_student_object(exercise, student)
    dev = resolve_device(device)
    tol = tolerance(dev, dtype)
    inputs64, expected, seed = _case_inputs(exercise, spec, hidden, seed, fixed)
    inputs = to_device(inputs64, dev, dtype)
    name = _student_name(student, exercise)
    return CheckCase(exercise, student, spec, name, check_label(name, spec.description, hidden, seed),
                     dev, dtype, tol, inputs64, inputs, to_device(inputs64, dev, torch.float64),
                     exercise.shape(inputs), expected)


def _case_inputs(exercise, spec, hidden, seed, fixed):
    """(inputs float64 on the CPU, the stored expected output or None, the seed): a hidden
    check draws fresh sizes and inputs from its seed; a visible one reads its stored case."""
    if hidden:
        seed = draw_seed() if seed is None else seed
        gen = torch.Generator().manual_seed(seed)
        return exercise.draw(gen, spec.case, draw_dims(exercise, gen)), None, seed
    stored_case = (fixed or _load_fixed(exercise))[spec.case]
    return stored_case["inputs"], stored_case["expected"], seed


# --- checking the student's answer: each stage raises what it found ----------------

class _Wrong(Exception):
    """A stage of the check found the answer wrong: the output it looked at and what it saw."""

    def __init__(self, out=None, detail=None):
        super().__init__(type(self).__name__)
        self.out, self.detail = out, detail


class _Shortcut(_Wrong):
    """detail: the function that does the whole exercise (a graded run gives no points)."""


class _WrongOutput(_Wrong):
    """out: what the student's code returned; detail: _check_tensor's CheckError."""


class _Baseline(_Wrong):
    """detail: the trivial baseline the output is (diagnosis.trivial)."""


class _NoAttention(_Wrong):
    """detail: how the output shows no attention (_no_attention): a message, or (message,
    finding key) where it names a mistake instead."""


class _Broken(_Wrong):
    """detail: an invariant's message, or (message, finding key) where it names the mistake."""


class _BrokenRun(_Wrong):
    """detail: the CheckError of running the student's code on an invariant's own inputs."""


class _ValuesDiffer(_Wrong):
    """The values differ from the reference."""


def _checked_output(case):
    """The student's output on the case's inputs, of the right type, shape, dtype and device
    and finite, as the Context the invariants see."""
    try:
        out = _call_student(case.exercise, case.student, case.inputs)
    except _Mutated as mutated:
        mutated.first = True  # on the check's own inputs: its output can still be compared
        raise
    try:
        out = _check_tensor(case.exercise, out, case.inputs, case.shape_info)
    except CheckError as err:
        raise _WrongOutput(out, err) from None
    return Context(case.exercise, case.student, case.inputs, _to_cpu64(out), case.tol, case.facts)


def _check_attends(case, ctx):
    """The output is no trivial baseline and shows that the answer attends."""
    baseline = diagnosis.trivial(case.exercise, _cpu(case.inputs64), ctx.out, ctx.close)
    if baseline:
        raise _Baseline(ctx.out, baseline)
    ignored = _no_attention(case.exercise, ctx)
    if ignored:
        raise _NoAttention(ctx.out, ignored)


def _check_invariants(case, ctx):
    """Each invariant of the focus holds (one the student bundle cannot judge is skipped)."""
    for inv in case.focus.invariants:
        try:
            problem = inv.fn(ctx)
        except stored.NotShipped:  # the student bundle cannot judge this one: say nothing
            problem = None
        except CheckError as err:  # a run on changed inputs went wrong (NaN, a shape)
            raise _BrokenRun(ctx.out, err) from None
        if problem:
            raise _Broken(ctx.out, problem)


def _check_values(case, ctx):
    """The output matches the reference within the check's tolerance."""
    # the test of torch.testing.assert_close (out is finite here); its first call
    # imports torch.distributed, about 1 s of CPU in a notebook's first values check
    if not _close(ctx.out, case.reference(), case.tol):
        raise _ValuesDiffer(ctx.out)


# --- explaining a failure: every way a check fails ends in _failure -----------------

@dataclass
class Failure:
    """What went wrong, before the check's label: the message, the mistake it names (a key,
    or a Mistake / Finding whose key and name are kept) and the smallest failing case."""
    message: str
    finding: object = None
    finding_name: Optional[str] = None
    case: Optional[dict] = None


def _failure(case, err, quiet):
    """The CheckError for any way the check failed: its label, then the explanation; in a
    notebook, a values check's smallest failing case is shown as a picture."""
    explain = next(fn for kind, fn in _EXPLAINERS if isinstance(err, kind))
    failure = explain(case, err)
    error = CheckError(f"{case.label}\n  {failure.message}", finding=failure.finding,
                       case=failure.case, finding_name=failure.finding_name)
    if not quiet and error.case is not None and _in_kernel():
        _show_png(error.picture)
    return error


def _picture(case, out):
    """The smallest failing case of a values check, as data (drawn when asked for), else None."""
    if not case.focus.values:
        return None
    return _picture_case(case.exercise, case.key, case.student, case.inputs64, case.dev, case.dtype,
                         case.tol, out, case.reference(), case.name)


def _as_named(detail):
    """A stage's own (message, finding key), kept as it is."""
    return Failure(detail[0], detail[1])


def _explain_shortcut(case, err):
    return Failure(shortcut_text(err.detail), "shortcut")


def _explain_wrong_output(case, err):
    found = case.explain(_safe_cpu64(err.out))
    return Failure(f"{err.detail}{_named(found)}", _finding_key(found) or err.detail.finding,
                   err.detail.finding_name)


def _explain_baseline(case, err):
    found = diagnose(case.exercise, case.inputs64_dev, err.out, tol=case.tol, analyse=False)
    return Failure(diagnosis.trivial_message(case.exercise, err.detail) + _named(found), "trivial")


def _explain_no_attention(case, err):
    if isinstance(err.detail, tuple):  # (message, finding): not a missing attention, a named mistake
        return _as_named(err.detail)
    found = diagnose(case.exercise, case.inputs64_dev, err.out, tol=case.tol, analyse=False)
    return Failure(diagnosis.no_attention_message(case.exercise, err.detail) + _named(found),
                   _finding_key(found) or "trivial")


def _explain_broken(case, err):
    if isinstance(err.detail, tuple):  # (message, finding): the invariant names the mistake itself
        return _as_named(err.detail)
    found = case.explain(err.out)
    return Failure(err.detail + _named(found), _finding_key(found), case=_picture(case, err.out))


def _explain_broken_run(case, err):
    run = err.detail
    found = case.explain(err.out) if run.finding is None else None  # what the check's own output shows
    if found is None and run.finding is None and "NaN/inf" in str(run) \
            and _close(err.out, case.reference(), case.tol):
        found = diagnosis.overflow_finding(case.exercise)
    if found is None:
        return _explain_check_error(case, run)
    return Failure(f"{run}{_named(found)}", _finding_key(found))


def _explain_values(case, err):
    found = case.explain(err.out)
    return Failure(f"values differ from the reference: "
                   f"{largest_difference(err.out, case.reference())}{_named(found)}",
                   _finding_key(found), case=_picture(case, err.out))


def _explain_mutation(case, err):
    right = None
    if err.first and isinstance(err.out, torch.Tensor) and tuple(err.out.shape) == tuple(case.shape_info[0]):
        right = _close(_to_cpu64(err.out), case.reference(), case.tol)
    return Failure(diagnosis.mutation_message(case.name, err.changed, case.facts(), right), "input_mutation")


def _explain_student_error(case, err):
    # a call that ran out of time or sent no readable answer says nothing about sizes
    plain = isinstance(err.err, RemoteError) and err.err.type_name in GRADING_ERRORS
    found = None if plain else case.explain(error=err.err)
    return Failure(f"{_describe_exception(err.err)}{_named(found)}", _finding_key(found))


def _explain_parameters(case, err):
    found = diagnosis.parameter_finding(err.fields.get("expected") or {}, err.fields.get("yours") or {},
                                        case.facts(), case.used)
    if found is not None and found.key == "bias":  # the message asks about it already
        return Failure(str(err), found.key)
    text = "\n".join(str(err).splitlines()[:3])
    return Failure(f"{text}{_named(found)}", _finding_key(found))


def _explain_check_error(case, err):
    """A CheckError raised on the way (a call the exercise refuses, a run on other inputs)."""
    return Failure(str(err), err.finding, err.finding_name, err.case)


_EXPLAINERS = (  # the first kind the failure is decides its explanation
    (_Shortcut, _explain_shortcut), (_WrongOutput, _explain_wrong_output),
    (_Baseline, _explain_baseline), (_NoAttention, _explain_no_attention),
    (_Broken, _explain_broken), (_BrokenRun, _explain_broken_run), (_ValuesDiffer, _explain_values),
    (_Mutated, _explain_mutation), (_StudentError, _explain_student_error),
    (_ParameterError, _explain_parameters), (CheckError, _explain_check_error),
)
_FAILED = tuple(kind for kind, _ in _EXPLAINERS)


# --- the check -----------------------------------------------------------------------

def run_check(exercise, student, focus="values", *, hidden=False, seed=None, device=None,
              dtype=torch.float32, fixed=None, quiet=False, graded=False, config=None):
    """Run one focus of one exercise on the student's code; raise CheckError on failure,
    return a CheckResult on success.

    graded: a graded run, where a shortcut (grader.checks.shortcuts) fails the check; in
    JupyterLab it passes with a note. config: the traitlets config with the instructor's
    Shortcuts (default: the course's nbgrader_config.py)."""
    __tracebackhide__ = True
    case = prepare_case(exercise, student, focus, hidden=hidden, seed=seed, device=device,
                        dtype=dtype, fixed=fixed)
    case.used = diagnosis.shortcut(case.exercise, case.facts(instance=False), shortcuts.forbidden(config))
    try:
        if case.used and graded:
            raise _Shortcut(detail=case.used)
        ctx = _checked_output(case)
        _check_attends(case, ctx)
        _check_invariants(case, ctx)
        if case.focus.values:
            _check_values(case, ctx)
    except _FAILED as err:
        raise _failure(case, err, quiet) from None
    return _passed(case, graded, quiet)


def _passed(case, graded, quiet):
    """The passed check's result, with its notes, printed with a tick unless quiet."""
    notes = ()
    if case.used:
        notes = (f"note: {case.used} does the whole exercise; it passes here, but a graded run gives "
                 "this check no points.",)
    note = diagnosis.globals_note(case.facts(instance=False)) if not graded else None
    notes += (note,) if note else ()
    note = diagnosis.passing_note(case.exercise, case.inputs, case.facts)
    notes += (note,) if note else ()
    if not quiet:
        print(f"\u2713 {case.label}" + "".join(f"\n  {note}" for note in notes))
    return CheckResult(case.label, notes)


def _unwritten(exercise, ctx, again):
    """(message, "unwritten") when only some entries change from call to call: entries of a
    torch.empty buffer that the code never fills hold whatever the memory held."""
    same = torch.isclose(again, ctx.out, rtol=ctx.tol["rtol"], atol=ctx.tol["atol"])
    if not same.any():
        return None  # everything changes: random weights, not a hole
    names = exercise.shape(ctx.inputs)[1]  # each dimension by name
    where = (~same).nonzero()
    for d in range(ctx.out.dim()):
        idx = where[:, d].unique()
        first, last = int(idx.min()), int(idx.max())
        if len(idx) < ctx.out.shape[d] and len(idx) == last - first + 1:
            name = names[d] if d < len(names) else f"dim {d}"
            span = f"{name} = {first}" if first == last else f"{name} = {first}..{last}"
            return (f"your output at {span} changes from call to call on the same inputs, the rest "
                    f"does not: those entries are never written.\n  torch.empty leaves whatever the memory "
                    f"held: make sure your loops fill every position, up to {name} = {ctx.out.shape[d] - 1}.",
                    "unwritten")
    return None


def _no_attention(exercise, ctx):
    """How the output shows that the answer does no attention, or None: it differs from
    call to call on the same inputs (random weights), or the exercise's own test says so."""
    try:
        if exercise.repeatable:
            again = ctx.run(ctx.inputs)
            if not ctx.close(again, ctx.out):
                return _unwritten(exercise, ctx, again) or \
                    "changes from call to call on the same inputs (random weights?)"
        return exercise.attends(ctx) if exercise.attends else None
    except (CheckError, _StudentError, _Mutated, stored.NotShipped):
        return None  # the checks that follow say what is wrong


def shortcut_message(label, used):
    """What a graded check says when the student's code uses a function that does the whole
    exercise (found by the in-kernel watch, or in the source by the grading process)."""
    return f"{label}\n  {shortcut_text(used)}"


def shortcut_text(used):
    return (f"uses {used}, which does the whole exercise: a graded run gives this "
            "check no points.\n  Write the computation out yourself.")


def evaluate(exercise, student, focus="values", *, hidden=False, seed=None, device=None,
             dtype=torch.float32, fixed=None, graded=False, config=None, source_uses=None):
    """run_check as data: the check's Outcome, never an exception for the student's sake.

    source_uses: a forbidden function that the grading process found in the student's
    source (grader.grading.scan), where the kernel cannot hide it; the graded check then
    fails as a shortcut without calling the student's code."""
    seed = (draw_seed() if seed is None else seed) if hidden else None
    name = _student_name(student, exercise)
    label = check_label(name, exercise.focuses[focus].description, hidden, seed)
    make = lambda **kw: Outcome(exercise.name, name, focus, hidden, seed, label=label, **kw)
    if source_uses and graded:
        return make(passed=False, message=shortcut_message(label, source_uses), mistake="shortcut")
    try:
        result = run_check(exercise, student, focus, hidden=hidden, seed=seed, device=device,
                           dtype=dtype, fixed=fixed, quiet=True, graded=graded, config=config)
    except CheckError as err:
        return make(passed=False, message=str(err), mistake=err.finding,
                    mistake_name=err.finding_name, picture=err.picture)
    return make(passed=True, notes=tuple(result.notes))


def _cpu(inputs):
    return {k: v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _finding_key(found):
    """The named mistake itself (CheckError keeps its key and name), or None."""
    return found if getattr(found, "key", None) else None


def _code_facts(exercise, student, inputs=None):
    """grader.checks.student_call.code_facts of the student's code (plain data), or None; with
    inputs, also what an instance of a module built for them holds."""
    call = exercise.call(inputs) if inputs is not None else {"kind": "code"}
    try:
        if isinstance(student, RemoteStudent):
            return student.facts(call) if student.facts else None
        with _quiet():
            return student_call.code_facts(student, call)
    except Exception:
        return None


def _picture_case(*args):
    """_smallest_case, or None where the diagnosis cannot cut or slice this exercise's inputs
    (one added without its sizes and crops): the check's message then comes alone."""
    try:
        return _smallest_case(*args)
    except Exception:  # the picture is optional; its absence is never an error
        return None


def _smallest_case(exercise, key, student, inputs64, dev, dtype, tol, actual, expected, name):
    """The smallest failing case, for the picture: the check's inputs cut to the fewest
    time steps that still fail, and the batch element that differs most."""
    case, shown_T = (expected, actual), diagnosis.time_steps(exercise, inputs64)
    for L in sorted({2, 3, 4, shown_T // 2} - {shown_T}):  # a few runs at most, smallest first
        if L >= shown_T:
            break
        small64 = diagnosis.crop(exercise, inputs64, L)
        small = to_device(small64, dev, dtype)
        try:
            out = _to_cpu64(_check_tensor(exercise, _call_student(exercise, student, small), small,
                                          exercise.shape(small)))
        except (_StudentError, _Mutated, CheckError):
            continue
        try:
            want = _to_cpu64(exercise.reference(*small64.values()))
        except stored.NotShipped:  # the student bundle has no reference for this crop
            continue
        if not _close(out, want, tol):
            case, shown_T = (want, out), L
            break
    want2d, got2d, where = diagnosis.slice_2d(key, *case)
    title = f"smallest failing case ({where}T = {shown_T})" if shown_T else \
        "the prompt and the sampled ids, every sequence"  # ids are not cut shorter
    return {"title": f"{name}: {title}",
            "kind": diagnosis.picture_kind(exercise), "expected": want2d, "actual": got2d}


def _in_kernel():
    """True inside a Jupyter kernel's main thread (where a picture can be shown)."""
    ipython = sys.modules.get("IPython")
    if ipython is None or threading.current_thread() is not threading.main_thread():
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _show_png(png):
    if png:
        from IPython.display import Image, display

        display(Image(data=png, format="png"))


def _exercise_key(exercise):
    return exercise.key


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
    from grader.checks import fixed as cases

    key = _exercise_key(exercise)
    if key not in _FIXED_CACHE:
        _FIXED_CACHE[key] = cases.load(key)
    return _FIXED_CACHE[key]
