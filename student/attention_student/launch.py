"""Copy the course's notebooks into a folder of the student's, then open JupyterLab there.

    attention-student [FOLDER] [--no-browser] [--port N] [--copy-only] [-- JUPYTER LAB OPTIONS]
    python -m attention_student [FOLDER] ...

FOLDER (default: self-attention-course, in the current folder) is created if needed. A
notebook already in it is never overwritten, so running the command again keeps your work
and only adds notebooks you do not have yet (delete your copy of one to get a fresh one).
No shell, make or terminal commands are needed beyond this one: it runs the same on
Windows, macOS and Linux.
"""
import argparse
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from attention_student import DISTRIBUTION, __version__

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
DEFAULT_FOLDER = "self-attention-course"


@dataclass
class Copied:
    """What copy_notebooks did: the notebooks it wrote, and those it left as they were."""
    folder: Path
    new: list = field(default_factory=list)
    kept: list = field(default_factory=list)

    def summary(self):
        if not self.new:
            return f"{self.folder}: all {len(self.kept)} notebooks are there already (yours, left as they are)"
        kept = f"; {len(self.kept)} already there, left as they are" if self.kept else ""
        return f"{self.folder}: copied {len(self.new)} notebook(s){kept}"


def copy_notebooks(folder, source=NOTEBOOKS):
    """Copy each notebook of source that folder does not have yet (same sub-folders);
    never overwrites a file, even one that appears meanwhile."""
    folder = Path(folder).expanduser().resolve()
    done = Copied(folder)
    notebooks = sorted(source.glob("*/*.ipynb"))
    if not notebooks:
        raise SystemExit(f"{DISTRIBUTION}: no notebooks in {source}: the package is incomplete; "
                         "install it again")
    for nb in notebooks:
        target = folder / nb.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(target, "xb") as out:  # "x": fails if the file exists, never truncates it
                out.write(nb.read_bytes())
        except FileExistsError:
            done.kept.append(target)
            continue
        done.new.append(target)
    return done


def environment_notes():
    """(problems that stop the lab, notes worth reading) about this Python environment."""
    problems, notes = [], []
    try:
        metadata.version("jupyterlab")
    except metadata.PackageNotFoundError:
        problems.append(f"JupyterLab is not installed in this Python environment ({sys.prefix}). Install "
                        f"the package with its lab: pip install \"{DISTRIBUTION}[lab]\" (or pip install jupyterlab)")
    try:
        version = metadata.version("torch")
        cuda = any(r.startswith("nvidia-") for r in metadata.requires("torch") or ())
    except metadata.PackageNotFoundError:
        problems.append("torch is not installed in this Python environment; see the README for the "
                        "command that installs it")
    else:
        from attention_student.installer import CPU_INDEX, nvidia_driver, wants_cpu_build

        if cuda and wants_cpu_build(driver=nvidia_driver()):
            plain = version.split("+")[0]
            notes.append(f"torch {version} is the CUDA build (with its nvidia-* packages, several GB), and "
                         f"this machine has no NVIDIA driver: it runs on the CPU all the same. The CPU build "
                         f"is enough and much smaller: pip install --force-reinstall --no-deps "
                         f"\"torch=={plain}+cpu\" --index-url {CPU_INDEX}")
    return problems, notes


def lab_arguments(folder, port=None, no_browser=False, extra=()):
    """JupyterLab's command-line arguments: served from folder, on this machine only."""
    args = [f"--ServerApp.root_dir={folder}", "--ServerApp.ip=127.0.0.1", "--LabApp.default_url=/lab/tree"]
    if port:
        args.append(f"--ServerApp.port={port}")
    if no_browser:
        args.append("--no-browser")
    if hasattr(os, "getuid") and os.getuid() == 0:
        args.append("--allow-root")  # root in a container: JupyterLab refuses to start otherwise
    return args + list(extra)


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="attention-student", description=__doc__.split("\n\n")[0],
        epilog="Anything after -- goes to JupyterLab as it is, e.g. -- --ServerApp.token=secret")
    parser.add_argument("folder", nargs="?", default=DEFAULT_FOLDER,
                        help=f"where your copies of the notebooks live (default: ./{DEFAULT_FOLDER})")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser; open the printed address yourself")
    parser.add_argument("--port", type=int, help="the port JupyterLab listens on (default: 8888, or the next free one)")
    parser.add_argument("--copy-only", action="store_true", help="copy the notebooks, do not open JupyterLab")
    parser.add_argument("--version", action="version", version=f"{DISTRIBUTION} {__version__}")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    args = parser.parse_args(argv)
    args.extra = extra
    return args


def main(argv=None):
    args = parse(argv)
    copied = copy_notebooks(args.folder)
    print(copied.summary(), flush=True)
    for path in copied.new:
        print(f"  {path.relative_to(copied.folder)}")
    if args.copy_only:
        return 0
    problems, notes = environment_notes()
    for note in notes:
        print(f"note: {note}", flush=True)
    if problems:
        for problem in problems:
            print(f"{DISTRIBUTION}: {problem}", file=sys.stderr)
        return 1
    print(f"opening JupyterLab in {copied.folder} (stop it with Ctrl+C)", flush=True)
    from jupyterlab.labapp import LabApp

    LabApp.launch_instance(argv=lab_arguments(copied.folder, args.port, args.no_browser, args.extra))
    return 0
