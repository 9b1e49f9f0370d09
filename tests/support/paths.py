"""Where the course is, for tests in any folder of tests/: ROOT is the repository's root."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
