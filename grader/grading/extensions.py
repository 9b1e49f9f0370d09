"""Per-student extensions as grading reads them: a later due date for one student and one
assignment, kept in the course file ``extensions.json`` (beside ``gradebook.db``), since
nbgrader's gradebook has no field for one.

The late policy (grader.grading.late) measures every lateness from the extended due date:
the penalty that nbgrader's run gives (``make autograde``'s worker receives the student's
extension with the job, grader.grading.submission), ``make feedback``'s late notice, the
exports and the report. ``make extensions CSV=...`` (grader.instructor.extensions) writes
the store.

``duration`` is the one way the course writes an amount of time in words ("2 days 3
hours"): how late a submission is, or how much time an extension adds; ``parse_extra``
reads such words back.
"""
import datetime
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

STORE = "extensions.json"
UNITS = {"w": 7 * 86400, "week": 7 * 86400, "d": 86400, "day": 86400, "h": 3600, "hour": 3600,
         "hr": 3600, "m": 60, "min": 60, "minute": 60}
EXTRA = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+?)s?\b")


def duration(seconds):
    """An amount of time in words, to the minute: '2 days 3 hours', '1 day 1 hour 1 minute',
    '45 seconds' under a minute."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [(days, "day"), (hours, "hour"), (minutes, "minute")]
    text = " ".join(f"{n} {unit}{'s' * (n != 1)}" for n, unit in parts if n)
    return text or f"{seconds} second{'s' * (seconds != 1)}"


@dataclass(frozen=True)
class Extension:
    """A later due date for one student's assignment: a fixed date, or time added to the
    assignment's due date."""
    student: str
    assignment: str
    due: Optional[datetime.datetime] = None   # UTC, naive (as nbgrader stores due dates)
    extra_seconds: Optional[float] = None

    def new_due(self, duedate):
        """The student's due date, given the assignment's (None when neither is known)."""
        if self.due is not None:
            return self.due
        if duedate is None:
            return None
        return duedate + datetime.timedelta(seconds=self.extra_seconds or 0.0)

    def seconds_late(self, seconds_late, duedate):
        """Seconds late measured from the extended due date, given nbgrader's seconds late
        measured from the assignment's due date."""
        new = self.new_due(duedate)
        if new is None or duedate is None:
            return seconds_late
        return seconds_late - (new - duedate).total_seconds()

    def describe(self, duedate=None):
        new = self.new_due(duedate)
        when = f"{new:%Y-%m-%d %H:%M} UTC" if new else "the assignment's due date"
        added = f" (+{duration(self.extra_seconds)})" if self.extra_seconds else ""
        return f"extended to {when}{added}"


def parse_extra(text):
    """'2 days', '36h', '1 day 12 hours', '90 minutes' or a number of hours, in seconds."""
    text = str(text or "").strip().lower()
    try:
        return float(text) * 3600
    except ValueError:
        pass
    parts = EXTRA.findall(text)
    if not parts or EXTRA.sub("", text).strip(" ,+and") or any(unit not in UNITS for _, unit in parts):
        raise ValueError(f"{text!r} is not an amount of time (e.g. '2 days', '36 hours', '1 day 12 hours', "
                         "'90 minutes', or a number of hours)")
    return sum(float(n) * UNITS[unit] for n, unit in parts)


def load(root):
    """{(student, assignment): Extension} from the course's extensions.json."""
    path = Path(root) / STORE
    if not path.exists():
        return {}
    out = {}
    for item in json.loads(path.read_text(encoding="utf-8")).get("extensions", []):
        due = datetime.datetime.fromisoformat(item["due"]) if item.get("due") else None
        ext = Extension(item["student"], item["assignment"], due, item.get("extra_seconds"))
        out[(ext.student, ext.assignment)] = ext
    return out


def save(root, extensions):
    items = []
    for ext in sorted(extensions.values(), key=lambda e: (e.assignment, e.student)):
        item = asdict(ext)
        item["due"] = ext.due.isoformat() if ext.due else None
        items.append(item)
    (Path(root) / STORE).write_text(json.dumps({"extensions": items}, indent=1, ensure_ascii=False),
                                   encoding="utf-8")


def find(root, student, assignment):
    return load(root).get((student, assignment))
