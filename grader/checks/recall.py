"""Each mistake named once: what the earlier checks of one notebook said of each exercise.

The first failing check of an exercise gives the diagnosis (its whole message); a later check
of the same exercise that fails for the same mistake (the same finding, or, for a failure that
names none, the same words) says in one line that it is that mistake, and which check named it.
Running the check that named it again shows the whole message again.

Where the memory lives: in a student's kernel (JupyterLab), one Recall for the kernel, keyed by
the student's function or class itself, so that running the solution cell again (a new object)
starts afresh; in a graded run, where the checks run in the grading process, one Recall per
graded notebook (grader/grading/execute.py), keyed by the name the checks ask the kernel for.
"""
import weakref
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Said:
    """What one failing check said first: where, and the mistake or problem it named."""
    check: tuple  # (focus, hidden): the check that said it
    description: str  # the check's description, as its label shows it
    mistake: str  # the mistake's name, or the first line of a message that names none


class Recall:
    """The first diagnosis of each mistake, per exercise and per version of the student's code."""

    def __init__(self):
        self._seen = {}  # (exercise key, who) -> {what: Said}
        self._alive = {}  # id(student) -> a weak reference that says whether it is still that object

    def _who(self, student):
        """The student's code as this memory knows it: its name where it runs elsewhere (one
        graded notebook), else the object itself (by identity, while it lives)."""
        from grader.checks.calling import RemoteStudent

        if isinstance(student, RemoteStudent):
            return ("remote", student.__name__)
        key = id(student)
        try:
            ref = self._alive.get(key)
            if ref is None or ref() is not student:  # a new object (or one reusing a freed id)
                self._alive[key] = weakref.ref(student)
                self._seen = {k: v for k, v in self._seen.items() if k[1] != ("local", key)}
        except TypeError:  # an object without weak references: remembered by identity alone
            pass
        return ("local", key)

    def named(self, case):
        """The keys of the mistakes earlier checks of this exercise named for this version of
        the student's code, first said first."""
        seen = self._seen.get((case.exercise.key, self._who(case.student)), {})
        return tuple(what[1] for what in seen if what[0] == "finding")

    def said(self, case, failure):
        """The failure as this check shows it: whole where it is the first to say it (or the
        same check again), else one line that points to the check that said it."""
        body = failure.message
        finding = failure.finding
        key = getattr(finding, "key", finding)
        what = ("finding", key) if key else ("words", body)
        name = getattr(finding, "name", None) or failure.finding_name or body.splitlines()[0]
        check = (case.focus_name, case.hidden)
        who = self._who(case.student)  # first: a new version of the code clears what the old one was told
        seen = self._seen.setdefault((case.exercise.key, who), {})
        first = seen.get(what)
        if first is None:
            seen[what] = Said(check, case.focus.description, _short(name))
            return failure
        if first.check == check:
            return failure
        kind = "mistake" if key else "problem"
        return replace(failure, message=f"the same {kind} as in the check \"{first.description}\" above: "
                                        f"{first.mistake}.")  # its picture, if any, is kept


def _short(text, n=160):
    text = text.strip().rstrip(".")
    return text if len(text) <= n else text[:n - 1].rstrip() + "\u2026"
