"""Installs the course into a virtual environment: torch first (the build this machine
needs), then the packages at the versions of requirements.lock, with uv or pip, showing
their progress. The course's install.mk and the student bundle's Makefile run it with the
environment's own Python; it uses the standard library only, so it runs before anything
is installed:

    python installer.py torch --venv .venv --lock requirements.lock [--index-url URL]
                              [--spec SPEC] [--allow-cuda] [--installer auto|uv|pip]
    python installer.py packages --venv .venv --lock requirements.lock -r requirements.txt
                              [--editable .] [--wheel FILE] [--remove NAME ...] [--compile]

Which torch: where the machine has an NVIDIA driver, or is not Linux, PyPI's build (on
macOS and Windows it has no CUDA packages). On Linux without a driver, the CPU build
`torch==<version>+cpu`: where your pip configuration names package sources of its own
(an index, find-links), first from those; then from PyTorch's CPU wheel index (--index-url),
after checking that the index can be reached and has that build. If neither has it, the
install stops and says exactly why (the index cannot be reached, or it lacks that build)
instead of downloading PyPI's CUDA build (several GB): --spec (a wheel file or another
requirement) or --allow-cuda (make ... ALLOW_CUDA=1) asks for something else.

Which installer (--installer auto): uv, given the package sources and constraints of pip's
configuration as its own arguments (uv does not read pip's configuration, so a wheel folder
or an extra index configured for pip would otherwise be passed over), with pip's choice of
the best version among them; pip where that configuration replaces PyPI (`index-url`,
`no-index`: a mirror or an offline index). uv itself is installed with pip, at the version
requirements.lock gives; if that fails, or uv cannot install from pip's sources, pip does
the rest.
"""
import argparse
import html.parser
import os
import platform
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA_SIZE = "about 3 GB"  # torch's CUDA build with its nvidia-* packages, downloaded
PROBE_TIMEOUT = 15  # seconds for the torch index to answer
SOURCE_KEYS = ("index-url", "extra-index-url", "find-links", "no-index")  # pip settings uv would not see


class InstallError(RuntimeError):
    """The install cannot go on; the message says why and what to do."""


# --- what this machine is ---------------------------------------------------------------

def nvidia_driver():
    """The nvidia-smi program where an NVIDIA driver is installed, else None."""
    return shutil.which("nvidia-smi")


def wants_cpu_build(system=None, driver=None):
    """True where PyPI's torch would be the CUDA build that this machine cannot use: Linux
    without an NVIDIA driver."""
    system = platform.system() if system is None else system
    return system == "Linux" and not driver


def python_tag():
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def machine():
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())


# --- the torch index ----------------------------------------------------------------------

class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.names = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href") or ""
            self.names.append(urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1]))


def _host(url):
    return urllib.parse.urlsplit(url).netloc or url


def _ssl_context(cert=None):
    if cert and Path(cert).exists():
        return ssl.create_default_context(cafile=cert)
    return ssl.create_default_context()


class IndexAnswer:
    """What the torch index said: reachable or not (and why), and the torch files it lists."""

    def __init__(self, url, reachable, reason="", files=()):
        self.url, self.reachable, self.reason, self.files = url, reachable, reason, list(files)

    def builds(self, version, tag=None, arch=None):
        """The files of torch==version for this Python and machine."""
        tag, arch = tag or python_tag(), arch or machine()
        prefix = f"torch-{version}-{tag}-"
        return [f for f in self.files if f.startswith(prefix) and f.endswith(".whl") and arch in f]

    def versions(self, tag=None, arch=None):
        """The torch versions the index has for this Python and machine, oldest first."""
        tag, arch = tag or python_tag(), arch or machine()
        found = {m.group(1) for f in self.files if arch in f
                 for m in [re.match(rf"torch-([^-]+)-{tag}-", f)] if m}

        def key(v):
            return [int(p) if p.isdigit() else 0 for p in re.split(r"[.+]", v)]
        return sorted(found, key=key)


def probe_index(url, timeout=PROBE_TIMEOUT, cert=None):
    """Ask a PEP 503 index for its torch page. Unreachable (with the reason in words) or
    the torch files it lists."""
    page = url.rstrip("/") + "/torch/"
    request = urllib.request.Request(page, headers={"Accept": "text/html"})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=_ssl_context(cert)) as reply:
            text = reply.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return IndexAnswer(url, True, f"it has no torch page ({page}: 404 Not Found)")
        return IndexAnswer(url, False, f"{page} answered HTTP {err.code} {err.reason}")
    except urllib.error.URLError as err:
        return IndexAnswer(url, False, _why_unreachable(url, err.reason, timeout))
    except (socket.timeout, TimeoutError):
        return IndexAnswer(url, False, f"{_host(url)} did not answer within {timeout} s")
    except (OSError, ValueError) as err:
        return IndexAnswer(url, False, f"{type(err).__name__}: {err}")
    parser = _Links()
    parser.feed(text)
    return IndexAnswer(url, True, files=parser.names)


def _why_unreachable(url, reason, timeout):
    host = _host(url)
    if isinstance(reason, socket.gaierror):
        return (f"the host name {urllib.parse.urlsplit(url).hostname} could not be resolved "
                f"(no network, or no DNS for it here: {reason.strerror or reason})")
    if isinstance(reason, ConnectionRefusedError):
        return f"{host} refused the connection"
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return f"{host} did not answer within {timeout} s"
    if isinstance(reason, ssl.SSLError):
        return f"the TLS connection to {host} failed ({reason})"
    return f"{host} could not be reached ({reason})"


# --- pip's configuration -------------------------------------------------------------------

def pip_settings(python):
    """{key: value} of pip's effective configuration (files and PIP_* variables), from
    `pip config list`."""
    proc = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True)
    settings = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^[^.]*\.([a-z-]+)='(.*)'$", line.strip())
        if m:
            settings[m.group(1)] = m.group(2)
    return settings


def own_sources(settings):
    """pip's settings that name package sources of the user's (which uv would not see)."""
    return {k: v for k, v in settings.items() if k in SOURCE_KEYS}


# pip settings that uv takes as its own arguments: extra package sources (a wheel folder,
# another index) and constraints; pip's `index-url` and `no-index` replace PyPI, which uv's
# arguments say differently, so there pip stays the installer
UV_ARGUMENTS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links",
                "constraint": "--constraint"}


def uv_arguments(settings):
    """uv's arguments for pip's settings of package sources and constraints (each may list
    several values, as pip's configuration does), or None where pip has a source setting
    uv's arguments cannot say the same way."""
    sources = own_sources(settings)
    if any(k not in UV_ARGUMENTS for k in sources):
        return None
    args = []
    for key, flag in UV_ARGUMENTS.items():
        for value in settings.get(key, "").split():
            args += [flag, value]
    return args


# --- installing ------------------------------------------------------------------------------

def say(text):
    print(f"==> {text}", flush=True)


def run(cmd, env=None, quiet=False):
    """Run an installer command, its own progress shown (or hidden when quiet); True if it
    succeeded."""
    if not quiet:
        print("    " + " ".join(str(c) for c in cmd), flush=True)
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run([str(c) for c in cmd], env=env, stdout=out, stderr=out).returncode == 0


def locked(lock):
    pins = {}
    for line in Path(lock).read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return pins


class Installer:
    """pip or uv, installing into one virtual environment."""

    def __init__(self, venv, lock, choice="auto"):
        self.venv, self.lock = Path(venv), Path(lock)
        self.python = str(self.venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
        self.settings = pip_settings(self.python)
        self.sources = own_sources(self.settings)
        self.uv_args = uv_arguments(self.settings)  # those, as uv's arguments (None: uv cannot be told)
        self.name = self._choose(choice)
        self.env = dict(os.environ)
        if self.name == "uv" and self.settings.get("cert") and "SSL_CERT_FILE" not in self.env:
            self.env["SSL_CERT_FILE"] = self.settings["cert"]  # pip's certificates, for uv too
        if self.name == "uv" and self.sources:
            # as pip does: the best version whichever source has it (uv's default takes the
            # first source that has the package at all)
            self.env.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")

    def _choose(self, choice):
        if choice == "pip":
            return "pip"
        if choice == "auto" and self.sources and self.uv_args is None:
            say("installer: pip (your pip configuration names package sources uv would not read: "
                + ", ".join(sorted(self.sources)) + ")")
            return "pip"
        if self._uv():
            if self.sources:
                say("installer: uv, given your pip configuration's package sources ("
                    + ", ".join(sorted(self.sources)) + ")")
            return "uv"
        if choice == "uv":
            raise InstallError("uv could not be installed with pip (see above); INSTALLER=pip installs with pip")
        say("installer: pip (uv could not be installed, see above)")
        return "pip"

    @property
    def uv_path(self):
        return self.venv / ("Scripts/uv.exe" if os.name == "nt" else "bin/uv")

    def _uv(self):
        version = locked(self.lock).get("uv")
        spec = f"uv=={version}" if version else "uv"
        if self.uv_path.exists() and self._uv_version() == version:
            say(f"installer: uv {version}")
            return True
        say(f"installer: uv, installing {spec} with pip first")
        ok = run([self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-compile", spec])
        return ok and self.uv_path.exists()

    def _uv_version(self):
        try:
            out = subprocess.run([str(self.uv_path), "--version"], capture_output=True, text=True).stdout
        except OSError:
            return None
        return out.split()[1] if len(out.split()) > 1 else None

    def install_command(self, *args):
        if self.name == "uv":
            return [self.uv_path, "pip", "install", "--python", self.python, *(self.uv_args or []), *args]
        return [self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-compile", *args]

    def install(self, *args, quiet=False, hand_over=True):
        """Install with the chosen installer; True if it succeeded. hand_over=False where a
        failure is an answer (torch missing from a source asked), not uv failing."""
        if run(self.install_command(*args), env=self.env, quiet=quiet):
            return True
        if self.name == "uv" and self.sources and hand_over:
            # uv was given the sources of pip's configuration: where it cannot install from
            # them, pip (which reads that configuration itself) does, this time and after
            say("uv could not install this from your pip configuration's package sources"
                + ("" if quiet else " (see above)") + "; pip instead, from here on")
            self.name = "pip"
            return run(self.install_command(*args), env=self.env, quiet=quiet)
        return False

    def pip_install(self, *args, quiet=False):
        """Always pip: where the user's own pip configuration is what is asked."""
        return run([self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-compile", *args],
                   quiet=quiet)

    def uninstall(self, names):
        if self.name == "uv":
            cmd = [self.uv_path, "pip", "uninstall", "--python", self.python, *names]
        else:
            cmd = [self.python, "-m", "pip", "uninstall", "--yes", "--disable-pip-version-check", *names]
        return run(cmd, env=self.env, quiet=True)


def install_torch(inst, version, index_url=CPU_INDEX, spec="", allow_cuda=False, system=None,
                  driver=None):
    """Install torch into the environment; InstallError with the reason and the way out
    where the CPU build is needed and cannot be had."""
    if spec:
        say(f"torch: {spec} (TORCH_SPEC)")
        if not inst.install(spec):
            raise InstallError(f"installing TORCH_SPEC={spec} failed (see above)")
        return "spec"
    if not wants_cpu_build(system, driver):
        why = f"NVIDIA driver {driver}" if driver else f"{system or platform.system()}: PyPI's build"
        say(f"torch {version} from PyPI ({why})")
        if not inst.install(f"torch=={version}"):
            raise InstallError(f"installing torch=={version} failed (see above)")
        return "pypi"
    wanted = f"torch=={version}+cpu"
    if inst.sources:
        say(f"torch {version}+cpu (CPU build: no NVIDIA driver): asking your pip's own sources "
            f"({', '.join(sorted(inst.sources))})")
        # uv given those sources first; pip (which reads them itself) where uv finds nothing or
        # cannot be given them. Torch missing there is an answer: uv keeps the rest of the install
        args = ("--no-deps", "--constraint", inst.lock, wanted)
        by_uv = inst.name == "uv" and inst.uv_args is not None
        if (by_uv and inst.install(*args, quiet=True, hand_over=False)) or inst.pip_install(*args, quiet=True):
            say(f"torch {version}+cpu (CPU build): found in your pip's sources")
            return "pip"
        say(f"torch {version}+cpu: not found in your pip's sources; trying {index_url}")
    else:
        say(f"torch {version}+cpu (CPU build: no NVIDIA driver): from {index_url}")
    answer = probe_index(index_url, cert=inst.settings.get("cert"))
    if answer.reachable and not answer.reason and answer.builds(f"{version}+cpu"):
        if inst.install("--no-deps", "--index-url", index_url, wanted):
            say(f"torch {version}+cpu (CPU build): installed from {index_url}")
            return "index"
        raise InstallError(f"{index_url} lists {wanted} for this Python, but installing it failed (see above)")
    if answer.reachable:
        have = answer.versions()
        listed = (f"it has {', '.join(have[-6:])} for Python {python_tag()} on {machine()}" if have
                  else f"it has no torch for Python {python_tag()} on {machine()}")
        problem = (f"{index_url} can be reached, but {answer.reason or listed}: "
                   f"torch {version}+cpu, the version requirements.lock gives, is missing there")
    else:
        problem = f"the torch index {index_url} cannot be reached from this machine: {answer.reason}"
    if allow_cuda:
        say(f"{problem}. ALLOW_CUDA=1: installing PyPI's torch=={version}, the CUDA build with its "
            f"nvidia-* packages ({CUDA_SIZE})")
        if not inst.install(f"torch=={version}"):
            raise InstallError(f"installing torch=={version} failed (see above)")
        return "cuda"
    raise InstallError(
        f"{problem}.\n"
        f"Stopped before PyPI's torch=={version}: on Linux it is the CUDA build with its nvidia-* "
        f"packages ({CUDA_SIZE}), and this machine has no NVIDIA driver to use them. Either:\n"
        f"  - TORCH_INDEX_URL=<a CPU wheel index that has torch {version}+cpu>, or\n"
        f"  - TORCH_SPEC=<a torch {version} wheel file, or another requirement>, or\n"
        f"  - ALLOW_CUDA=1 to install the CUDA build all the same.")


# What --compile leaves to Python (compiled the first time something imports it): the
# packages' own test suites, pip and networkx (which only torch's compiler backend imports,
# never the course): about a quarter of the environment's files, never imported by the
# course, its tests or a grading kernel. Matched below site-packages only, so that a checkout
# in a folder named test/ still compiles.
NOT_COMPILED = r"site-packages[/\\](?:(?:pip|networkx)[/\\]|(?:[^/\\]+[/\\])*tests?[/\\])"


def install_packages(inst, requirements=(), editable=(), wheels=(), remove=(), compile_=False,
                     unlocked=False):
    """The locked packages (requirements with the lock as constraints; what was installed
    before brought to the locked versions), then the project itself. unlocked: the newest
    versions requirements allow (make lock, which then records them)."""
    if requirements:
        args = []
        for r in requirements:
            args += ["-r", r]
        if unlocked:
            say(f"packages of {', '.join(map(str, requirements))}, newest allowed versions, with {inst.name}")
        else:
            say(f"packages of {', '.join(map(str, requirements))} at the versions of {inst.lock} "
                f"({len(locked(inst.lock))} locked) with {inst.name}")
            args = ["--constraint", inst.lock, *args]
        if not inst.install(*args):
            raise InstallError("installing the packages failed (see above)")
        if not unlocked and not inst.install("--no-deps", "-r", inst.lock, quiet=True):
            raise InstallError(f"bringing the environment from before to {inst.lock} failed")
    for wheel in wheels:
        say(f"{Path(wheel).name} with its dependencies at the versions of {inst.lock}")
        if not inst.install("--constraint", inst.lock, wheel):
            raise InstallError(f"installing {wheel} failed (see above)")
    for path in editable:
        say(f"the project in {path} itself, editable (changes to its code apply at once)")
        if not inst.install("--no-deps", "-e", path):
            raise InstallError(f"installing {path} failed (see above)")
    if remove:
        inst.uninstall(list(remove))
    if compile_:
        lib = inst.venv / ("Lib" if os.name == "nt" else "lib")
        own = [folder for path in editable for folder in project_packages(path)]
        skip = re.compile(NOT_COMPILED)
        files = sum(1 for folder in [lib, *own] for f in folder.rglob("*.py") if not skip.search(str(f)))
        say(f"byte-compiling {files} files of {inst.venv}"
            + (f" and of the project's packages ({', '.join(f.name for f in own)})" if own else "")
            + f" on {os.cpu_count()} cores (not the packages' own tests, pip or networkx)")
        started = time.monotonic()
        subprocess.run([inst.python, "-m", "compileall", "-qq", "-j", "0", "-x", NOT_COMPILED, str(lib),
                        *map(str, own)])
        say(f"byte-compiled in {time.monotonic() - started:.0f} s")


def project_packages(path):
    """The package folders of the project at path, as its pyproject.toml finds them
    ([tool.setuptools.packages.find] include): an editable install leaves them uncompiled, and
    where Python may not write bytecode (PYTHONDONTWRITEBYTECODE set, a grading sandbox's
    read-only view of the course) every process that imports them compiles them again
    (measured: 0.2 s of CPU for a kernel's `from grader import check_...`, 0.4 s for a
    grading worker). A Python without tomllib (before 3.11), or no such table: none."""
    try:
        import fnmatch
        import tomllib

        config = tomllib.loads((Path(path) / "pyproject.toml").read_text(encoding="utf-8"))
    except (ImportError, OSError, ValueError):
        return []
    patterns = config.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {}).get("include", [])
    return [folder for folder in sorted(Path(path).iterdir())
            if (folder / "__init__.py").is_file() and any(fnmatch.fnmatch(folder.name, p) for p in patterns)]


def cuda_build_without_driver():
    """A note where the installed torch is a CUDA build on Linux without an NVIDIA driver
    (several GB it does not use), saying how to get the CPU build; else None."""
    try:
        import torch
    except ImportError:
        return None
    if torch.version.cuda is None or not wants_cpu_build(driver=nvidia_driver()):
        return None
    version = torch.__version__.split("+")[0]
    return (f"torch {torch.__version__} is the CUDA build (with its nvidia-* packages, several GB), "
            f"and this machine has no NVIDIA driver: it runs on the CPU all the same. The CPU build is "
            f"enough and much smaller: pip install --force-reinstall --no-deps torch=={version}+cpu "
            f"--index-url {CPU_INDEX}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["torch", "packages"])
    parser.add_argument("--venv", default=".venv")
    parser.add_argument("--lock", default="requirements.lock")
    parser.add_argument("--installer", default="auto", choices=["auto", "uv", "pip"])
    parser.add_argument("--version", help="torch's version (default: requirements.lock's)")
    parser.add_argument("--index-url", default=CPU_INDEX)
    parser.add_argument("--spec", default="")
    parser.add_argument("--allow-cuda", default="", help="non-empty: install PyPI's CUDA build where the CPU build cannot be had")
    parser.add_argument("--nvidia-driver", default=None, help="the NVIDIA driver found (empty: none)")
    parser.add_argument("--system", default=None)
    parser.add_argument("-r", "--requirement", action="append", default=[])
    parser.add_argument("--editable", action="append", default=[])
    parser.add_argument("--wheel", action="append", default=[])
    parser.add_argument("--remove", nargs="*", default=[])
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--unlocked", action="store_true", help="without the lock's versions (make lock)")
    args = parser.parse_args(argv)
    try:
        inst = Installer(args.venv, args.lock, args.installer)
        if args.what == "torch":
            version = args.version or locked(args.lock).get("torch")
            if not version:
                raise InstallError(f"{args.lock} has no torch line")
            driver = nvidia_driver() if args.nvidia_driver is None else args.nvidia_driver
            install_torch(inst, version, args.index_url, args.spec, bool(args.allow_cuda and args.allow_cuda != "0"),
                          args.system, driver)
        else:
            install_packages(inst, args.requirement, args.editable, args.wheel, args.remove, args.compile,
                             args.unlocked)
    except InstallError as err:
        print(f"\nINSTALL STOPPED: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
