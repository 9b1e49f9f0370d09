"""`make test` runs `pytest -n <cores, at most 8> --dist loadgroup`: tests marked with one xdist_group must
share a worker (the browser tests share one lab server; the pipeline tests one graded
class). Some pytest/pytest-xdist pairs silently ignore the marks; this catches that. And the
run's header (tests/conftest.py) says how much room the temp folder has."""
import os
import subprocess
import sys

GROUPED = '''
import os, pytest

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    with open("workers.txt", "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("i", range(4))
def test_free(i):
    pass
'''


def test_xdist_group_marks_keep_tests_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # xdist alone: starts fast
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-p", "no:cacheprovider",
                           "-n", "2", "--dist", "loadgroup", "test_grouped.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 4 and len(set(workers)) == 1, f"grouped tests ran on {workers}"


def test_the_run_says_first_how_much_the_temp_folder_has_free(monkeypatch, tmp_path, pytestconfig):
    """A full disk fails hundreds of tests far from the cause: the header says it first."""
    import shutil
    import tempfile
    import types
    from pathlib import Path

    # tests/conftest.py as pytest loaded it (every folder's conftest is a module named conftest)
    conftest = pytestconfig.pluginmanager.get_plugin(str(Path(__file__).with_name("conftest.py")))

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    for free, warned in ((2**30, True), (64 * 2**30, False)):
        monkeypatch.setattr(shutil, "disk_usage", lambda path, free=free: types.SimpleNamespace(free=free))
        line = conftest.pytest_report_header(None)
        assert line.startswith(f"temp folder {tmp_path}: {free / 2**30:.1f} GiB free"), line
        assert ("No space left on device" in line) == warned, line

    def unusable():
        raise FileNotFoundError(2, "No usable temporary directory found")
    monkeypatch.setattr(tempfile, "gettempdir", unusable)
    assert "unusable" in conftest.pytest_report_header(None)
