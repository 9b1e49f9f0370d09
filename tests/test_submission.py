"""What an instructor reads when nbgrader could not grade a submission."""
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
