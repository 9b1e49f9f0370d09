"""nbgrader's exchange, for the two ways students hand in through it.

- **Local** (the default): one account releases, submits and collects. Self-study, the
  LMS route's feedback and the test suite's simulated students (`nbgrader submit
  --student=ID`) work this way. The exchange is exchange/ in the course, private to that
  account (0700).
- **The course server**: each student has a Unix account whose login name is their
  student id, in the course's group; they submit into a shared exchange that
  `make setup-exchange` (setup()) builds outside the course folder:

      <exchange>/                 instructor:<group> 1770  students may enter; nobody
                                                             renames or removes another's entry
      <exchange>/<course>/        instructor:<group> 0750
          outbound/               instructor:<group> 0750  released assignments, read-only
          inbound/                instructor:<group> 1730  submit only: no listing, nobody
                                                             removes or renames another's
                                                             submission, and by its default
                                                             ACL only the submitter and the
                                                             instructor can open one
          feedback/               instructor:<group> 0710  pages found only by their hash

  nbgrader's own submit makes every submission folder world-writable (0777) "so the
  instructor can delete later"; the default ACL of inbound/ (`u:<instructor>:rwx,
  g::---, g:<group>:---`) still denies every classmate (a named group entry that grants
  nothing is not passed over for "other"), whatever mode the folder gets.

Whichever route, collecting (OwnedCollect, the ExchangeCollect plugin that
nbgrader_config.py names, so `make collect`, `nbgrader collect` and the formgrader's
Collect button all use it) takes a submission only if it belongs to the student it names:
its folder and every file in it written by that student's account (on the local route,
by the collecting account itself, which simulates every student), regular files and
folders only, a readable name and time. Anything else is refused, left in inbound/, and
listed with the reason (refusals(), printed by `make collect`); nbgrader's own owner
check only warns and collects it anyway. A refused submission never hides the student's
own: the newest one that belongs to them is collected.

On the course server a submission's time is also checked: nbgrader takes it from the
folder's name and its timestamp.txt, both written by the student's own account, so a
late submission could claim to be on time (or an on-time one be changed after the due
date). The file system records when each file was last changed (its ctime, which no
account can set back); a submission changed more than TIME_TOLERANCE after the time it
claims is collected with the time it was last changed, and `make collect` lists it
(late_writes()).
"""
import datetime
import grp
import os
import pwd
import shutil
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from nbgrader.exchange.default import ExchangeCollect, ExchangeReleaseAssignment
from nbgrader.utils import ignore_patterns, parse_utc
from traitlets import Unicode
from traitlets.config import Configurable

MAX_ENTRIES = 10_000  # files and folders in one submission that collect looks at
# folders inside a submission that collect copies (grading refuses more than 32 deep, and
# says so; far deeper, the copy itself would fail for the whole class)
MAX_DEPTH = 250
LOCAL_MODE = 0o700
# A submission changed this long after the time it claims was changed after it was handed in
# (nbgrader's submit takes its time, then copies the files: seconds).
TIME_TOLERANCE = datetime.timedelta(minutes=2)
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp.txt
LAYOUT = (  # (path under the exchange, mode) of the course-server exchange
    ("", 0o1770), ("{course}", 0o750), ("{course}/outbound", 0o750),
    ("{course}/inbound", 0o1730), ("{course}/feedback", 0o710))


class CourseExchange(Configurable):
    """The course-server route's settings (nbgrader_config.py)."""

    group = Unicode("", help="The Unix group of the course's students on the course server "
                             "(every student account, and the instructor's); '' for the local "
                             "route, where one account does everything.").tag(config=True)


class ExchangeSetupError(Exception):
    """The exchange cannot be set up as asked: the reason, and what to do."""


# --- who wrote a submission ------------------------------------------------------

@dataclass(frozen=True)
class Refusal:
    """A submission in inbound/ that collect does not take, and why."""
    entry: str  # its folder's name in inbound/
    student: str  # the student it names ("" where the name cannot be read)
    reason: str

    def line(self):
        return f"{printable(self.entry)}: {self.reason}"


def printable(name):
    """A file name as text that can be printed: bytes that are not UTF-8 as \\xNN."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _account(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid} (no such account)"


def parse_entry(name, assignment):
    """(student, time) from a submission folder's name, <student>+<assignment>+<time>
    [+<random>], as nbgrader's submit writes it; ValueError where it is not one."""
    parts = name.rsplit("+", 3)
    if len(parts) == 4 and parts[1] != assignment:
        parts = [f"{parts[0]}+{parts[1]}", parts[2], parts[3]]  # no random part, '+' in the id
    if len(parts) < 3 or parts[1] != assignment:
        raise ValueError(f"its name is not <student>+{assignment}+<time>")
    student = parts[0]
    if not student or student[0] in ".-":
        raise ValueError(f"{printable(student)!r} is not a student id")
    try:
        return student, parse_utc(parts[2])
    except (ValueError, OverflowError):
        raise ValueError(f"its name holds no time ({printable(parts[2][:40])!r})") from None


def judge(path, student, strict=True, collector=None):
    """Why the submission folder at path does not belong to student, or "" where it does.
    It belongs to them where its folder and everything in it were written by their account
    (strict), or, on the local route (strict False), by that account or by the collecting
    account (collector: a uid, by default this process's), which simulates every student;
    and it holds regular files and folders only, with a timestamp.txt that is a time."""
    collector = os.geteuid() if collector is None else collector
    try:
        info = os.lstat(path)
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return "it is not a folder (a link, or a file): nbgrader's submit writes a folder"
    owner = _account(info.st_uid)
    if owner != student and (strict or info.st_uid != collector):
        return f"it claims to be {printable(student)}'s but was written by the account {owner}"
    count, stack = 0, [(path, 0)]
    while stack:
        folder, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"its folders are nested more than {MAX_DEPTH} deep"
        try:
            with os.scandir(folder) as entries:
                for item in entries:
                    count += 1
                    if count > MAX_ENTRIES:
                        return f"it holds more than {MAX_ENTRIES} files"
                    rel = printable(os.path.relpath(item.path, path))
                    mode = item.stat(follow_symlinks=False)
                    if mode.st_uid != info.st_uid:
                        return (f"{rel} in it was written by the account {_account(mode.st_uid)}, "
                                f"not {owner}")
                    if stat.S_ISDIR(mode.st_mode):
                        stack.append((item.path, depth + 1))
                    elif not stat.S_ISREG(mode.st_mode):
                        kind = "a symbolic link" if stat.S_ISLNK(mode.st_mode) else "not a regular file"
                        return f"{rel} in it is {kind}; a submission holds regular files only"
        except OSError as e:
            return f"it cannot be read by the collecting account ({e.strerror})"
    stamp = Path(path) / "timestamp.txt"
    if stamp.exists():
        try:
            parse_utc(stamp.read_text(errors="replace").strip()[:100] or "?")
        except (ValueError, OverflowError, OSError):
            return "its timestamp.txt is not a time"
    return ""


def sort_inbound(inbound, assignment, student="*", strict=True, collector=None):
    """The submissions of assignment in inbound/ (of one student, or all): ([(student,
    time, folder name)] that belong to their student, [Refusal])."""
    accepted, refused = [], []
    prefix = "" if student == "*" else f"{student}+{assignment}+"
    names = [n for n in os.listdir(inbound) if f"+{assignment}+" in n and n.startswith(prefix)]
    for name in sorted(names):  # hidden names too, which nbgrader's glob would pass over
        path = os.path.join(inbound, name)
        try:
            who, when = parse_entry(name, assignment)
        except ValueError as e:
            refused.append(Refusal(name, "", str(e)))
            continue
        reason = judge(path, who, strict, collector)
        if reason:
            refused.append(Refusal(name, who, reason))
        else:
            accepted.append((who, when, name))
    return accepted, refused


def choose(accepted, duedate=None, before_duedate=False):
    """{student: (time, folder name)} of the submission collect takes for each student: the
    newest (nbgrader's rule), or with before_duedate the newest before the due date where
    there is one."""
    chosen = {}
    for who, when, name in sorted(accepted, key=lambda r: r[1], reverse=True):
        if who in chosen and not (before_duedate and duedate and chosen[who][0] > duedate
                                  and when <= duedate):
            continue
        chosen[who] = (when, name)
    return chosen


def duedate(db_url, course_id, assignment):
    """The assignment's due date in the gradebook, or None."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url, course_id) as gb:
        try:
            return gb.find_assignment(assignment).duedate
        except MissingEntry:
            return None


def _utc(when):
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def written_at(path):
    """When anything in the submission folder at path was last changed (the newest ctime
    of it and everything in it): a time its submitter cannot set."""
    newest = os.lstat(path).st_ctime
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            newest = max(newest, os.lstat(os.path.join(folder, name)).st_ctime)
    return datetime.datetime.fromtimestamp(newest, datetime.timezone.utc)


def claimed_at(path, name_time):
    """The time a submission says it was handed in: its timestamp.txt, else its name's."""
    try:
        return _utc(parse_utc((Path(path) / "timestamp.txt").read_text().strip()))
    except (OSError, ValueError, OverflowError):
        return _utc(name_time)


@dataclass(frozen=True)
class LateWrite:
    """A submission changed after the time it claims: collected with the time it was written."""
    entry: str
    student: str
    claimed: datetime.datetime
    written: datetime.datetime

    def line(self):
        return (f"{self.student}: {self.entry} says it was handed in {self.claimed:%Y-%m-%d %H:%M:%S} "
                f"UTC but was last changed {self.written:%Y-%m-%d %H:%M:%S} UTC; collected with "
                "the time it was changed")


def late_write(path, entry, student, name_time):
    """A LateWrite where the submission at path was changed more than TIME_TOLERANCE after
    the time it claims, else None."""
    claimed, written = claimed_at(path, name_time), written_at(path)
    return LateWrite(entry, student, claimed, written) if written - claimed > TIME_TOLERANCE else None


def _inbound(config):
    return Path(config.Exchange.root) / config.CourseDirectory.course_id / "inbound"


def refusals(config, assignment):
    """[Refusal] for assignment's submissions in the configured exchange (for make collect)."""
    strict = bool(config.ExchangeCollect.get("check_owner", True))
    return sort_inbound(_inbound(config), assignment, strict=strict)[1]


def late_writes(config, assignment, duedate=None):
    """[LateWrite] among the submissions collect takes for assignment, on the course server
    (for make collect)."""
    if not config.ExchangeCollect.get("check_owner", True):
        return []
    inbound = _inbound(config)
    accepted = sort_inbound(inbound, assignment, strict=True)[0]
    before = bool(config.ExchangeCollect.get("before_duedate", False))
    late = [late_write(inbound / name, name, who, when)
            for who, (when, name) in choose(accepted, duedate, before).items()]
    return sorted((w for w in late if w), key=lambda w: w.student)


class OwnedCollect(ExchangeCollect):
    """nbgrader's collect, taking only submissions that belong to the student they name
    (see the module's docstring); the others are left in inbound/ and logged. check_owner
    (nbgrader's setting) is the route: True on the course server, False where one account
    simulates every student."""

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not os.access(self.inbound_path, os.R_OK | os.X_OK):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        student = self.coursedir.student_id or "*"
        self._strict = self.check_owner
        accepted, self.refused = sort_inbound(self.inbound_path, self.coursedir.assignment_id,
                                              student, strict=self.check_owner)
        for refusal in self.refused:
            self.log.warning("Not collected: %s", refusal.line())
        chosen = choose(accepted, self._duedate(), self.before_duedate)
        self.src_records = [{"username": who, "filename": name, "timestamp": when}
                            for who, (when, name) in chosen.items()]
        self._names = {os.path.join(self.inbound_path, name): (who, when) for who, (when, name) in chosen.items()}

    def _duedate(self):
        return duedate(self.coursedir.db_url, self.coursedir.course_id, self.coursedir.assignment_id)

    def copy_files(self):
        # the owners were checked in init_src, refusing rather than warning
        strict, self.check_owner = self.check_owner, False
        try:
            super().copy_files()
        finally:
            self.check_owner = strict

    def do_copy(self, src, dest, log=None):
        """nbgrader's copy, keeping links as links (grading then refuses them) rather than
        copying what they point to, which the collecting account may read and the student not."""
        size = self.get_size(src)
        if size > 1000 * self.coursedir.max_dir_size:
            raise RuntimeError(f"Directory size is too big. Size is {size}, maximum size is "
                               f"{1000 * self.coursedir.max_dir_size}")
        late = None
        if getattr(self, "_strict", False) and src in getattr(self, "_names", {}):
            who, when = self._names[src]
            late = late_write(src, os.path.basename(src), who, when)
        shutil.copytree(src, dest, symlinks=True,
                        ignore=ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                               max_file_size=self.coursedir.max_file_size, log=self.log))
        if late is not None:
            (Path(dest) / "timestamp.txt").write_text(late.written.strftime(TIME_FORMAT))
            self.log.warning("Handed in later than it says: %s", late.line())


class KeptRelease(ExchangeReleaseAssignment):
    """nbgrader's release, without making the exchange's root world-writable (nbgrader's
    release sets it to 0777 every time): a missing local exchange is made private to this
    account; an existing one, or the course server's (make setup-exchange), keeps its modes."""

    def ensure_root(self):
        if os.path.isdir(self.root):
            return
        if CourseExchange(config=self.config).group:
            self.fail(f"The course server's exchange {self.root} does not exist: run "
                      "`make setup-exchange` (see the README's \"The course server\")")
        try:
            os.makedirs(self.root, mode=LOCAL_MODE)
            os.chmod(self.root, LOCAL_MODE)
        except OSError as e:
            self.fail(f"Could not create {self.root}: {e.strerror}")


def ensure_local(config):
    """The local route's exchange, created private to this account on first use; on the
    course server, the exchange must have been set up (make setup-exchange). Its path."""
    root = Path(config.Exchange.root)
    if not root.is_dir():
        if CourseExchange(config=config).group:
            raise ExchangeSetupError(f"the course server's exchange {root} does not exist: run "
                                     "`make setup-exchange` first")
        root.mkdir(parents=True, mode=LOCAL_MODE)
        os.chmod(root, LOCAL_MODE)
    return root


# --- the course server's exchange ------------------------------------------------

ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 1, 2, 4, 8, 16, 32
ACL_UNDEFINED = 0xFFFFFFFF
ACL_VERSION = 2


def acl_bytes(entries):
    """A POSIX ACL as Linux stores it in the system.posix_acl_* attributes (the kernel's
    posix_acl_xattr format: a version, then (tag, permissions, id) entries in tag order)."""
    data = struct.pack("<I", ACL_VERSION)
    for tag, perm, ident in sorted(entries, key=lambda e: (e[0], e[2])):
        data += struct.pack("<HHI", tag, perm, ident)
    return data


def inbound_acl(instructor_uid, group_gid):
    """The default ACL of inbound/: each new submission is the submitter's and the
    instructor's, and no one else's, whatever mode nbgrader's submit gives it."""
    return acl_bytes([(ACL_USER_OBJ, 7, ACL_UNDEFINED), (ACL_USER, 7, instructor_uid),
                      (ACL_GROUP_OBJ, 0, ACL_UNDEFINED), (ACL_GROUP, 0, group_gid),
                      (ACL_MASK, 7, ACL_UNDEFINED), (ACL_OTHER, 0, ACL_UNDEFINED)])


def _set_default_acl(path, acl):
    try:
        os.setxattr(path, "system.posix_acl_default", acl)
        if os.getxattr(path, "system.posix_acl_default") != acl:
            raise OSError(0, "the ACL read back differs")
    except OSError as e:
        raise ExchangeSetupError(
            f"cannot give {path} its default ACL ({e.strerror}): the course server's exchange "
            "needs a file system with POSIX ACLs (ext4, xfs, btrfs; mounted with acl)") from None


def setup(config, course_root, owner=None):
    """Build (or repair) the course server's exchange (the layout in the module's
    docstring) for the group `c.CourseExchange.group`, owned by `owner` (a login name; by
    default this account, or when run by root, the course folder's owner). Returns the
    lines to show: what was done, and warnings about what would still let a student read
    another's work (the course folder, home folders readable by others)."""
    group = CourseExchange(config=config).group
    root = Path(config.Exchange.root)
    course = config.CourseDirectory.course_id
    course_root = Path(course_root).resolve()
    if not group:
        raise ExchangeSetupError("no course group: set COURSE_GROUP (and SERVER_EXCHANGE) in "
                                 "nbgrader_config.py for the course server")
    if root.resolve() == (course_root / "exchange").resolve() or course_root in root.resolve().parents:
        raise ExchangeSetupError(f"the exchange {root} is inside the course folder, which only the "
                                 "instructor may enter: put it elsewhere (e.g. /srv/nbgrader/"
                                 f"{course}) as SERVER_EXCHANGE in nbgrader_config.py")
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise ExchangeSetupError(f"there is no group {group!r}: create it (groupadd {group}) and "
                                 f"add every student and the instructor (usermod -aG {group} NAME)") from None
    if os.geteuid() == 0:
        uid = pwd.getpwnam(owner).pw_uid if owner else os.stat(course_root).st_uid
    else:
        uid = os.geteuid()
        if owner and pwd.getpwnam(owner).pw_uid != uid:
            raise ExchangeSetupError(f"only root can make the exchange {owner}'s; run this as {owner}")
        if gid not in os.getgroups() and os.getegid() != gid:
            raise ExchangeSetupError(f"this account is not in the group {group}: add it "
                                     f"(usermod -aG {group} {_account(uid)}) and log in again")
    if uid == 0:
        raise ExchangeSetupError("the exchange would belong to root: give the instructor's login "
                                 "name (OWNER=...), the account that collects and grades")
    lines = []
    for rel, mode in LAYOUT:
        path = root / rel.format(course=course) if rel else root
        if not path.exists():
            path.mkdir(parents=True, mode=0o700)
            lines.append(f"created {path}")
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise ExchangeSetupError(f"{path} is not a folder")
        os.chown(path, uid, gid, follow_symlinks=False)
        os.chmod(path, mode)
        lines.append(f"{stat.filemode(mode | stat.S_IFDIR)} {_account(uid)}:{group} {path}")
    inbound = root / course / "inbound"
    _set_default_acl(inbound, inbound_acl(uid, gid))
    lines.append(f"  default ACL of {inbound}: u:{_account(uid)}:rwx, g::---, g:{group}:---, o::--- "
                 "(a submission is its student's and the instructor's only)")
    old = [p.name for p in inbound.iterdir() if p.is_dir() and b"system.posix_acl_access" not in
           _xattrs(p)]
    if old:
        lines.append(f"warning: {len(old)} submission(s) in {inbound} were handed in before this "
                     "set-up, when classmates could open them; collect them and ask who changed them")
    lines += [f"warning: {w}" for w in _reach_warnings(root, course_root, gid, uid)]
    return lines


def _xattrs(path):
    try:
        return [n.encode() for n in os.listxattr(path, follow_symlinks=False)]
    except OSError:
        return []


def _reach_warnings(root, course_root, gid, uid):
    """What would still let one student read another's work, or keep students out."""
    warnings = []
    for parent in reversed(root.resolve().parents):
        info = os.stat(parent)
        if not (info.st_mode & stat.S_IXOTH or (info.st_mode & stat.S_IXGRP and info.st_gid == gid)):
            warnings.append(f"students cannot reach the exchange: {parent} is not open to them "
                            f"(chmod o+x {parent})")
    info = os.stat(course_root)
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        warnings.append(f"the course folder {course_root} is open to other accounts "
                        f"({stat.filemode(info.st_mode)}): it holds solutions/, the gradebook and every "
                        f"collected submission; chmod 700 {course_root} (students use an environment "
                        "of their own: see the README)")
    members = set(grp.getgrgid(gid).gr_mem) | {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid}
    for name in sorted(members):
        try:
            home = pwd.getpwnam(name).pw_dir
            mode = os.stat(home).st_mode
        except (KeyError, OSError):
            continue
        if pwd.getpwnam(name).pw_uid != uid and mode & (stat.S_IROTH | stat.S_IXOTH | stat.S_IRGRP):
            warnings.append(f"{name}'s home folder {home} is readable by others "
                            f"({stat.filemode(mode)}): classmates can read their notebooks and "
                            f"nbgrader's copy of what they handed in; chmod 700 {home} "
                            "(HOME_MODE 0700 in /etc/login.defs for new accounts)")
    return warnings
