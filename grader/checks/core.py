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
from dataclasses import dataclass
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
    """The student's code changed its inputs in place (changed: plain dicts)."""

    def __init__(self, changed, out):
        super().__init__("inputs changed in place")
        self.changed, self.out = changed, out


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


# --- the check -----------------------------------------------------------------------

def run_check(exercise, student, focus="values", *, hidden=False, seed=None, device=None,
              dtype=torch.float32, fixed=None, quiet=False, graded=False, config=None):
    """Run one focus of one exercise on the student's code; raise CheckError on failure,
    return a CheckResult on success.

    graded: a graded run, where a shortcut (grader.checks.shortcuts) fails the check; in
    JupyterLab it passes with a note. config: the traitlets config with the instructor's
    Shortcuts (default: the course's nbgrader_config.py)."""
    __tracebackhide__ = True
    if focus not in exercise.focuses:
        raise ValueError(f"unknown focus {focus!r} for {exercise.name}; "
                         f"choose from {sorted(exercise.focuses)}")
    spec = exercise.focuses[focus]
    _check_student_object(exercise, student)
    dev = resolve_device(device)
    tol = tolerance(dev, dtype)

    if hidden:
        seed = draw_seed() if seed is None else seed
        gen = torch.Generator().manual_seed(seed)
        inputs64 = exercise.draw(gen, spec.case, draw_dims(exercise, gen))
        expected = None
    else:
        case = (fixed or _load_fixed(exercise))[spec.case]
        inputs64, expected = case["inputs"], case["expected"]

    inputs = to_device(inputs64, dev, dtype)
    inputs64_dev = to_device(inputs64, dev, torch.float64)
    shape_info = exercise.shape(inputs)
    name = _student_name(student, exercise)
    label = check_label(name, spec.description, hidden, seed)
    key = _exercise_key(exercise)
    names = list(shape_info[1])
    cache = {}

    def facts(instance=True):  # what an instance holds is looked at only when something failed
        name = "facts" if instance else "static"
        if name not in cache:
            cache[name] = _code_facts(exercise, student, inputs if instance else None)
        return cache[name]

    def reference():
        if "expected" not in cache:
            cache["expected"] = expected if expected is not None else _to_cpu64(
                exercise.reference(*inputs64.values()))
        return cache["expected"]

    def explain(actual=None, error=None):
        return diagnose(exercise, inputs64_dev, actual, error, tol, facts=facts(),
                        expected=reference(), names=names)

    notes = ()
    used = diagnosis.shortcut(exercise, facts(instance=False), shortcuts.forbidden(config))
    if used and graded:
        raise CheckError(shortcut_message(label, used), finding="shortcut")
    if used:
        notes = (f"note: {used} does the whole exercise; it passes here, but a graded run gives "
                 "this check no points.",)
    first = True
    try:
        out = _call_student(exercise, student, inputs)
        first = False
        try:
            out = _check_tensor(exercise, out, inputs, shape_info)
        except CheckError as err:
            found = explain(_safe_cpu64(out))
            raise CheckError(f"{err}{_named(found)}", finding=_finding_key(found) or err.finding,
                             finding_name=err.finding_name) from None
        ctx = Context(exercise, student, inputs, _to_cpu64(out), tol, facts)
        # a values check shows the smallest failing case
        case = lambda: _picture_case(exercise, key, student, inputs64, dev, dtype, tol, ctx.out,
                                      reference(), name) if spec.values else None
        baseline = diagnosis.trivial(exercise, _cpu(inputs64), ctx.out, ctx.close)
        if baseline:
            found = diagnose(exercise, inputs64_dev, ctx.out, tol=tol, analyse=False)
            raise CheckError(diagnosis.trivial_message(exercise, baseline) + _named(found), finding="trivial")
        ignored = _no_attention(exercise, ctx)
        if isinstance(ignored, tuple):  # (message, finding): not a missing attention, a named mistake
            raise CheckError(ignored[0], finding=ignored[1])
        if ignored:
            found = diagnose(exercise, inputs64_dev, ctx.out, tol=tol, analyse=False)
            raise CheckError(diagnosis.no_attention_message(exercise, ignored) + _named(found),
                             finding=_finding_key(found) or "trivial")
        for inv in spec.invariants:
            try:
                problem = inv.fn(ctx)
            except stored.NotShipped:  # the student bundle cannot judge this one: say nothing
                problem = None
            except CheckError as err:  # a run on changed inputs went wrong (NaN, a shape)
                found = explain(ctx.out) if err.finding is None else None  # what the check's own output shows
                if found is None and err.finding is None and "NaN/inf" in str(err) and _close(ctx.out, reference(), tol):
                    found = diagnosis.overflow_finding(exercise)
                if found is None:
                    raise
                raise CheckError(f"{err}{_named(found)}", finding=_finding_key(found)) from None
            if isinstance(problem, tuple):  # (message, finding): the invariant names the mistake itself
                raise CheckError(problem[0], finding=problem[1])
            if problem:
                found = explain(ctx.out)
                raise CheckError(problem + _named(found), finding=_finding_key(found), case=case())
        if spec.values:
            # the test of torch.testing.assert_close (out is finite here); its first call
            # imports torch.distributed, about 1 s of CPU in a notebook's first values check
            if not _close(ctx.out, reference(), tol):
                found = explain(ctx.out)
                raise CheckError(f"values differ from the reference: "
                                 f"{largest_difference(ctx.out, reference())}{_named(found)}",
                                 finding=_finding_key(found), case=case()) from None
    except _Mutated as mutated:
        right = None
        if first and isinstance(mutated.out, torch.Tensor) and tuple(mutated.out.shape) == tuple(shape_info[0]):
            right = _close(_to_cpu64(mutated.out), reference(), tol)
        raise CheckError(f"{label}\n  {diagnosis.mutation_message(name, mutated.changed, facts(), right)}",
                         finding="input_mutation") from None
    except _StudentError as wrapped:
        # a call that ran out of time or sent no readable answer says nothing about sizes
        plain = isinstance(wrapped.err, RemoteError) and wrapped.err.type_name in GRADING_ERRORS
        found = None if plain else explain(error=wrapped.err)
        raise CheckError(f"{label}\n  {_describe_exception(wrapped.err)}{_named(found)}",
                         finding=_finding_key(found)) from None
    except _ParameterError as err:
        found = diagnosis.parameter_finding(err.fields.get("expected") or {},
                                            err.fields.get("yours") or {}, facts(), used)
        if found is not None and found.key == "bias":  # the message asks about it already
            raise CheckError(f"{label}\n  {err}", finding=found.key) from None
        text = "\n".join(str(err).splitlines()[:3])
        raise CheckError(f"{label}\n  {text}{_named(found)}", finding=_finding_key(found)) from None
    except CheckError as err:
        if not quiet and err.case is not None and _in_kernel():
            _show_png(err.picture)
        raise CheckError(f"{label}\n  {err}", finding=err.finding, case=err.case,
                         finding_name=err.finding_name) from None
    note = diagnosis.globals_note(facts(instance=False)) if not graded else None
    notes += (note,) if note else ()
    note = diagnosis.passing_note(exercise, inputs, facts)
    notes += (note,) if note else ()
    if not quiet:
        print(f"\u2713 {label}" + "".join(f"\n  {note}" for note in notes))
    return CheckResult(label, notes)


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
    return (f"{label}\n  uses {used}, which does the whole exercise: a graded run gives this "
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
