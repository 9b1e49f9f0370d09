"""What a check tells the learner: a CheckError when it fails (its message, the mistake it
names, the picture of its smallest failing case), a CheckResult when it passes."""
from dataclasses import dataclass

from grader.checks import diagnosis


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


def named(mistake):
    """The line that names a mistake (a Mistake or Finding), or "" for none."""
    return f"\n  Likely mistake: {mistake.name} \u2014 {mistake.hint}" if mistake else ""
