"""The course server's exchange with real Unix accounts, made for this test and removed
after it: an instructor and two students, ada and bob, in the course's group. Each runs
the commands the README gives them (nbgrader's fetch and submit, `make setup-exchange`,
`make release-exchange`, `make collect`), as themselves (runuser).

- ada can neither submit as bob (her `nbgrader submit --student bob` is refused and listed
  by `make collect`, and bob's own submission is collected), nor list the exchange's
  inbound folder, nor open, overwrite, rename or delete bob's submission, nor read it in
  bob's home folder or the course folder;
- both are collected as their own; a student's own hostile submission (a link to the
  instructor's solutions, a FIFO) is refused with the reason, never followed; a late one
  that says it came in on time is collected with the time it was written;
- released feedback reaches its student, and the other cannot list it;
- the sandboxed kernel that grades ada's notebook shows what her own lab on this server
  shows: her login name, home folder, the notebook's folder, the host name.

Needs root (to create accounts); skipped elsewhere, saying so."""
import datetime
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from grader.instructor import exchange
from support import synthetic

pytestmark = [pytest.mark.grading, pytest.mark.xdist_group("exchange_accounts")]

A = "03_masked_softmax"
NB = f"{A}.ipynb"
BIN = str(Path(sys.executable).parent)
TOOLS = ("useradd", "userdel", "groupadd", "groupdel", "runuser", "unshare")


def _skip_reason():
    if os.geteuid() != 0:
        return "creating Unix accounts for the course server needs root"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)}"
    probe = tempfile.mkdtemp(prefix="acl-probe-")
    try:
        os.setxattr(probe, "system.posix_acl_default", exchange.inbound_acl(0, 0))
    except OSError as e:
        return f"the temporary folder's file system has no POSIX ACLs ({e.strerror})"
    finally:
        os.rmdir(probe)
    return ""


SKIP = _skip_reason()
if SKIP:
    pytestmark.append(pytest.mark.skip(reason=SKIP))


def _root(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def _hidden_python():
    """(a folder other accounts cannot enter, the folder in it that holds this Python), where
    the course's Python lives in such a folder (as under /root on some machines); None
    where every account can run it, as on a course server."""
    prefix = Path(sys.base_prefix).resolve()
    for parent in reversed(prefix.parents):
        if parent != Path("/") and not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent, parent / prefix.relative_to(parent).parts[0]
    return None


HIDDEN = _hidden_python()


def _reachable(cmd):
    """cmd (run as root, then as an account) in a mount namespace of its own where, if this
    machine keeps the course's Python in a folder other accounts cannot enter, that folder
    shows only the Python installation (a course server installs Python where every account
    can run it). The accounts' own files are not touched."""
    if HIDDEN is None:
        return list(cmd)
    closed, inside = HIDDEN
    keep = Path(tempfile.mkdtemp(prefix="python-for-accounts-"))
    script = (f'mkdir -p "{keep}" && mount --bind "{inside}" "{keep}" && '
              f'mount -t tmpfs -o mode=0755,size=1m tmpfs "{closed}" && mkdir -p "{inside}" && '
              f'mount --move "{keep}" "{inside}" && rmdir "{keep}" && exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *cmd]


def as_user(name, *cmd, cwd=None, check=True):
    """cmd run as the account name, from cwd (default: its home), with the environment a
    login gives it and the course's Python environment on PATH."""
    home = f"/home/{name}"
    env = ["env", "-i", f"--chdir={cwd or home}", f"HOME={home}", f"USER={name}", f"LOGNAME={name}",
           f"PATH={BIN}:/usr/bin:/bin", "LANG=C.UTF-8"]
    proc = subprocess.run(_reachable(["runuser", "-u", name, "--", *env, *cmd]), capture_output=True,
                          text=True, timeout=300)
    if check:
        assert proc.returncode == 0, f"{name}: {' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def write_as(name, path, text):
    """Write text to path (making its folder) as the account name."""
    as_user(name, sys.executable, "-c", "import os, sys; os.makedirs(os.path.dirname(sys.argv[1]), "
            "exist_ok=True); open(sys.argv[1], 'w').write(sys.argv[2])", path, text)


def python_as(name, code, cwd=None):
    """Run Python code as name; its last line of output, read as JSON."""
    out = as_user(name, sys.executable, "-c", code, cwd=cwd).stdout
    return json.loads(out.strip().splitlines()[-1])


class Server:
    """Accounts, group, course folder and exchange of one course server, for this module."""

    def __init__(self, base):
        tag = secrets.token_hex(3)
        self.group = f"sa{tag}"
        self.instructor, self.ada, self.bob = (f"sa{tag}{who}" for who in ("i", "a", "b"))
        self.base = base
        self.course = base / "course"
        self.exchange = base / "srv" / "self-attention"
        self.made = []

    def create(self):
        _root("groupadd", self.group)
        self.made.append(("groupdel", self.group))
        for name in (self.instructor, self.ada, self.bob):
            _root("useradd", "--create-home", "--shell", "/bin/bash", "--groups", self.group,
                  "--key", "HOME_MODE=0700", name)
            self.made.append(("userdel", "--remove", name))
            os.chmod(f"/home/{name}", 0o700)  # as the README asks: nobody reads a student's home
        synthetic.make_course(self.course)
        config = self.course / "nbgrader_config.py"
        text = config.read_text()
        for name, value in (("SERVER_EXCHANGE", self.exchange), ("COURSE_GROUP", self.group)):
            assert f'{name} = ""' in text
            text = text.replace(f'{name} = ""', f'{name} = "{value}"', 1)
        config.write_text(text)
        _root("chown", "-R", f"{self.instructor}:{self.instructor}", str(self.course))
        os.chmod(self.course, 0o700)  # the instructor's alone: solutions, gradebook, submissions
        (self.base / "srv").mkdir(mode=0o755)
        os.chown(self.base / "srv", pwd_uid(self.instructor), 0)
        for student in (self.ada, self.bob):  # as "For students" in the README says
            write_as(student, f"/home/{student}/.jupyter/nbgrader_config.py",
                     f'c = get_config()\nc.Exchange.root = "{self.exchange}"\n'
                     'c.CourseDirectory.course_id = "self-attention"\n')

    def remove(self):
        for cmd in reversed(self.made):
            subprocess.run(cmd, capture_output=True)

    def instructor_runs(self, *args, check=True):
        return as_user(self.instructor, sys.executable, "-m", "grader.instructor", *args,
                       "--root", str(self.course), cwd=str(self.course), check=check)

    def nbgrader(self, student, *args, check=True):
        return as_user(student, sys.executable, "-m", "nbgrader", *args, check=check)

    def write_notebook(self, student, nb):
        """The student's own notebook in ~/<assignment>/, written as them."""
        write_as(student, f"/home/{student}/{A}/{NB}", nbformat.writes(nb))

    def inbound(self):
        return self.exchange / "self-attention" / "inbound"


def pwd_uid(name):
    import pwd

    return pwd.getpwnam(name).pw_uid


@pytest.fixture(scope="module")
def server():
    base = Path(tempfile.mkdtemp(prefix="course-server-"))
    os.chmod(base, 0o755)
    srv = Server(base)
    try:
        srv.create()
        setup = srv.instructor_runs("setup-exchange").stdout
        release = srv.instructor_runs("release-exchange", "--assignment", A).stdout
        yield srv, setup, release
    finally:
        srv.remove()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def handed_in(server):
    """ada fetches and submits a correct notebook; bob submits his, with a mistake of his
    own (so the two differ); then ada submits an empty notebook as bob, after him."""
    srv, *_ = server
    srv.nbgrader(srv.ada, "fetch_assignment", A)
    srv.write_notebook(srv.ada, synthetic.answered(srv.course, A, A))
    srv.nbgrader(srv.ada, "submit", A)
    bobs = synthetic.VARIANTS["softmax_wrong_dim"](srv.course, A, A)
    bobs.cells[0].source += "\n# bob's own"
    srv.write_notebook(srv.bob, bobs)
    srv.nbgrader(srv.bob, "submit", A)
    blank = nbformat.read(srv.course / "notebooks" / A / NB, as_version=4)
    srv.write_notebook(srv.ada, blank)
    forged = srv.nbgrader(srv.ada, "submit", A, "--student", srv.bob, check=False)
    collected = srv.instructor_runs("collect", "--assignment", A).stdout
    return srv, forged, collected


def _mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_setup_gives_the_group_an_exchange_nobody_else_enters(server):
    srv, setup, release = server
    assert "released to" in release, release
    course = srv.exchange / "self-attention"
    modes = {p: _mode(p) for p in (srv.exchange, course, course / "outbound", srv.inbound(), course / "feedback")}
    assert modes == {srv.exchange: 0o1770, course: 0o750, course / "outbound": 0o750,
                     srv.inbound(): 0o1730, course / "feedback": 0o710}, setup
    for path in modes:  # the instructor's, the group's; no folder open to other accounts
        info = os.lstat(path)
        assert info.st_uid == pwd_uid(srv.instructor) and not info.st_mode & 0o007
    assert os.getxattr(srv.inbound(), "system.posix_acl_default") == \
        exchange.inbound_acl(pwd_uid(srv.instructor), os.lstat(srv.inbound()).st_gid)
    # a second release keeps the modes (nbgrader's own release makes the root 0777)
    srv.instructor_runs("release-exchange", "--assignment", A, "--force")
    assert _mode(srv.exchange) == 0o1770
    assert "warning" not in setup, setup  # course folder private, homes private, path reachable


def test_each_student_is_collected_as_their_own(handed_in):
    srv, _, collected = handed_in
    assert "2 new" in collected and f"new: {srv.ada}, {srv.bob}" in collected, collected
    submitted = srv.course / "submitted"
    assert "# bob's own" in (submitted / srv.bob / A / NB).read_text()  # not ada's blank copy
    ada = nbformat.read(submitted / srv.ada / A / NB, as_version=4)
    assert "raise NotImplementedError" not in "".join(c.source for c in ada.cells)


def test_submitting_as_a_classmate_is_refused_and_listed(handed_in):
    srv, forged, collected = handed_in
    # nbgrader's submit itself cannot know; collect refuses it, lists it, and takes bob's own
    assert forged.returncode == 0
    line = next(l for l in collected.splitlines() if l.strip().startswith(f"{srv.bob}+{A}+"))
    assert f"claims to be {srv.bob}'s but was written by the account {srv.ada}" in line, collected
    assert "refused 1 submission(s)" in collected
    again = srv.instructor_runs("collect", "--assignment", A).stdout
    assert "0 new, 0 replaced by a newer submission, 2 unchanged" in again, again  # still refused
    assert f"written by the account {srv.ada}" in again
    # nbgrader's own command (as the formgrader's Collect button) goes through the same plugin
    plain = as_user(srv.instructor, sys.executable, "-m", "nbgrader", "collect", "--update", A,
                    cwd=str(srv.course))
    assert f"Not collected: {srv.bob}+{A}+" in plain.stderr, plain.stderr
    assert "# bob's own" in (srv.course / "submitted" / srv.bob / A / NB).read_text()


def test_a_student_cannot_see_or_touch_a_classmates_submission(handed_in):
    srv, *_ = handed_in
    bobs = [p for p in srv.inbound().iterdir() if p.owner() == srv.bob]
    assert len(bobs) == 1
    entry = bobs[0]
    cache = f"/home/{srv.bob}/.local/share/jupyter/nbgrader_cache/self-attention"
    tried = python_as(srv.ada, f"""
import json, os
def attempt(f):
    try:
        f()
        return "allowed"
    except OSError as e:
        return e.strerror
entry, inbound = {str(entry)!r}, {str(srv.inbound())!r}
result = {{
    "list inbound": attempt(lambda: os.listdir(inbound)),
    "read": attempt(lambda: open(os.path.join(entry, {NB!r})).read()),
    "list": attempt(lambda: os.listdir(entry)),
    "overwrite": attempt(lambda: open(os.path.join(entry, {NB!r}), "w").write("{{}}")),
    "add a file": attempt(lambda: open(os.path.join(entry, "extra.ipynb"), "w").write("{{}}")),
    "delete": attempt(lambda: os.unlink(os.path.join(entry, {NB!r}))),
    "rename": attempt(lambda: os.rename(entry, os.path.join(inbound, "mine"))),
    "remove": attempt(lambda: os.rmdir(entry)),
    "read the secret": attempt(lambda: open(os.path.join(entry, "submission_secret.txt")).read()),
    "read bob's cache": attempt(lambda: os.listdir({cache!r})),
    "read the collected copy": attempt(lambda: os.listdir({str(srv.course / "submitted")!r})),
}}
print(json.dumps(result))
""")
    assert set(tried.values()) <= {"Permission denied", "Operation not permitted"}, tried
    assert (entry / NB).exists() and "# bob's own" in (entry / NB).read_text()


def test_a_students_own_links_and_fifos_are_refused_not_followed(server, handed_in):
    """bob hands in a folder whose notebook is a link to the instructor's solutions (collect
    runs as the instructor, who can read them) and a FIFO (which a copy would wait on)."""
    srv, *_ = handed_in
    solution = srv.course / "solutions" / A / NB
    for trick in ("link", "fifo"):
        folder = f"/home/{srv.bob}/{trick}/{A}"
        as_user(srv.bob, "mkdir", "-p", folder)
        name = f"{srv.bob}+{A}+2099-01-01 00:00:00.000000 UTC+{trick}"
        as_user(srv.bob, "cp", "-r", folder, str(srv.inbound() / name))
        target = srv.inbound() / name / NB
        if trick == "link":
            as_user(srv.bob, "ln", "-s", str(solution), str(target))
        else:
            as_user(srv.bob, "mkfifo", str(target))
    out = srv.instructor_runs("collect", "--assignment", A).stdout
    assert f"{NB} in it is a symbolic link" in out and f"{NB} in it is not a regular file" in out, out
    collected = (srv.course / "submitted" / srv.bob / A / NB)
    assert not collected.is_symlink() and "BEGIN SOLUTION" not in collected.read_text()
    assert "# bob's own" in collected.read_text()


def test_a_submission_handed_in_later_than_it_claims_gets_the_time_it_was_written(handed_in):
    """bob hands in a new version after the due date with a timestamp.txt (and a folder name)
    of his own making that says it came in on time: collect takes the time the file system
    recorded, and says so."""
    srv, *_ = handed_in
    folder = f"/home/{srv.bob}/late/{A}"
    late = synthetic.answered(srv.course, A, A)
    late.cells[0].source += "\n# bob, late"
    write_as(srv.bob, f"{folder}/{NB}", nbformat.writes(late))
    write_as(srv.bob, f"{folder}/timestamp.txt", "2025-10-01 12:00:00.000000 UTC")
    entry = srv.inbound() / f"{srv.bob}+{A}+2099-12-31 00:00:00.000000 UTC+late"
    before = datetime.datetime.now(datetime.timezone.utc)
    as_user(srv.bob, "cp", "-r", folder, str(entry))
    out = srv.instructor_runs("collect", "--assignment", A).stdout
    assert f"replaced: {srv.bob}" in out, out
    assert f"{srv.bob}: {entry.name} says it was handed in 2025-10-01 12:00:00 UTC but was last changed" in out
    collected = srv.course / "submitted" / srv.bob / A
    assert "# bob, late" in (collected / NB).read_text()
    stamp = datetime.datetime.strptime((collected / "timestamp.txt").read_text(), "%Y-%m-%d %H:%M:%S.%f UTC")
    assert stamp.replace(tzinfo=datetime.timezone.utc) >= before - datetime.timedelta(seconds=2)


def test_feedback_reaches_its_student_only(handed_in):
    """The instructor releases ada's feedback page (written here as make feedback would,
    beside her submission's time and secret, for a submission the gradebook holds as graded);
    ada fetches it, bob can neither list the feedback folder nor find her page."""
    srv, *_ = handed_in
    submitted = srv.course / "submitted" / srv.ada / A
    python_as(srv.instructor, "import json, shutil; from nbgrader.api import Gradebook\n"
                              f"with Gradebook('sqlite:///gradebook.db', 'self-attention') as gb:\n"
                              f"    gb.update_or_create_assignment({A!r}); gb.update_or_create_student({srv.ada!r})\n"
                              f"    gb.add_submission({A!r}, {srv.ada!r})\n"
                              f"shutil.copytree({str(submitted)!r}, 'autograded/{srv.ada}/{A}')\nprint(json.dumps(1))",
              cwd=str(srv.course))
    feedback = srv.course / "feedback" / srv.ada / A
    feedback.mkdir(parents=True)
    (feedback / f"{A}.html").write_text("<p>feedback for ada</p>")
    for name in ("timestamp.txt", "submission_secret.txt"):
        shutil.copy(submitted / name, feedback / name)
    _root("chown", "-R", f"{srv.instructor}:{srv.instructor}", str(srv.course / "feedback"))
    assert "released 1 feedback page(s)" in srv.instructor_runs("release-feedback", "--assignment", A).stdout
    srv.nbgrader(srv.ada, "fetch_feedback", A)
    found = python_as(srv.ada, f"import glob, json; print(json.dumps([open(p).read() for p in "
                               f"glob.glob('/home/{srv.ada}/{A}/feedback/*/{A}.html')]))")
    assert found == ["<p>feedback for ada</p>"]
    listing = python_as(srv.bob, f"""
import json, os
try:
    print(json.dumps(os.listdir({str(srv.exchange / "self-attention" / "feedback")!r})))
except OSError as e:
    print(json.dumps(e.strerror))
""")
    assert listing == "Permission denied"


def test_the_graded_kernel_looks_like_the_students_lab(handed_in, tmp_path):
    """What ada's own code sees in a terminal or lab of hers on this server, and what it
    sees in the sandbox that grades her notebook: the same login name, home, folder of the
    notebook, shell and host name."""
    from traitlets.config import Config

    from grader.grading.execute import GradingExecute
    from grader.isolation import KERNEL_NAME, isolation_available, sandbox_settings

    available, why = isolation_available()
    if not available:
        pytest.skip(f"no isolation here: {why}")
    srv, *_ = handed_in
    probe = """
import getpass, json, os, pwd, socket
entry = pwd.getpwuid(os.getuid())
print(json.dumps({"USER": os.environ.get("USER"), "LOGNAME": os.environ.get("LOGNAME"),
                  "HOME": os.environ.get("HOME"), "SHELL": os.environ.get("SHELL"),
                  "getuser": getpass.getuser(), "home": os.path.expanduser("~"),
                  "passwd": [entry.pw_name, entry.pw_dir, entry.pw_shell],
                  "hostname": socket.gethostname(), "cwd": os.getcwd(), "pid 2": os.getpid() == 2}))
"""
    folder = f"/home/{srv.ada}/{A}"
    login = subprocess.run(_reachable(["runuser", "-l", srv.ada, "-c",
                                       f"cd {folder} && {sys.executable} -c '{probe}'"]),
                           capture_output=True, text=True, timeout=120)
    assert login.returncode == 0, login.stderr
    lab = json.loads(login.stdout.strip().splitlines()[-1])
    work = tmp_path / A
    work.mkdir()
    config = sandbox_settings(Config({"GradingExecute": {"kernel_name": KERNEL_NAME}}))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(probe)])
    GradingExecute(config=config).preprocess(nb, {"metadata": {"path": str(work)},
                                                  "nbgrader": {"student": srv.ada}})
    graded = json.loads(nb.cells[0].outputs[0].text.strip().splitlines()[-1])
    assert graded == lab, (graded, lab)
    assert lab["USER"] == srv.ada and lab["HOME"] == f"/home/{srv.ada}" and lab["cwd"] == folder


def test_an_oversized_submission_is_refused_and_the_class_collected(handed_in):
    """bob hands in a folder with a 150 MB sparse file (his own, no disk to speak of) and the
    newest time: nbgrader's copy raised on it and stopped the collect of everyone after it,
    at every run. It is refused with the reason; ada's is collected as before."""
    srv, *_ = handed_in
    folder = f"/home/{srv.bob}/big/{A}"
    write_as(srv.bob, f"{folder}/{NB}", nbformat.writes(synthetic.answered(srv.course, A, A)))
    as_user(srv.bob, sys.executable, "-c", "import sys; open(sys.argv[1], 'wb').truncate(150 * 10**6)",
            f"{folder}/big.bin")
    entry = srv.inbound() / f"{srv.bob}+{A}+2100-06-01 00:00:00.000000 UTC+big"
    as_user(srv.bob, "cp", "-r", "--sparse=always", folder, str(entry))
    collected = srv.course / "submitted" / srv.bob / A / NB
    before = collected.read_text()
    out = srv.instructor_runs("collect", "--assignment", A).stdout
    assert "collect failed" not in out, out
    assert f"{entry.name}: it holds more than 100 MB" in out, out
    assert collected.read_text() == before  # his newest one he may hand in is what stays
    as_user(srv.bob, "rm", "-rf", str(entry))


def test_a_submission_swapped_for_a_link_after_the_check_is_not_followed(handed_in, capsys, monkeypatch):
    """bob hands in again, and once collect has checked his folder, swaps it for a link to the
    instructor's solutions (he may rename and link his own entries in inbound/): a copy by
    name took the solutions as bob's. Run here, in this process, as collect would, with the
    swap between its check and its copy."""
    from grader.instructor import cli

    srv, *_ = handed_in
    folder = f"/home/{srv.bob}/again/{A}"
    write_as(srv.bob, f"{folder}/{NB}", nbformat.writes(synthetic.answered(srv.course, A, A)))
    entry = srv.inbound() / f"{srv.bob}+{A}+2100-07-01 00:00:00.000000 UTC+again"
    as_user(srv.bob, "cp", "-r", folder, str(entry))
    collected = srv.course / "submitted" / srv.bob / A
    before = (collected / NB).read_text()
    solutions = srv.course / "solutions" / A
    checked = exchange.OwnedCollect.init_src

    def then_swap(self):
        checked(self)
        as_user(srv.bob, "sh", "-c", f'mv "{entry}" "{entry}.kept" && ln -s "{solutions}" "{entry}"')
    monkeypatch.setattr(exchange.OwnedCollect, "init_src", then_swap)
    try:
        cli.collect(srv.course, assignment=A)
    finally:
        _root("chown", "-R", f"{srv.instructor}:{srv.instructor}", str(srv.course))
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if entry.name in l)
    assert "a link" in line, out
    assert (collected / NB).read_text() == before  # his earlier copy stays
    assert not any("BEGIN SOLUTION" in p.read_text() for p in collected.iterdir() if p.is_file())
    as_user(srv.bob, "rm", "-rf", str(entry), f"{entry}.kept")
