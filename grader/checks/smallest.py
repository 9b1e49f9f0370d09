"""The smallest failing case of a values check, for its picture: the check's inputs cut to
the fewest time steps that still fail, and the batch element that differs most; shown
inline where the check runs in a notebook's kernel."""
import sys
import threading

from grader.checks import diagnosis, stored
from grader.checks.calling import Mutated, StudentError, call_student
from grader.checks.compare import close, to_cpu64
from grader.checks.devices import to_device
from grader.checks.feedback import CheckError
from grader.checks.output import check_tensor


def picture_case(*args):
    """smallest_case, or None where the diagnosis cannot cut or slice this exercise's inputs
    (one added without its sizes and crops): the check's message then comes alone."""
    try:
        return smallest_case(*args)
    except Exception:  # the picture is optional; its absence is never an error
        return None


def smallest_case(exercise, key, student, inputs64, dev, dtype, tol, actual, expected, name):
    """The smallest failing case, for the picture: the check's inputs cut to the fewest
    time steps that still fail, and the batch element that differs most."""
    case, shown_T = (expected, actual), diagnosis.time_steps(exercise, inputs64)
    for L in sorted({2, 3, 4, shown_T // 2} - {shown_T}):  # a few runs at most, smallest first
        if L >= shown_T:
            break
        small64 = diagnosis.crop(exercise, inputs64, L)
        small = to_device(small64, dev, dtype)
        try:
            out = to_cpu64(check_tensor(exercise, call_student(exercise, student, small), small,
                                        exercise.shape(small)))
        except (StudentError, Mutated, CheckError):
            continue
        try:
            want = to_cpu64(exercise.reference(*small64.values()))
        except stored.NotShipped:  # the student bundle has no reference for this crop
            continue
        if not close(out, want, tol):
            case, shown_T = (want, out), L
            break
    want2d, got2d, where = diagnosis.slice_2d(key, *case)
    title = f"smallest failing case ({where}T = {shown_T})" if shown_T else \
        "the prompt and the sampled ids, every sequence"  # ids are not cut shorter
    return {"title": f"{name}: {title}",
            "kind": diagnosis.picture_kind(exercise), "expected": want2d, "actual": got2d}


def in_kernel():
    """True inside a Jupyter kernel's main thread (where a picture can be shown)."""
    ipython = sys.modules.get("IPython")
    if ipython is None or threading.current_thread() is not threading.main_thread():
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_png(png):
    if png:
        from IPython.display import Image, display

        display(Image(data=png, format="png"))
