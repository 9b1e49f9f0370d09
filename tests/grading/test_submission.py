"""What an instructor reads when nbgrader could not grade a submission."""
from pathlib import Path

from grader.grading.submission import _explain

NBGRADER_LOG = """[INFO] Autograding submitted/ada/05/05.ipynb
[ERROR] There was an error processing assignment: submitted/ada/05
[ERROR] Traceback (most recent call last):
      File "nbgrader/converters/base.py", line 400, in _convert_notebook
        self.convert_single_notebook(notebook_filename)
      File "zmq/backend/cython/_zmq.py", line 190, in zmq.backend.cython._zmq._check_rc
    zmq.error.ZMQError: File name too long (addr='ipc:///deep/folder/ipc/kernel-4')
[ERROR] There was an error processing assignment '05' for student 'ada'
[ERROR] Please see the the above traceback for details on the specific errors on the above failures.
Traceback (most recent call last):
  File "nbgrader/converters/base.py", line 468, in convert_notebooks
    raise NbGraderException(msg)
nbgrader.converters.base.NbGraderException: Please see the the above traceback for details on the specific errors on the above failures.
"""


def test_the_reason_names_the_exception_not_nbgraders_summary():
    reason = _explain(NBGRADER_LOG)
    assert reason.startswith("autograde failed: zmq.error.ZMQError: File name too long"), reason


def test_known_causes_are_said_in_words():
    assert "kernel died" in _explain("...\nDeadKernelError: Kernel died\n")
    assert _explain("") == "autograde failed: no log"
    assert _explain("something odd happened") == "autograde failed: something odd happened"


def test_a_kernel_that_fails_to_start_once_does_not_make_the_worker_unfit(monkeypatch):
    from grader.grading import autograde

    outcomes = iter(["SandboxError: the program stopped before it was ready", None])
    monkeypatch.setattr(autograde, "_kernel_problem", lambda name: next(outcomes))
    monkeypatch.setattr(autograde, "KERNEL_RETRY_WAIT", 0)
    autograde.worker_problem.cache_clear()
    assert autograde.worker_problem(autograde.environment(), None) is None

    monkeypatch.setattr(autograde, "_kernel_problem", lambda name: "SandboxError: no")
    autograde.worker_problem.cache_clear()
    problem = autograde.worker_problem(autograde.environment(), None)
    assert "cannot start the python3 kernel (3 tries): SandboxError: no" in problem
    autograde.worker_problem.cache_clear()


def test_only_the_throwaway_gradebook_skips_waiting_for_the_disk(tmp_path):
    """nbgrader's sessions (SQLAlchemy engines) on a submission's throwaway gradebook do not
    fsync (it is read back once and deleted); any other database, the course's gradebook,
    keeps SQLite's default."""
    from sqlalchemy import create_engine, text

    from grader.grading import submission

    scratch, course = tmp_path / "grade-x", tmp_path / "course"
    submission._scratch_gradebooks()
    submission._SCRATCH.add(str(scratch))
    modes = {}
    try:
        for folder in (scratch, course):
            folder.mkdir()
            engine = create_engine(f"sqlite:///{folder / 'gradebook.db'}")
            with engine.connect() as db:
                modes[folder.name] = db.execute(text("PRAGMA synchronous")).scalar()
            engine.dispose()
    finally:
        submission._SCRATCH.discard(str(scratch))
    assert modes == {"grade-x": 0, "course": 2}, modes


def test_scratch_gradebooks_keep_their_engine_and_never_the_last_submissions_data(tmp_path, monkeypatch):
    """Each submission's throwaway course is at the same path of its worker thread, and
    nbgrader's Gradebooks on it share one SQLAlchemy engine (its compiled statements kept
    from one submission to the next); the next submission's gradebook is a new file, and
    nothing of the last one is read from it. Any other gradebook gets engines of its own."""
    import shutil

    from nbgrader.api import Gradebook

    from grader.grading import submission

    import os
    import sys

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])  # alembic
    with Gradebook(f"sqlite:///{tmp_path / 'course.db'}"):  # the course's, copied for each submission
        pass
    submission._scratch_gradebooks()
    engines, seen = [], []
    for student in ("ada", "bo"):
        course = submission._scratch_course()
        submission._SCRATCH.add(str(course))
        try:
            (course / "gradebook.db").write_bytes((tmp_path / "course.db").read_bytes())
            for _ in range(2):  # nbgrader opens several per submission
                with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
                    engines.append(gb.engine)
                    seen.append(sorted(s.id for s in gb.students))
                    if not seen[-1]:
                        gb.add_student(student)
        finally:
            submission._close_scratch_engines(course)
            submission._SCRATCH.discard(str(course))
            shutil.rmtree(course)
    assert seen == [[], ["ada"], [], ["bo"]]  # the second submission starts from an empty gradebook
    assert all(e is engines[0] for e in engines)
    assert len(engines[0]._compiled_cache) > 0

    own = []
    for _ in range(2):
        with Gradebook(f"sqlite:///{tmp_path / 'course.db'}") as gb:
            own.append(gb.engine)
    assert own[0] is not own[1] and engines[0] not in own


def test_a_killed_process_s_scratch_folder_is_removed_by_the_next_one(tmp_path, monkeypatch):
    """A grading process removes its scratch folder when it ends; one that is killed cannot
    (a Dask worker stopped by its nanny, a machine lost), so the next process removes every
    scratch folder whose marker no live process holds locked, and only those."""
    import signal
    import subprocess
    import sys
    import tempfile

    from grader.grading import submission
    from support.paths import ROOT

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    maker = ("import sys, time; sys.path.insert(0, sys.argv[1]); import tempfile; tempfile.tempdir = sys.argv[2]\n"
             "from grader.grading import submission\nprint(submission._scratch_course(), flush=True)\ntime.sleep(600)")
    procs = [subprocess.Popen([sys.executable, "-c", maker, str(ROOT), str(tmp_path)], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    killed, alive = [Path(p.stdout.readline().strip()).parent for p in procs]
    not_ours = tmp_path / f"{submission.SCRATCH_PREFIX}not-ours"
    not_ours.mkdir()  # no marker: being made, or someone else's
    try:
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        assert killed.is_dir() and (killed / submission.IN_USE).is_file()  # left behind
        monkeypatch.setattr(submission, "_BASE", [])
        monkeypatch.setattr(submission, "_HELD", [])
        mine = submission._scratch_course().parent
        assert not killed.exists() and alive.is_dir() and not_ours.is_dir() and mine.is_dir()
        assert (mine / submission.IN_USE).is_file() and not (mine / (submission.IN_USE + ".new")).exists()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        for held in submission._HELD:
            held.close()


def test_a_worker_killed_while_it_tries_a_kernel_leaves_no_folder_behind(tmp_path, monkeypatch):
    """A worker checks once that it can start a kernel (autograde.worker_problem), in a folder
    of its scratch base: killed meanwhile (its nanny, a lost machine), it leaves that folder
    to the next process's sweep, not in the temp folder for good."""
    import json
    import os
    import subprocess
    import sys
    import tempfile
    import time

    from grader.grading import submission
    from support.paths import ROOT
    from support.processes import kill_tree

    spec = tmp_path / "jupyter" / "kernels" / "hang"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({  # a kernel that never becomes ready
        "argv": [sys.executable, "-c", "import time; time.sleep(600)", "{connection_file}"],
        "display_name": "hang", "language": "python"}))
    temp = tmp_path / "temp"
    temp.mkdir()
    worker = ("import sys, tempfile; sys.path.insert(0, sys.argv[1]); tempfile.tempdir = sys.argv[2]\n"
              "from grader.grading import autograde\nautograde._kernel_problem('hang')")
    proc = subprocess.Popen([sys.executable, "-c", worker, str(ROOT), str(temp)], start_new_session=True,
                            env={**os.environ, "JUPYTER_PATH": str(tmp_path / "jupyter")})
    try:
        deadline = time.monotonic() + 120
        while not list(temp.glob(f"{submission.SCRATCH_PREFIX}*/worker-check-*")):
            assert not list(temp.glob("worker-check-*")), "the check's folder is outside the swept scratch base"
            assert proc.poll() is None and time.monotonic() < deadline, "the worker never tried its kernel"
            time.sleep(0.1)
    finally:
        # the worker and the kernel it started: jupyter_client starts a kernel in a session of
        # its own, which the worker's process group does not reach (left alone, it would
        # sleep on after the suite)
        kill_tree(proc.pid)
        proc.wait()
    assert list(temp.glob(f"{submission.SCRATCH_PREFIX}*/worker-check-*"))  # left behind by the kill
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(submission, "_BASE", [])
    monkeypatch.setattr(submission, "_HELD", [])
    try:
        mine = Path(submission.scratch_folder("worker-check-"))
        assert [p for p in temp.rglob("worker-check-*")] == [mine]  # the killed worker's is gone
    finally:
        for held in submission._HELD:
            held.close()
