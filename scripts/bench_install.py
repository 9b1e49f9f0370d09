"""A cold `make install` on a machine whose pip reaches only PyPI, with pip and with uv.

    python scripts/bench_install.py [--installers pip uv] [--keep]

For each installer: a copy of the course's tracked files, empty download caches (so every
package is downloaded), an empty pip configuration and no PIP_*/UV_* variables (PyPI only),
torch's CPU build from a local stand-in for PyTorch's CPU index (which this machine cannot
reach), then `make install INSTALLER=<installer>`. Prints the wall time of each step (the
installer's `==>` lines), the whole install's wall and CPU time (its processes together) and
the size of the environment. Needs PyPI and a torch CPU wheel in /opt/wheels; downloads
about 300 MB per installer.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.torch_index import ROOT, pypi_only_env, serve, torch_wheel, write_index  # noqa: E402


def course_copy(dest):
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def du(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and not p.is_symlink())


def bench(installer, tmp, url):
    course = course_copy(tmp / "course")
    env = pypi_only_env(tmp)
    env.update(PIP_CACHE_DIR=str(tmp / "pip-cache"), UV_CACHE_DIR=str(tmp / "uv-cache"))
    cmd = ["make", "-s", "install", f"INSTALLER={installer}", f"TORCH_INDEX_URL={url}", "NVIDIA_DRIVER="]
    cpu, started = children_cpu(), time.monotonic()
    steps, last = [], ("start", started)
    with open(tmp / "make.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            log.write(line)
            if line.startswith("==> "):
                now = time.monotonic()
                steps.append((last[0], now - last[1]))
                last = (line[4:].strip(), now)
        proc.wait()
    end = time.monotonic()
    steps.append((last[0], end - last[1]))
    if proc.returncode != 0:
        raise SystemExit(f"{installer}: make install failed, see {tmp / 'make.log'}")
    return {"wall": end - started, "cpu": children_cpu() - cpu, "steps": steps,
            "venv": du(course / ".venv") / 2**30, "downloads": du(tmp / "pip-cache") / 2**20 + du(tmp / "uv-cache") / 2**20}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installers", nargs="+", default=["pip", "uv"], choices=["pip", "uv"])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = parser.parse_args(argv)
    wheel = torch_wheel()
    if wheel is None:
        raise SystemExit("no torch CPU wheel in /opt/wheels to serve as PyTorch's CPU index")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        tmp = Path(tmp)
        with serve(write_index(tmp / "index", wheel)) as (url, _):
            for installer in args.installers:
                print(f"--- make install INSTALLER={installer} (cold caches, PyPI only)", flush=True)
                results[installer] = r = bench(installer, tmp / installer, url)
                for what, seconds in r["steps"]:
                    print(f"  {seconds:6.1f} s  {what[:100]}")
                print(f"  {installer}: {r['wall']:.0f} s wall, {r['cpu']:.0f} s CPU, environment {r['venv']:.2f} GiB, "
                      f"{r['downloads']:.0f} MiB in the download caches", flush=True)
        if args.keep:
            kept = Path(tempfile.mkdtemp(prefix="bench-install-kept-"))
            shutil.copytree(tmp, kept, dirs_exist_ok=True, symlinks=True)
            print(f"kept in {kept}")
    if len(results) == 2:
        pip, uv = results["pip"], results["uv"]
        print(f"uv / pip: {uv['wall'] / pip['wall']:.2f} of the wall time, {uv['cpu'] / pip['cpu']:.2f} of the CPU time "
              f"({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
