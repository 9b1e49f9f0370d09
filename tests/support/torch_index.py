"""A machine whose pip reaches only PyPI, and a local stand-in for PyTorch's CPU wheel index
(which this machine cannot reach; PyPI's torch is the multi-GB CUDA build): what the
install tests (tests/install/test_install.py, tests/install/test_student_package.py) and
scripts/bench_install.py set up."""
import contextlib
import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELS = Path("/opt/wheels")  # where this machine's own pip configuration finds torch's CPU build
CUDA = re.compile(r"^(nvidia-|triton)")


def name(text):
    return re.sub(r"[-_.]+", "-", text).lower()


def locked():
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    return {name(n): v for n, v in pins.items()}


def torch_wheel():
    """This machine's torch CPU wheel of the locked version for this Python, or None."""
    version = locked()["torch"]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = sorted(WHEELS.glob(f"torch-{version}+cpu-{tag}-*.whl"))
    return wheels[0] if wheels else None


class _Index(http.server.SimpleHTTPRequestHandler):
    """A PEP 503 index over HTTP that records what was fetched from it."""

    def __init__(self, *args, fetched, **kwargs):
        self.fetched = fetched
        super().__init__(*args, **kwargs)

    def do_GET(self):
        self.fetched.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder):
    """(url, fetched paths) of an HTTP server over folder, for as long as the block runs."""
    fetched = []
    handler = functools.partial(_Index, directory=str(folder), fetched=fetched)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/", fetched
    finally:
        server.shutdown()
        thread.join()


def write_index(folder, wheel):
    """A PEP 503 index in folder whose /torch/ lists wheel."""
    project = Path(folder) / "torch"
    project.mkdir(parents=True, exist_ok=True)
    link = project / wheel.name
    if not link.exists():
        link.symlink_to(wheel)
    href = wheel.name.replace("+", "%2B")
    (project / "index.html").write_text(f'<!DOCTYPE html><html><body><a href="{href}">{wheel.name}</a></body></html>\n')
    return folder


def pypi_only_env(folder):
    """The environment of a machine whose pip reaches only PyPI: an empty configuration file
    in place of this machine's (which finds the CPU build in a local wheel folder), and no
    PIP_* variables. Checked: pip then names no index or wheel folder of its own."""
    config = Path(folder) / "pip.conf"
    config.write_text("")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_")) and k != "VIRTUAL_ENV"}
    env.update(PIP_CONFIG_FILE=str(config), PIP_DISABLE_PIP_VERSION_CHECK="1")
    shown = subprocess.run([sys.executable, "-m", "pip", "config", "list"], env=env,
                           capture_output=True, text=True, check=True).stdout
    assert not re.search(r"find-links|index-url", shown), shown
    return env
