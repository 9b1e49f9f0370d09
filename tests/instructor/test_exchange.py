"""nbgrader's local exchange (exchange/, git-ignored) exists as soon as nbgrader reads
nbgrader_config.py, so the formgrader shows Release/Collect and students' Assignment
List loads on a fresh clone, before anything was ever released."""
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from support.paths import ROOT


def test_nbgrader_finds_the_exchange_on_a_fresh_course(tmp_path):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    exchange = tmp_path / "exchange"
    assert not exchange.exists()
    nbgrader = Path(sys.executable).with_name("nbgrader")
    proc = subprocess.run([str(nbgrader), "list"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "does not exist" not in proc.stderr and "Unwritable" not in proc.stderr, proc.stderr
    assert exchange.is_dir()
    assert stat.S_IMODE(exchange.stat().st_mode) == 0o700  # the local route's: this account's only
