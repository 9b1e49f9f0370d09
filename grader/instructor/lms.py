"""Collect an LMS download (a zip of notebooks) into submitted/<student>/<assignment>/.

    python -m grader.instructor collect --zip submissions.zip --assignment 05_scaled_attention [--times times.csv]

File names it understands (the part after the prefix is the student's own file name):

    Canvas      lovelaceada_12345_678901_05_scaled_attention.ipynb        user 12345, file 678901
                lovelaceada_LATE_12345_678901_05_scaled_attention-2.ipynb  late, resubmitted twice
                LATE_12345_678901_05_scaled_attention.ipynb                anonymous grading
    Moodle      Ada Lovelace_123456_assignsubmission_file/05_scaled_attention.ipynb   (folders)
                Ada Lovelace_123456_assignsubmission_file_05_scaled_attention.ipynb   (flat)
    Blackboard  Homework 5_alovelace_attempt_2025-10-03-17-45-12_05_scaled_attention.ipynb
    plain       ada_05_scaled_attention.ipynb, grace_hopper_05_scaled_attention.ipynb

Student ids: when the gradebook has students (``make roster``), each file is matched to one
by its LMS id (the roster's ``lms_user_id``, or the id itself), then by name; otherwise
the LMS's own id is used (Canvas user id, Blackboard username, the plain prefix, a Moodle
name). Resubmissions: the highest ``-N`` suffix, then the latest time, then the latest
Canvas file id wins. Every file that is not collected is listed with its reason.

Entry names are decoded as UTF-8 when the zip flags them so, and also when it does not but
they are valid UTF-8 (Linux ``zip`` writes them that way; Python's zipfile would read them as
cp437), or from the Info-ZIP Unicode path field; then put in Unicode's composed form.

Submission times (for late penalties) come from the file name (Blackboard), from a times
file the LMS exports beside the zip (grader.instructor.submission_times: Moodle's grading worksheet, a
CSV of student and time), or from the zip entry times when ``c.LmsCollect.zip_times = True``
(Canvas and Moodle stamp every entry with the time of the download, so it is off by
default). Without a time, lateness is unknown: the submission is dated at the due date
in ``timestamp.txt`` (nbgrader then judges it on time; its formgrader and release_feedback
need a time), ``collected.json``, the exports and the report say "lateness unknown", and
the summary tells the instructor how to give the times (``c.LmsCollect.unknown_time =
"on_time"`` counts such work as on time instead, without the notice). Each submission
folder gets nbgrader's ``timestamp.txt`` and
``submission_secret.txt``, so autograde, generate_feedback and release_feedback treat it
like a submission from the exchange.
"""
import datetime
import json
import os
import re
import secrets
import shutil
import struct
import unicodedata
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from traitlets import Bool, Enum, Unicode
from traitlets.config import Configurable

from grader.instructor import submission_times
from grader.grading import layout
from grader.instructor.submission_times import name_key

NOTEBOOK = ".ipynb"
MAX_BYTES = 100 * 2**20  # a notebook with plots is a few MiB; anything this large is not a submission
# Canvas (ContentZipper): sanitized sortable name (lower case, word characters only), an
# optional LATE, the user id, then "<attachment id>_<display name>".
CANVAS = re.compile(r"^(?:(?P<name>\w*?)_)??(?:(?P<late>late)_)?(?P<uid>\d+)_(?P<fid>\d+)_(?P<file>.+)$",
                    re.IGNORECASE)
# Moodle (assign download): "<full name>_<participant id>_assignsubmission_file" then "_<file>"
# (flat) or "/<file>" (folders; older versions end the folder name with "_").
# The LMS writes the start of each name, the student the rest (their file's own name, and in
# Moodle its folders): each pattern takes the first match from the start, so a student's
# file named like a classmate's entry stays the student's.
MOODLE = re.compile(r"^(?:[^/]*?/)??(?P<name>[^/]*?)_(?P<uid>\d+)_assignsubmission_file(?:_?/(?:.*/)?|_)(?P<file>[^/]+)$")
MOODLE_OTHER = re.compile(r"^(?:[^/]*?/)??(?P<name>[^/]*?)_(?P<uid>\d+)_(?:assignsubmission|assignfeedback)_(?P<kind>[a-z]+)")
# Blackboard (Grade Center "Assignment File Download"): "<assignment>_<username>_attempt_<time>"
# then "_<file>"; the same stem with ".txt" is Blackboard's receipt.
BLACKBOARD = re.compile(r"^(?P<assignment>.*?)_(?P<uid>[^_/]+)_attempt_"
                        r"(?P<time>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)(?:_(?P<file>.+)|\.txt)$")
# What LMSs and browsers append to a file handed in again: "-1", " (1)".
RESUBMITTED = re.compile(r"^(?P<stem>.*?)(?:-(?P<n>\d+)| \((?P<p>\d+)\))$")
UTF8_FLAG = 0x800           # general purpose bit 11: the name is UTF-8
UNICODE_PATH_FIELD = 0x7075  # Info-ZIP's extra field with the UTF-8 name
UNKNOWN = "lateness unknown"
SYSTEM = re.compile(r"(^|/)(__MACOSX/|\.DS_Store$|Thumbs\.db$|desktop\.ini$|\._)")


class LmsCollect(Configurable):
    """Settings for collecting LMS downloads (nbgrader_config.py: c.LmsCollect.<name>)."""

    timezone = Unicode(
        "UTC", help="Time zone of the times the LMS writes (Blackboard file names, zip entries), "
                    "e.g. 'Europe/Berlin'.").tag(config=True)
    zip_times = Bool(
        False, help="Date each file by its zip entry time. Canvas and Moodle stamp entries with "
                    "the time of the download, so leave this off for their zips.").tag(config=True)
    unknown_time = Enum(
        ("unknown", "on_time"), default_value="unknown",
        help="A submission whose time neither the file name nor a times file (TIMES=...) gives: "
             "'unknown' (no penalty; the summary, the exports and the report list it as lateness "
             "unknown), or 'on_time' (dated at the due date, no notice).").tag(config=True)


@dataclass
class Found:
    """One notebook in the download, with what its name says."""
    path: str
    lms: str
    lms_id: str
    name: str
    notebook: str
    version: int = 0
    file_id: int = 0
    late: bool = None
    time: datetime.datetime = None
    time_source: str = ""
    time_status: str = "known"   # or a stand-in's reason: "unknown", "on_time", "no_due_date" (_without_time)
    student: str = ""
    matched_by: str = ""
    renamed_from: str = ""  # the name the student handed it in under, where collect gave it the notebook's


@dataclass
class Result:
    assignment: str
    collected: dict = field(default_factory=dict)   # student -> [Found]
    skipped: list = field(default_factory=list)     # (path, reason)
    warnings: list = field(default_factory=list)

    @property
    def unknown(self):
        """Collected files whose submission time nothing gave."""
        return [f for fs in self.collected.values() for f in fs if f.time_status == "unknown"]

    @property
    def n_collected(self):
        return sum(len(v) for v in self.collected.values())

    def summary(self):
        lines = [f"{self.assignment}: collected {self.n_collected} file(s) for "
                 f"{len(self.collected)} student(s), skipped {len(self.skipped)} file(s)"]
        for student, found in sorted(self.collected.items()):
            for f in found:
                when = (f"submitted {f.time:%Y-%m-%d %H:%M} UTC ({f.time_source})" if f.time_status == "known"
                        else f"time unknown ({f.time_source})")
                late = " LATE" if f.late else ""
                renamed = (f"  [handed in as {f.renamed_from!r}, the assignment's only notebook: collected "
                           "under its name]") if f.renamed_from else ""
                lines.append(f"  collected {student} / {f.notebook}{late}, {when}  <- {f.path}"
                             + (f"  [{f.matched_by}]" if f.matched_by else "") + renamed)
        for path, reason in self.skipped:
            lines.append(f"  SKIPPED {path}: {reason}")
        lines += [f"  WARNING {w}" for w in self.warnings]
        return "\n".join(lines)


def _split_version(filename):
    """'05_x-2.ipynb' -> ('05_x.ipynb', 2); 'a (1).ipynb' -> ('a.ipynb', 1)."""
    stem, ext = os.path.splitext(filename)
    m = RESUBMITTED.match(stem)
    if m and m.group("stem"):
        return m.group("stem") + ext, int(m.group("n") or m.group("p"))
    return filename, 0


def _notebook_name(filename, notebooks):
    """The assignment's notebook this file is (ignoring case and a resubmission suffix)."""
    base, version = _split_version(filename)
    for candidate in (filename, base):
        for nb in notebooks:
            if candidate.lower() == nb.lower():
                return nb, (version if candidate == base and base != filename else 0)
    return base, version


def shapes(path):
    """The LMSs whose naming an entry's name fits (a student's own part of the name can make
    it fit a second one: a Canvas file named like a Moodle entry)."""
    base = PurePosixPath(path).name
    found = set()
    if MOODLE.match(path) or MOODLE_OTHER.match(path):
        found.add("moodle")
    if BLACKBOARD.match(base):
        found.add("blackboard")
    if CANVAS.match(base):
        found.add("canvas")
    return found


def zip_lms(names):
    """The LMS that wrote most of a download's entries: the naming most of them fit and no
    other (each entry's LMS part is the LMS's: one student's file cannot outvote the class);
    None where none does."""
    import collections

    votes = collections.Counter(next(iter(fits)) for fits in map(shapes, names) if len(fits) == 1)
    order = ("moodle", "blackboard", "canvas")  # on a tie, parse's own order
    return max(votes, key=lambda lms: (votes[lms], -order.index(lms))) if votes else None


def entry_lms(path, download_lms):
    """The LMS whose naming an entry is read by: None (any, in parse's order) where it fits
    one naming or none; where it fits several (a student named their file like another
    LMS's entry), the download's own LMS (zip_lms)."""
    fits = shapes(path)
    if len(fits) < 2:
        return None
    return download_lms if download_lms in fits else next(l for l in ("moodle", "blackboard", "canvas") if l in fits)


def parse(path, notebooks, tz="UTC", lms=None):
    """What an entry's name says: a Found, or (None, reason) when it is not a submission.
    lms: read the name by this LMS's naming only (entry_lms); None: any, in this order."""
    if SYSTEM.search(path):
        return None, "a file the operating system adds to archives"
    ext = PurePosixPath(path).suffix.lower()
    base = PurePosixPath(path).name
    m = MOODLE.match(path) if lms in (None, "moodle") else None
    if m:
        return _found(path, "moodle", m["uid"], m["name"], m["file"], notebooks)
    m = MOODLE_OTHER.match(path) if lms in (None, "moodle") else None
    if m:
        return None, f"Moodle {m['kind']} entry, not a file submission"
    m = BLACKBOARD.match(base) if lms in (None, "blackboard") else None
    if m:
        if not m["file"]:
            return None, "Blackboard's submission receipt"
        found = _found(path, "blackboard", m["uid"], "", m["file"], notebooks)
        if found[0]:
            stamp = datetime.datetime.strptime(m["time"], "%Y-%m-%d-%H-%M-%S")
            found[0].time = _to_utc(stamp, tz)
            found[0].time_source = "Blackboard file name"
        return found
    if ext != NOTEBOOK:
        return None, f"not a notebook ({ext or 'no extension'})"
    canvas = CANVAS.match(base) if lms in (None, "canvas") else None
    if canvas and _notebook_name(canvas["file"], notebooks)[0] in notebooks:
        return _canvas(path, canvas, notebooks)
    for nb in sorted(notebooks, key=len, reverse=True) if lms is None else ():
        stem = nb[: -len(NOTEBOOK)]
        m = re.match(rf"^(?P<sid>[^\W_][\w.@-]*?)_(?P<file>{re.escape(stem)}(?:-\d+| \(\d+\))?\.ipynb)$",
                     base, re.IGNORECASE)
        if m:
            return _found(path, "plain", m["sid"], "", m["file"], notebooks)
    if canvas:  # a Canvas name around a notebook the student renamed: collected (plan renames it)
        return _canvas(path, canvas, notebooks)
    return None, ("name matches no LMS naming (Canvas, Moodle, Blackboard, or "
                  f"<student>_<notebook>.ipynb with a notebook of this assignment: {', '.join(notebooks)})")


def _canvas(path, m, notebooks):
    found, reason = _found(path, "canvas", m["uid"], m["name"] or "", m["file"], notebooks)
    if found:
        found.file_id, found.late = int(m["fid"]), bool(m["late"])
    return found, reason


def _found(path, lms, lms_id, name, filename, notebooks):
    if PurePosixPath(filename).suffix.lower() != NOTEBOOK:
        return None, f"not a notebook ({PurePosixPath(filename).suffix or 'no extension'})"
    notebook, version = _notebook_name(filename, notebooks)
    return Found(path=path, lms=lms, lms_id=lms_id, name=name.strip(), notebook=notebook,
                 version=version), None


def _to_utc(naive, tz):
    from zoneinfo import ZoneInfo

    return naive.replace(tzinfo=ZoneInfo(tz)).astimezone(datetime.timezone.utc).replace(tzinfo=None)


class Roster:
    """The gradebook's students, to map LMS ids and names to course ids."""

    def __init__(self, students):
        self.students = list(students)   # dicts: id, first_name, last_name, lms_user_id
        self.by_lms = {str(s["lms_user_id"]): s["id"] for s in self.students if s.get("lms_user_id")}
        self.ids = {s["id"] for s in self.students}
        self.names = {}
        for s in self.students:
            first, last = s.get("first_name") or "", s.get("last_name") or ""
            if first or last:
                for key in {name_key(last + first), name_key(first + last)}:
                    self.names.setdefault(key, set()).add(s["id"])

    def match(self, found):
        """(student id, how), or (None, why not)."""
        if found.lms_id in self.by_lms:
            return self.by_lms[found.lms_id], f"roster lms_user_id {found.lms_id}"
        if found.lms_id in self.ids:
            return found.lms_id, ""
        if found.name:
            hits = self.names.get(name_key(found.name), set())
            if len(hits) == 1:
                return next(iter(hits)), f"roster name {found.name!r}"
            if len(hits) > 1:
                return None, f"the name {found.name!r} fits several students on the roster ({', '.join(sorted(hits))})"
        return None, None


def _fallback_id(found):
    """The student id to use when no roster says otherwise."""
    if found.lms == "moodle":  # Moodle's participant number changes from one assignment to the next
        folded = "".join(ch for ch in unicodedata.normalize("NFKD", found.name) if not unicodedata.combining(ch))
        slug = re.sub(r"[^\w.-]+|_+", "_", folded.strip()).strip("_").casefold()
        if not slug or slug == "participant":  # blind marking hides the name
            return f"participant_{found.lms_id}"
        return slug
    return found.lms_id


def safe_student_id(student):
    """Why this id cannot name a folder under submitted/, or None."""
    if not student or student in (".", "..") or "/" in student or "\\" in student or student.startswith("."):
        return f"student id {student!r} cannot be a folder name"
    if any(ord(ch) < 32 for ch in student):
        return f"student id {student!r} contains control characters"
    return None


def load_roster(root, config):
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        return Roster([{"id": s.id, "first_name": s.first_name, "last_name": s.last_name,
                        "lms_user_id": s.lms_user_id} for s in gb.students])


def due_date(root, config, assignment):
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        try:
            return gb.find_assignment(assignment).duedate
        except MissingEntry:
            return None


def _stamp(dt):
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def plan(names, notebooks, roster, settings, due=None, entry_times=None, times=None):
    """Decide, for the entry names of one download, who gets which file and when it was
    handed in (pure: no files). ``times``: a submission_times.Times, or None."""
    result = Result(assignment="")
    candidates, owners = {}, {}
    download_lms = zip_lms(names)
    for path in names:
        found, reason = parse(path, notebooks, settings.timezone, entry_lms(path, download_lms))
        if not found:
            result.skipped.append((path, reason))
            continue
        if found.time is None and settings.zip_times and entry_times and path in entry_times:
            found.time, found.time_source = _to_utc(entry_times[path], settings.timezone), "zip entry time"
        student, how = roster.match(found) if roster.students else (None, None)
        if student is None and how:
            result.skipped.append((path, how))
            continue
        if student is None:
            student = _fallback_id(found)
            if roster.students:
                how = f"not on the roster: collected under the {found.lms} id {student!r}"
                result.warnings.append(f"{path}: {how}; add this student to the roster (make roster)")
        problem = safe_student_id(student)
        if problem:
            result.skipped.append((path, problem))
            continue
        if not how:  # an id taken from the LMS: two different LMS users must not share it
            owner = owners.setdefault(student, (found.lms, found.lms_id))
            if owner != (found.lms, found.lms_id):
                result.skipped.append((path, f"{found.lms} user {found.lms_id} would get the student id "
                                             f"{student!r} of {owner[0]} user {owner[1]}: import a roster "
                                             "(make roster) to tell them apart"))
                continue
        found.student, found.matched_by = student, how or ""
        if found.time is None:
            found.time, source = submission_times.lookup(times, found)
            found.time_source = source or ""
        candidates.setdefault((student, found.notebook), []).append(found)
    oldest = datetime.datetime.min
    for (student, notebook), group in sorted(candidates.items()):
        group.sort(key=lambda f: (f.version, f.time or oldest, f.file_id, f.path))
        winner = group[-1]
        for loser in group[:-1]:
            result.skipped.append((loser.path, f"an earlier version of {student}'s {notebook} "
                                                f"(kept {winner.path})"))
        if winner.time is None:
            _without_time(winner, settings, due, (entry_times or {}).get(winner.path))
        result.collected.setdefault(student, []).append(winner)
    if len(notebooks) == 1:
        for found in result.collected.values():
            _as_the_notebook(found, notebooks[0])
    if result.unknown:
        result.warnings.append(
            f"{len(result.unknown)} submission(s) without a submission time: their lateness is unknown and "
            "costs nothing. Give the LMS's times beside the zip (make collect ZIP=... TIMES=times.csv: "
            "Moodle's grading worksheet, or a CSV of student and submitted_at), or grant an extension "
            "(make extensions CSV=...).")
    if times is not None:
        result.warnings += [f"{times.source}, row {r.row}: {r.key!r} matches no collected file"
                            for r in times.unused()]
    return result


def _as_the_notebook(found, notebook):
    """An assignment of one notebook, handed in as one notebook under another name (a student's
    "final (2).ipynb"): collected as the assignment's notebook, its own name kept in
    renamed_from and said in the summary. Grading then reads it like any other: its cells'
    metadata, not its file name, say what it is. Two names, or one of them the notebook's own,
    stay as they are (make autograde says which it found)."""
    if len(found) == 1 and found[0].notebook != notebook:
        found[0].renamed_from, found[0].notebook = found[0].notebook, notebook


def _without_time(found, settings, due, entry_time=None):
    """Date a file the LMS gives no time for. nbgrader needs a time (its formgrader and
    release_feedback fail on an empty timestamp.txt), so it gets the due date, which nbgrader
    counts as on time, and the time is marked unknown ('unknown': listed as lateness unknown;
    'on_time': counted as on time). Without a due date nothing is late: the zip entry's
    time (the download) or the time of collecting stands in."""
    marked = " (the LMS marks it LATE)" if found.late else ""
    if due is None:
        found.time_status = "no_due_date"
        found.time = _to_utc(entry_time, settings.timezone) if entry_time else datetime.datetime.utcnow()
        found.time_source = (f"the LMS gives no time{marked} and the assignment has no due date: "
                             "dated by the download")
    elif settings.unknown_time == "on_time":
        found.time, found.time_status = due, "on_time"
        found.time_source = f"the LMS gives no time{marked}: counted as on time (c.LmsCollect.unknown_time)"
    else:
        found.time, found.time_status = due, "unknown"
        found.time_source = f"{UNKNOWN}: the LMS gives no time{marked}; dated at the due date, no penalty"


def member_name(info):
    """An entry's name as its author wrote it: UTF-8 when flagged, when valid UTF-8 though
    not flagged, or from Info-ZIP's Unicode path field; Unicode's composed form (NFC)."""
    name = info.filename
    if not info.flag_bits & UTF8_FLAG:
        raw = info.orig_filename.encode("cp437")  # what zipfile decoded as cp437, byte for byte
        name = _unicode_path_field(info, raw) or _utf8(raw) or info.filename
    return unicodedata.normalize("NFC", name)


def _utf8(raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _unicode_path_field(info, raw):
    """The UTF-8 name in the 0x7075 extra field, when it belongs to this raw name."""
    extra = info.extra
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        body, extra = extra[4:4 + size], extra[4 + size:]
        if kind == UNICODE_PATH_FIELD and len(body) > 5 and body[0] == 1:
            if struct.unpack("<L", body[1:5])[0] == zlib.crc32(raw):
                return _utf8(body[5:])
    return None


def members(archive):
    """{decoded name: ZipInfo} of the files in a zip, and the (name, reason) of entries
    whose decoded name another entry already has."""
    out, clashes = {}, []
    for info in archive.infolist():
        if info.is_dir():
            continue
        name = member_name(info)
        if name in out:
            clashes.append((name, "a second entry with the same name in the zip (the first was used)"))
            continue
        out[name] = info
    return out, clashes


def collect(root, zip_path, assignment, config=None, times_path=None):
    """Collect one LMS download into submitted/, dated from the times file when given;
    returns the Result (also printed)."""
    root = Path(root)
    zip_path = Path(zip_path)
    config = config or layout.load_config(root)
    if assignment not in layout.assignments(root):
        raise SystemExit(f"unknown assignment {assignment!r}: use one of {', '.join(layout.assignments(root))}")
    if not zip_path.is_file():
        raise SystemExit(f"no such file: {zip_path}")
    if not zipfile.is_zipfile(zip_path):
        raise SystemExit(f"{zip_path} is not a zip archive (download the submissions as a zip from the LMS)")
    settings = LmsCollect(config=config)
    try:
        from zoneinfo import ZoneInfo
        ZoneInfo(settings.timezone)
    except Exception:
        raise SystemExit(f"c.LmsCollect.timezone = {settings.timezone!r} is not a time zone (e.g. 'UTC', 'Europe/Berlin')")
    times = submission_times.read(times_path, settings.timezone) if times_path else None
    notebooks = [f"{n}{NOTEBOOK}" for n in layout.expected_notebooks(root, assignment)]
    due = due_date(root, config, assignment)
    roster = load_roster(root, config)

    downloaded = root / "downloaded" / assignment
    (downloaded / "archive").mkdir(parents=True, exist_ok=True)
    kept = downloaded / "archive" / zip_path.name
    if zip_path.resolve() != kept.resolve():
        shutil.copy2(zip_path, kept)
    if times_path and Path(times_path).resolve() != (downloaded / "archive" / Path(times_path).name).resolve():
        shutil.copy2(times_path, downloaded / "archive" / Path(times_path).name)

    with zipfile.ZipFile(zip_path) as archive:
        entries, clashes = members(archive)
        too_big = [name for name, i in entries.items() if i.file_size > MAX_BYTES]
        names = [name for name, i in entries.items() if i.file_size <= MAX_BYTES]
        stamps = {name: datetime.datetime(*i.date_time) for name, i in entries.items()}
        result = plan(names, notebooks, roster, settings, due, stamps, times)
        result.assignment = assignment
        result.skipped += [(name, f"larger than {MAX_BYTES // 2**20} MiB unpacked") for name in too_big]
        result.skipped += clashes
        if any(f.time_status == "no_due_date" for fs in result.collected.values() for f in fs):
            result.warnings.append(
                f"{assignment} has no due date in the gradebook, so lateness cannot be judged for files "
                f"without a time. Set it (nbgrader db assignment add {assignment} --duedate=\"YYYY-MM-DD HH:MM:SS UTC\") "
                "and collect again.")
        for student, found in sorted(result.collected.items()):
            _write_submission(root, student, assignment, archive, entries, found)
    record = downloaded / "collected.json"
    history = json.loads(record.read_text()) if record.exists() else {}
    for student, found in result.collected.items():
        history[student] = [{**asdict(f), "time": f.time.isoformat() if f.time else None,
                             "zip": zip_path.name} for f in found]
    record.write_text(json.dumps(history, indent=1, sort_keys=True))
    print(result.summary())
    return result


def _write_submission(root, student, assignment, archive, entries, found):
    """Replace submitted/<student>/<assignment>/ with these files, nbgrader-style."""
    final = root / "submitted" / student / assignment
    tmp = final.with_name(f".{assignment}.incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in found:
        (tmp / f.notebook).write_bytes(archive.read(entries[f.path]))
    times = [f.time for f in found if f.time]
    (tmp / "timestamp.txt").write_text(_stamp(max(times)) if times else "")
    old_secret = final / "submission_secret.txt"
    (tmp / "submission_secret.txt").write_text(
        old_secret.read_text() if old_secret.exists() else secrets.token_hex(32))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def guess_assignment(root, zip_path):
    """The one assignment whose notebooks the download holds, or SystemExit saying why not."""
    if not zipfile.is_zipfile(zip_path):
        raise SystemExit(f"{zip_path} is not a zip archive (download the submissions as a zip from the LMS)")
    with zipfile.ZipFile(zip_path) as archive:
        names = list(members(archive)[0])
    hits = {}
    for assignment in layout.assignments(root):
        notebooks = [f"{n}{NOTEBOOK}" for n in layout.expected_notebooks(root, assignment)]
        found = [parse(name, notebooks)[0] for name in names]
        hits[assignment] = sum(1 for f in found if f and f.notebook in notebooks)
    best = sorted((n, a) for a, n in hits.items() if n)
    if len(best) == 1:
        return best[0][1]
    if not best:
        raise SystemExit(f"{zip_path} holds no notebook of any assignment: name it with ASSIGNMENT=...")
    raise SystemExit(f"{zip_path} holds notebooks of several assignments "
                     f"({', '.join(f'{a}: {n}' for n, a in best)}): collect one with ASSIGNMENT=...")


def collected_info(root, assignment):
    """What collected.json says about each student's files for this assignment."""
    record = Path(root) / "downloaded" / assignment / "collected.json"
    return json.loads(record.read_text()) if record.exists() else {}


def rename_in_records(root, old, new):
    """Every download's record (collected.json) files `old`'s entries under `new` (where
    `new` has none of its own), as collect would have written them had the roster named the
    student then (grader.instructor.roster.merge_stand_ins)."""
    for record in sorted((Path(root) / "downloaded").glob("*/collected.json")):
        history = json.loads(record.read_text())
        if old in history:
            history.setdefault(new, history.pop(old))
            record.write_text(json.dumps(history, indent=1, sort_keys=True))
