"""Collect an LMS download (a zip of notebooks) into submitted/<student>/<assignment>/.

    python -m grader.instructor collect --zip submissions.zip --assignment 05_scaled_attention

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

Submission times (for late penalties) come from the file name (Blackboard), or from the zip
entry times when ``c.LmsCollect.zip_times = True`` (Canvas and Moodle stamp every entry
with the time of the download, so it is off by default). Otherwise the LMS only says
whether a file was late (Canvas ``LATE``): the submission is then dated at the due date
(on time) or one second after it (late), and ``collected.json`` records that the time is
a bound, not the real one. Each submission folder gets nbgrader's ``timestamp.txt`` and
``submission_secret.txt``, so autograde, generate_feedback and release_feedback treat it
like a submission from the exchange.
"""
import datetime
import json
import os
import re
import secrets
import shutil
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from traitlets import Bool, Unicode
from traitlets.config import Configurable

from grader.grading import layout as pipeline

NOTEBOOK = ".ipynb"
MAX_BYTES = 100 * 2**20  # a notebook with plots is a few MiB; anything this large is not a submission
# Canvas (ContentZipper): sanitized sortable name (lower case, word characters only), an
# optional LATE, the user id, then "<attachment id>_<display name>".
CANVAS = re.compile(r"^(?:(?P<name>\w*?)_)??(?:(?P<late>late)_)?(?P<uid>\d+)_(?P<fid>\d+)_(?P<file>.+)$",
                    re.IGNORECASE)
# Moodle (assign download): "<full name>_<participant id>_assignsubmission_file" then "_<file>"
# (flat) or "/<file>" (folders; older versions end the folder name with "_").
MOODLE = re.compile(r"^(?:.*/)?(?P<name>[^/]*?)_(?P<uid>\d+)_assignsubmission_file(?:_?/(?:.*/)?|_)(?P<file>[^/]+)$")
MOODLE_OTHER = re.compile(r"^(?:.*/)?(?P<name>[^/]*?)_(?P<uid>\d+)_(?:assignsubmission|assignfeedback)_(?P<kind>[a-z]+)")
# Blackboard (Grade Center "Assignment File Download"): "<assignment>_<username>_attempt_<time>"
# then "_<file>"; the same stem with ".txt" is Blackboard's receipt.
BLACKBOARD = re.compile(r"^(?P<assignment>.*)_(?P<uid>[^_/]+)_attempt_"
                        r"(?P<time>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)(?:_(?P<file>.+)|\.txt)$")
# What LMSs and browsers append to a file handed in again: "-1", " (1)".
RESUBMITTED = re.compile(r"^(?P<stem>.*?)(?:-(?P<n>\d+)| \((?P<p>\d+)\))$")
SYSTEM = re.compile(r"(^|/)(__MACOSX/|\.DS_Store$|Thumbs\.db$|desktop\.ini$|\._)")


class LmsCollect(Configurable):
    """Settings for collecting LMS downloads (nbgrader_config.py: c.LmsCollect.<name>)."""

    timezone = Unicode(
        "UTC", help="Time zone of the times the LMS writes (Blackboard file names, zip entries), "
                    "e.g. 'Europe/Berlin'.").tag(config=True)
    zip_times = Bool(
        False, help="Date each file by its zip entry time. Canvas and Moodle stamp entries with "
                    "the time of the download, so leave this off for their zips.").tag(config=True)


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
    student: str = ""
    matched_by: str = ""


@dataclass
class Result:
    assignment: str
    collected: dict = field(default_factory=dict)   # student -> [Found]
    skipped: list = field(default_factory=list)     # (path, reason)
    warnings: list = field(default_factory=list)

    @property
    def n_collected(self):
        return sum(len(v) for v in self.collected.values())

    def summary(self):
        lines = [f"{self.assignment}: collected {self.n_collected} file(s) for "
                 f"{len(self.collected)} student(s), skipped {len(self.skipped)} file(s)"]
        for student, found in sorted(self.collected.items()):
            for f in found:
                when = (f"submitted {f.time:%Y-%m-%d %H:%M} UTC ({f.time_source})" if f.time
                        else f"time unknown ({f.time_source})")
                late = " LATE" if f.late else ""
                lines.append(f"  collected {student} / {f.notebook}{late}, {when}  <- {f.path}"
                             + (f"  [{f.matched_by}]" if f.matched_by else ""))
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


def parse(path, notebooks, tz="UTC"):
    """What an entry's name says: a Found, or (None, reason) when it is not a submission."""
    if SYSTEM.search(path):
        return None, "a file the operating system adds to archives"
    ext = PurePosixPath(path).suffix.lower()
    base = PurePosixPath(path).name
    m = MOODLE.match(path)
    if m:
        return _found(path, "moodle", m["uid"], m["name"], m["file"], notebooks)
    m = MOODLE_OTHER.match(path)
    if m:
        return None, f"Moodle {m['kind']} entry, not a file submission"
    m = BLACKBOARD.match(base)
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
    canvas = CANVAS.match(base)
    if canvas and _notebook_name(canvas["file"], notebooks)[0] in notebooks:
        return _canvas(path, canvas, notebooks)
    for nb in sorted(notebooks, key=len, reverse=True):
        stem = nb[: -len(NOTEBOOK)]
        m = re.match(rf"^(?P<sid>[A-Za-z0-9][A-Za-z0-9._@-]*?)_(?P<file>{re.escape(stem)}(?:-\d+| \(\d+\))?\.ipynb)$",
                     base, re.IGNORECASE)
        if m:
            return _found(path, "plain", m["sid"], "", m["file"], notebooks)
    if canvas:  # a Canvas name around a notebook the student renamed: collected, then reported
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


def _key(text):
    return re.sub(r"[^0-9a-z]", "", (text or "").lower())


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
                for key in {_key(last + first), _key(first + last)}:
                    self.names.setdefault(key, set()).add(s["id"])

    def match(self, found):
        """(student id, how), or (None, why not)."""
        if found.lms_id in self.by_lms:
            return self.by_lms[found.lms_id], f"roster lms_user_id {found.lms_id}"
        if found.lms_id in self.ids:
            return found.lms_id, ""
        if found.name:
            hits = self.names.get(_key(found.name), set())
            if len(hits) == 1:
                return next(iter(hits)), f"roster name {found.name!r}"
            if len(hits) > 1:
                return None, f"the name {found.name!r} fits several students on the roster ({', '.join(sorted(hits))})"
        return None, None


def _fallback_id(found):
    """The student id to use when no roster says otherwise."""
    if found.lms == "moodle":  # Moodle's participant number changes from one assignment to the next
        slug = re.sub(r"[^0-9A-Za-z.-]+", "_", found.name.strip()).strip("_").lower()
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

    with Gradebook(pipeline.db_url(root), config.CourseDirectory.course_id) as gb:
        return Roster([{"id": s.id, "first_name": s.first_name, "last_name": s.last_name,
                        "lms_user_id": s.lms_user_id} for s in gb.students])


def due_date(root, config, assignment):
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(pipeline.db_url(root), config.CourseDirectory.course_id) as gb:
        try:
            return gb.find_assignment(assignment).duedate
        except MissingEntry:
            return None


def _stamp(dt):
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def plan(names, notebooks, roster, settings, due=None, entry_times=None):
    """Decide, for the entry names of one download, who gets which file (pure: no files)."""
    result = Result(assignment="")
    candidates, owners = {}, {}
    for path in names:
        found, reason = parse(path, notebooks, settings.timezone)
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
        candidates.setdefault((student, found.notebook), []).append(found)
    oldest = datetime.datetime.min
    for (student, notebook), group in sorted(candidates.items()):
        group.sort(key=lambda f: (f.version, f.time or oldest, f.file_id, f.path))
        winner = group[-1]
        for loser in group[:-1]:
            result.skipped.append((loser.path, f"an earlier version of {student}'s {notebook} "
                                                f"(kept {winner.path})"))
        if winner.time is None:
            if due is not None:
                winner.time = due + datetime.timedelta(seconds=1) if winner.late else due
                winner.time_source = ("the LMS marks it LATE but gives no time: dated 1 s after the due date"
                                      if winner.late else "the LMS gives no time: dated at the due date")
            else:
                winner.time_source = "the LMS gives no time and the assignment has no due date"
        result.collected.setdefault(student, []).append(winner)
    return result


def collect(root, zip_path, assignment, config=None):
    """Collect one LMS download into submitted/; returns the Result (also printed)."""
    root = Path(root)
    zip_path = Path(zip_path)
    config = config or pipeline.load_config(root)
    if assignment not in pipeline.assignments(root):
        raise SystemExit(f"unknown assignment {assignment!r}: use one of {', '.join(pipeline.assignments(root))}")
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
    notebooks = [f"{n}{NOTEBOOK}" for n in pipeline.expected_notebooks(root, assignment)]
    due = due_date(root, config, assignment)
    roster = load_roster(root, config)

    downloaded = root / "downloaded" / assignment
    (downloaded / "archive").mkdir(parents=True, exist_ok=True)
    kept = downloaded / "archive" / zip_path.name
    if zip_path.resolve() != kept.resolve():
        shutil.copy2(zip_path, kept)

    with zipfile.ZipFile(zip_path) as archive:
        infos = [i for i in archive.infolist() if not i.is_dir()]
        too_big = [i.filename for i in infos if i.file_size > MAX_BYTES]
        names = [i.filename for i in infos if i.file_size <= MAX_BYTES]
        times = {i.filename: datetime.datetime(*i.date_time) for i in infos}
        result = plan(names, notebooks, roster, settings, due, times)
        result.assignment = assignment
        result.skipped += [(name, f"larger than {MAX_BYTES // 2**20} MiB unpacked") for name in too_big]
        if due is None and any(f.time is None for fs in result.collected.values() for f in fs):
            result.warnings.append(
                f"{assignment} has no due date in the gradebook, so lateness cannot be judged for files "
                f"without a time. Set it (nbgrader db assignment add {assignment} --duedate=\"YYYY-MM-DD HH:MM:SS UTC\") "
                "and collect again.")
        for student, found in sorted(result.collected.items()):
            _write_submission(root, student, assignment, archive, found)
    record = downloaded / "collected.json"
    history = json.loads(record.read_text()) if record.exists() else {}
    for student, found in result.collected.items():
        history[student] = [{**asdict(f), "time": f.time.isoformat() if f.time else None,
                             "zip": zip_path.name} for f in found]
    record.write_text(json.dumps(history, indent=1, sort_keys=True))
    print(result.summary())
    return result


def _write_submission(root, student, assignment, archive, found):
    """Replace submitted/<student>/<assignment>/ with these files, nbgrader-style."""
    final = root / "submitted" / student / assignment
    tmp = final.with_name(f".{assignment}.incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in found:
        (tmp / f.notebook).write_bytes(archive.read(f.path))
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
        names = [i.filename for i in archive.infolist() if not i.is_dir()]
    hits = {}
    for assignment in pipeline.assignments(root):
        notebooks = [f"{n}{NOTEBOOK}" for n in pipeline.expected_notebooks(root, assignment)]
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
