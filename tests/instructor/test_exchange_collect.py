"""What collect takes from nbgrader's inbound folder (grader.instructor.exchange), in this
process and as this one account (tests/instructor/test_exchange_accounts.py does it with
real accounts, as root): on the local route this account's submissions stand for any
student; on the course server only the student's own account's. Either way a link, a
FIFO, an unreadable name or time, or folders nested past what a copy survives is refused
with the reason, and never hides the student's own newest submission; a submission
changed well after the time it claims gets the time it was changed."""
import datetime
import os
import pwd
import stat
import struct

import pytest

from grader.instructor import exchange

A = "03_masked_softmax"
ME = pwd.getpwuid(os.geteuid()).pw_name


def entry(inbound, student, when="2025-10-02 10:00:00.000000 UTC", tag="x", files=None):
    """A submission folder as nbgrader's submit writes it; its path."""
    folder = inbound / f"{student}+{A}+{when}+{tag}"
    folder.mkdir(parents=True)
    for name, text in (files or {f"{A}.ipynb": "{}", "timestamp.txt": when}).items():
        (folder / name).write_text(text)
    return folder


def test_on_the_local_route_this_account_stands_for_every_student(tmp_path):
    entry(tmp_path, "ada")
    entry(tmp_path, "bob")
    accepted, refused = exchange.sort_inbound(tmp_path, A, strict=False)
    assert sorted(who for who, _, _ in accepted) == ["ada", "bob"] and not refused


def test_on_the_course_server_only_the_students_own_account_counts(tmp_path):
    entry(tmp_path, "ada")  # written by this account, which is not ada's
    entry(tmp_path, ME)
    accepted, refused = exchange.sort_inbound(tmp_path, A, strict=True)
    assert [who for who, _, _ in accepted] == [ME]
    assert [r.reason for r in refused] == [f"it claims to be ada's but was written by the account {ME}"]
    # and the local route refuses what another account wrote (a uid that is not this one)
    accepted, refused = exchange.sort_inbound(tmp_path, A, strict=False, collector=os.geteuid() + 1)
    assert [who for who, _, _ in accepted] == [ME] and refused[0].student == "ada"


@pytest.mark.parametrize("trick, reason", [
    ("link", f"{A}.ipynb in it is a symbolic link"),
    ("fifo", f"{A}.ipynb in it is not a regular file"),
    ("linked folder", "it is not a folder"),
    ("bad time file", "its timestamp.txt is not a time"),
    ("deep", f"its folders are nested more than {exchange.MAX_DEPTH} deep"),
])
def test_what_cannot_be_collected_safely_is_refused_with_the_reason(tmp_path, trick, reason):
    inbound = tmp_path / "inbound"
    own = entry(inbound, "ada")  # ada's own, older
    newer = "2025-10-03 10:00:00.000000 UTC"
    if trick == "linked folder":
        (inbound / f"ada+{A}+{newer}+x").symlink_to(own)
    else:
        folder = entry(inbound, "ada", newer, files={"timestamp.txt": "yesterday-ish" if trick == "bad time file" else newer})
        if trick == "link":
            (folder / f"{A}.ipynb").symlink_to(tmp_path / "secret.ipynb")
        elif trick == "fifo":
            os.mkfifo(folder / f"{A}.ipynb")
        elif trick == "deep":
            path = folder
            for _ in range(exchange.MAX_DEPTH + 2):
                path = path / "d"
            path.mkdir(parents=True)
    accepted, refused = exchange.sort_inbound(inbound, A, strict=False)
    assert len(refused) == 1 and reason in refused[0].reason, refused
    chosen = exchange.choose(accepted)
    assert chosen["ada"][1] == own.name  # the refused one does not hide ada's own


@pytest.mark.parametrize("name, reason", [
    (f"+{A}+2025-10-02 10:00:00 UTC+x", "'' is not a student id"),
    (f"..+{A}+2025-10-02 10:00:00 UTC+x", "'..' is not a student id"),
    (f"ada+{A}+not a time+x", "its name holds no time"),
])
def test_names_collect_cannot_read_are_refused_not_fatal(tmp_path, name, reason):
    (tmp_path / name).mkdir()
    entry(tmp_path, "bob")
    accepted, refused = exchange.sort_inbound(tmp_path, A, strict=False)
    assert [who for who, _, _ in accepted] == ["bob"]
    assert len(refused) == 1 and reason in refused[0].reason, refused


def test_student_ids_with_a_plus_are_read_as_nbgrader_writes_them(tmp_path):
    entry(tmp_path, "ada+lovelace")
    plain = tmp_path / f"bob+smith+{A}+2025-10-02 10:00:00.000000 UTC"  # no random part
    plain.mkdir()
    accepted, refused = exchange.sort_inbound(tmp_path, A, strict=False)
    assert sorted(who for who, _, _ in accepted) == ["ada+lovelace", "bob+smith"] and not refused


def test_a_submission_changed_after_the_time_it_claims_is_dated_when_it_was_changed(tmp_path):
    claimed = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=2)
    folder = entry(tmp_path, "ada", claimed.strftime(exchange.TIME_FORMAT))
    late = exchange.late_write(folder, folder.name, "ada", claimed.replace(tzinfo=None))
    assert late is not None and late.written - late.claimed > datetime.timedelta(days=1)
    assert "says it was handed in" in late.line()
    on_time = entry(tmp_path, "bob", datetime.datetime.now(datetime.timezone.utc).strftime(exchange.TIME_FORMAT))
    assert exchange.late_write(on_time, on_time.name, "bob", claimed) is None  # its timestamp.txt is now


def test_the_course_servers_acl_denies_the_group_and_grants_the_instructor():
    acl = exchange.inbound_acl(1234, 567)
    version, = struct.unpack_from("<I", acl)
    entries = [struct.unpack_from("<HHI", acl, 4 + 8 * i) for i in range((len(acl) - 4) // 8)]
    assert version == 2
    assert entries == [(exchange.ACL_USER_OBJ, 7, exchange.ACL_UNDEFINED), (exchange.ACL_USER, 7, 1234),
                       (exchange.ACL_GROUP_OBJ, 0, exchange.ACL_UNDEFINED), (exchange.ACL_GROUP, 0, 567),
                       (exchange.ACL_MASK, 7, exchange.ACL_UNDEFINED), (exchange.ACL_OTHER, 0, exchange.ACL_UNDEFINED)]


def test_the_local_exchange_is_private_and_release_keeps_it_so(tmp_path):
    from grader.instructor import cli as instructor
    from support import synthetic

    root = synthetic.make_course(tmp_path / "course")
    instructor.ensure_exchange(root)
    assert stat.S_IMODE(os.stat(root / "exchange").st_mode) == 0o700
    instructor.release_exchange(root, A)
    assert stat.S_IMODE(os.stat(root / "exchange").st_mode) == 0o700  # nbgrader's release: 0777
