"""Grades you can trust: honest answers written any way get full marks; attacks score 0,
touch nobody else, change no file of the course, and never stop the run."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.classes import HONEST_MINOR, CLASS_ASSIGNMENT as A, SECRET_ENV
from support.gradebook import db_scores
from support import synthetic
from grader.grading import layout
from grader.grading.autograde import Grading
from grader.grading.status import Status

grouped = pytest.mark.xdist_group("graded_class")


@pytest.fixture
def graded(graded_class):
    root, _ = graded_class
    return root, Status(root), db_scores(root)


@grouped
@pytest.mark.parametrize("variant", sorted(synthetic.HONEST_VARIANTS) + [HONEST_MINOR])
def test_honest_answer_written_another_way_gets_full_marks(graded, variant):
    root, status, scores = graded
    student = variant if variant == HONEST_MINOR else f"honest_{variant}"
    entry = status.get(student, A)
    assert entry["status"] == "graded", entry.get("reason")
    failed = {cell: [o["message"] for o in outs if not o["passed"]]
              for cell, outs in entry["notebooks"][A]["outcomes"].items()
              if not all(o["passed"] for o in outs)}
    assert failed == {}
    assert scores[student] == 10.0


@grouped
@pytest.mark.parametrize("attack", sorted(synthetic.ATTACKS))
def test_attack_scores_zero(graded, attack, record_property):
    root, status, scores = graded
    entry = status.get(f"attack_{attack}", A)
    if entry["status"] == "graded":
        assert scores[f"attack_{attack}"] == 0.0, entry
    else:  # os._exit kills the kernel: no grade at all, and a reason
        assert attack == "os_exit" and "kernel died" in entry["reason"]


@grouped
def test_attacks_change_no_other_grade_and_no_course_file(graded, record_property):
    root, status, scores = graded
    honest = {f"honest_{v}" for v in synthetic.HONEST_VARIANTS} | {HONEST_MINOR, "correct"}
    assert {s: scores[s] for s in honest} == {s: 10.0 for s in honest}
    assert scores["softmax_wrong_dim"] == 2.0  # a wrong answer keeps exactly its own score
    attacks = [f"attack_{a}" for a in synthetic.ATTACKS]
    caught = sum(scores.get(a, 0.0) == 0.0 for a in attacks)
    record_property("figure", f"attacks tried {len(attacks)} / scoring 0 {caught} / honest "
                              f"answers at full marks {sum(scores[s] == 10.0 for s in honest)}/{len(honest)}")
    changed = subprocess.run(["git", "status", "--porcelain", "--", "grader", "notebook_helpers", "data"],
                             cwd=layout.ROOT, capture_output=True, text=True).stdout
    assert changed == ""
    site = [p for p in sys.path if p.endswith("site-packages")]
    assert not any((Path(p) / "attack_marker.py").exists() for p in site)
    assert not (Path("/tmp") / "attack-daemon-alive").exists()


@grouped
def test_nothing_a_submission_starts_outlives_it(graded):
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "attack-daemon" not in out
    before = Path("/tmp/attack-daemon-alive")
    time.sleep(1.5)
    assert not before.exists()


@grouped
def test_the_instructors_environment_never_reaches_a_student(graded):
    root, status, _ = graded
    for path in (root / "autograded" / "attack_read_environment").rglob("*"):
        if path.is_file():
            assert "do-not-leak-7f3a" not in path.read_text(errors="replace"), path
    assert SECRET_ENV not in os.environ


@grouped
def test_malformed_replies_are_that_students_failure_with_a_reason(graded):
    root, status, _ = graded
    for attack, words in {"junk_reply": "not a saved tensor", "compressed_bomb": "unpacks to",
                          "oversized_reply": "MiB", "sparse_reply": "dense", "nested_reply": "dense",
                          "quantized_reply": "dense", "sleeps": "no answer within"}.items():
        entry = status.get(f"attack_{attack}", A)
        messages = " ".join(o["message"] for outs in entry["notebooks"][A]["outcomes"].values()
                            for o in outs)
        assert words in messages, (attack, messages[:500])


@pytest.mark.parametrize("kind", ["symlink", "fifo", "symlinked notebook"])
def test_links_fifos_and_devices_in_a_submission_are_refused_before_reading(tmp_path, kind):
    from grader.grading.submission import Refused, read_submission

    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / f"{A}.ipynb").write_text("{}")
    if kind == "symlink":
        os.symlink("/etc/passwd", folder / "notes.txt")
    elif kind == "fifo":
        os.mkfifo(folder / "pipe")
    else:
        (folder / f"{A}.ipynb").unlink()
        os.symlink("/etc/hostname", folder / f"{A}.ipynb")
    with pytest.raises(Refused) as info:
        read_submission(folder)
    assert ("symbolic link" if "link" in kind else "FIFO") in str(info.value)


def test_victims_graded_right_after_attackers_in_one_worker_keep_their_grades(tmp_path):
    """JOBS=1: each attacker is followed by an honest student in the same worker."""
    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    order = []
    for i, attack in enumerate(["daemon", "raise_own_points", "forge_pipes"]):
        synthetic.make_attack(root, f"a{i}_{attack}", attack)
        synthetic.make_submission(root, f"a{i}_victim", A, "correct")
        order += [f"a{i}_{attack}", f"a{i}_victim"]
    folder = root / "submitted" / "z_fifo" / A
    folder.mkdir(parents=True)
    shutil.copy(root / "submitted" / "a0_victim" / A / f"{A}.ipynb", folder)
    os.mkfifo(folder / "pipe")
    summary = Grading(root, jobs=1, budget=90, call_timeout=3).run(progress=False)
    scores = db_scores(root)
    assert {s: scores[s] for s in order} == {s: (10.0 if s.endswith("victim") else 0.0) for s in order}
    reason = Status(root).get("z_fifo", A)["reason"]
    assert "FIFO" in reason and summary["needs_attention"] == 1


ONE_PATH = {"correct": ("variant", "correct"), "wrong": ("variant", "softmax_wrong_dim"),
            "cheat": ("attack", "rebind_checks"), "helper": ("honest", "helper_cell")}


def _one_path_course(path):
    from grader.grading.layout import add_students, load_config

    root = synthetic.make_course(path, gradebook=True)
    make = {"variant": lambda s, v: synthetic.make_submission(root, s, A, v),
            "attack": lambda s, v: synthetic.make_attack(root, s, v),
            "honest": lambda s, v: synthetic.make_honest(root, s, v)}
    for student, (kind, variant) in ONE_PATH.items():
        make[kind](student, variant)
    add_students(root, load_config(root), sorted(ONE_PATH))
    return root


def _formgrader(root):
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "one-path-token"
    proc = subprocess.Popen([sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root",
                             f"--port={port}", f"--IdentityProvider.token={token}",
                             f"--ServerApp.root_dir={root}"], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def post(path):
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=b"", method="POST",
                                     headers={"Authorization": f"token {token}"})
        return urllib.request.urlopen(req, timeout=600).read()

    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5)
            break
        except OSError:
            time.sleep(0.5)
    return proc, post


@pytest.mark.usefixtures("commands_share_the_template")
def test_formgrader_nbgrader_and_make_autograde_grade_the_same(tmp_path):
    import json

    expected = {"correct": 10.0, "wrong": 2.0, "cheat": 0.0, "helper": 10.0}
    ours = _one_path_course(tmp_path / "ours")
    Grading(ours, jobs=1, budget=90).run(progress=False)  # one worker: each costs about 5 s of CPU to start
    assert db_scores(ours) == expected

    plain = _one_path_course(tmp_path / "plain")
    out = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", A, "--force"], cwd=plain,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert db_scores(plain) == expected

    button = _one_path_course(tmp_path / "button")
    proc, post = _formgrader(button)
    try:
        for student in ONE_PATH:  # what the formgrader's Autograde button sends
            reply = json.loads(post(f"/formgrader/api/submission/{A}/{student}/autograde"))
            assert reply["success"], reply.get("error", "")[-2000:]
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert db_scores(button) == expected


def test_a_compressed_bomb_is_refused_before_it_is_unpacked(tmp_path):
    import zipfile

    import torch

    from grader.grading.channel import MalformedReply, read_reply

    bomb = tmp_path / "reply.pt"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\0" * (80 * 2**20))
    assert bomb.stat().st_size < 2**20
    with pytest.raises(MalformedReply, match="unpacks to 80 MiB"):
        read_reply(bomb, torch)
    link = tmp_path / "link.pt"
    link.symlink_to(bomb)
    with pytest.raises(MalformedReply, match="no answer"):
        read_reply(link, torch)
