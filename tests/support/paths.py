"""Where the course is, for tests in any folder of tests/: ROOT is the repository's root."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def script(name):
    """The module of scripts/<name>.py (scripts/ is no package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
