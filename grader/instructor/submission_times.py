"""Submission times that an LMS exports beside its zip, for the late policy.

    make collect ZIP=submissions.zip TIMES=times.csv

Canvas' and Moodle's zips give no submission times (every entry is stamped with the time of
the download), so the times come from a second file the instructor downloads:

- Moodle's grading worksheet (Assignment > View all submissions > Download grading
  worksheet): ``Identifier`` ("Participant 4242", the number in the zip's folder names),
  ``Full name`` and ``Last modified (submission)`` ("Friday, 3 October 2025, 5:45 PM", in the
  time zone of the Moodle user who downloaded it: ``c.LmsCollect.timezone``).
- any CSV of student and time, e.g. Canvas' submissions (``user_id``, ``submitted_at`` from
  its API or a report): a student column (``student``, ``student_id``, ``id``, ``user_id``,
  ``lms_user_id``, ``login``, ``username``, ``SIS Login ID``, ``ID``, ``name``, ``Student``)
  and a time column (``submitted_at``, ``submitted``, ``submission_time``, ``time``,
  ``timestamp``); ISO 8601 times, with an offset or in ``c.LmsCollect.timezone``.

A row matches a collected file by the LMS's id in the file name, then the course's student
id, then the student's name.
"""
import datetime
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from grader.instructor.csvfile import read_csv

MOODLE_TIME = "Last modified (submission)"
STUDENT_COLUMNS = ("student", "student_id", "id", "user_id", "lms_user_id", "login", "username",
                   "sis login id", "sis user id", "name", "full name")
TIME_COLUMNS = ("submitted_at", "submitted", "submission_time", "submission time", "time", "timestamp")
MOODLE_FORMATS = ("%A, %d %B %Y, %I:%M %p", "%A, %d %B %Y, %H:%M", "%d %B %Y, %I:%M %p", "%d %B %Y, %H:%M")
NO_TIME = {"", "-", "no submission", "never"}


def name_key(text):
    """A name or id reduced to what two spellings of it share: accents, case, spaces and
    punctuation removed ("Zoë Ångström" and "zoe_angstrom" give the same key)."""
    text = unicodedata.normalize("NFKD", str(text or ""))
    return "".join(ch for ch in text if ch.isalnum() and not unicodedata.combining(ch)).casefold()


@dataclass(frozen=True)
class SubmissionTime:
    """One row of a times file: who (as the file names them) and when (UTC, naive)."""
    key: str
    time: datetime.datetime
    row: int
    lms_id: str = ""
    name: str = ""


@dataclass
class Times:
    """The rows of one times file, found by LMS id, student id or name."""
    source: str
    rows: list = field(default_factory=list)     # [SubmissionTime]
    used: set = field(default_factory=set)        # rows matched to a collected file

    def find(self, lms_id, student, name):
        """The SubmissionTime for a file of this LMS id, student id and name, or None (also
        when two rows fit)."""
        tries = ((lambda r: r.lms_id, str(lms_id or "")),
                 (lambda r: name_key(r.key), name_key(student)),
                 (lambda r: name_key(r.name or r.key), name_key(name)))
        for side, value in tries:
            hits = [r for r in self.rows if value and side(r) == value]
            if len(hits) == 1:
                self.used.add(hits[0].row)
                return hits[0]
        return None

    def unused(self):
        return [r for r in self.rows if r.row not in self.used]


def _to_utc(naive, tz):
    from zoneinfo import ZoneInfo

    return naive.replace(tzinfo=ZoneInfo(tz)).astimezone(datetime.timezone.utc).replace(tzinfo=None)


def parse_time(text, tz="UTC"):
    """A time as an LMS writes it, in UTC (naive); None when the LMS says there is none.
    ValueError names what could not be read."""
    text = " ".join(str(text or "").split())
    if text.lower() in NO_TIME:
        return None
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        stamp = None
        for fmt in MOODLE_FORMATS:
            try:
                stamp = datetime.datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
        if stamp is None:
            raise ValueError(f"{text!r} is not a time (ISO 8601 such as 2025-10-03T17:45:00+02:00, "
                             "or Moodle's 'Friday, 3 October 2025, 5:45 PM')")
    if stamp.tzinfo is not None:
        return stamp.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return _to_utc(stamp, tz)


def _column(header, wanted):
    lowered = {h.strip().lower(): h for h in header}
    return next((lowered[w] for w in wanted if w in lowered), None)


def read(path, tz="UTC"):
    """The Times in a Moodle grading worksheet or a student/time CSV; SystemExit naming the
    rows or columns that cannot be used (nothing is collected then)."""
    path = Path(path)
    header, reader = read_csv(path, "submission times")
    moodle = "Identifier" in header and MOODLE_TIME in header
    student_col = "Identifier" if moodle else _column(header, STUDENT_COLUMNS)
    time_col = MOODLE_TIME if moodle else _column(header, TIME_COLUMNS)
    if not student_col or not time_col:
        raise SystemExit(f"{path}: not a file of submission times. Use Moodle's grading worksheet "
                         f"('Identifier', '{MOODLE_TIME}') or a CSV with a student column "
                         f"({', '.join(STUDENT_COLUMNS)}) and a time column ({', '.join(TIME_COLUMNS)}); "
                         f"found: {', '.join(header) or 'nothing'}")
    times, problems = Times(source=path.name), []
    for line, row in enumerate(reader, start=2):
        who = (row.get(student_col) or "").strip()
        try:
            when = parse_time(row.get(time_col), tz)
        except ValueError as err:
            problems.append(f"row {line}: {err}")
            continue
        if when is None or not who:
            continue
        if moodle:
            number = re.sub(r"\D", "", who)
            times.rows.append(SubmissionTime(key=who, time=when, row=line, lms_id=number,
                                             name=(row.get("Full name") or "").strip()))
        else:
            times.rows.append(SubmissionTime(key=who, time=when, row=line, lms_id=who,
                                             name=(row.get("name") or row.get("Student") or "").strip()))
    if problems:
        raise SystemExit(f"{path}: nothing collected; these rows cannot be read:\n  " + "\n  ".join(problems))
    return times


def lookup(times: Optional[Times], found):
    """(time, where it came from) for a collected file, or (None, None)."""
    if times is None:
        return None, None
    hit = times.find(found.lms_id, found.student, found.name)
    if hit is None:
        return None, None
    return hit.time, f"{times.source}, row {hit.row}"
