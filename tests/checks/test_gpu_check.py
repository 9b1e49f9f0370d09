"""What a bare GPU machine runs (torch, numpy, matplotlib, pytest and hypothesis; no traitlets,
nbformat or jupyter packages): the checks import and run with torch alone, the GPU tests
collect, and scripts/gpu_check.py works, here CPU against CPU (README "On a GPU")."""
import base64
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import grader
from grader.checks.exercises import EXERCISES
from support.paths import ROOT, script

SCRIPT = ROOT / "scripts" / "gpu_check.py"
BARE = ("torch", "numpy", "matplotlib", "pytest", "hypothesis")  # what such a machine has
ABSENT = ("traitlets", "nbformat", "nbclient", "nbconvert", "nbgrader", "jupyter_client", "jupyter_core",
          "ipykernel", "IPython", "ipywidgets")

gpu_check = script("gpu_check")


def _distributions(names):
    """The distributions names need in this python, requirements followed (no extras)."""
    found, todo = {}, list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found[name] = dist = importlib.metadata.distribution(name)
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A venv holding only torch, numpy, matplotlib, pytest and hypothesis with what they need
    (this environment's copies, linked): the packages a bare GPU machine has."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    dists = _distributions(BARE)
    assert not {canonicalize_name(n) for n in ABSENT} & set(dists)
    for dist in dists.values():
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__")}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    return python


def _bare_env():
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "OUT", "GRADER_DEVICE")}
    env.update(PYTHONPATH=str(ROOT), PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1")
    return env


def _run(python, *args, **kwargs):
    return subprocess.run([str(python), *args], cwd=ROOT, env=_bare_env(), capture_output=True, text=True, **kwargs)


@pytest.mark.grading  # a fresh environment (tests/conftest.py's tiers)
def test_the_checks_import_and_run_with_torch_alone(bare_python):
    mistake = EXERCISES["masked_softmax"].mistakes[0]
    code = f"""
import importlib.util, sys
absent = {ABSENT!r}
assert not [n for n in absent if importlib.util.find_spec(n)], "not a bare environment"
import grader
from grader.answers.correct import CORRECT, student_from
from grader.checks.exercises import EXERCISES
grader.check_masked_softmax(CORRECT["masked_softmax"], "values", hidden=True, seed=3)
wrong = student_from("masked_softmax", EXERCISES["masked_softmax"].mistakes[0].fn)
try:
    grader.check_masked_softmax(wrong, "values")
except grader.CheckError as err:
    print("failed:", err.finding)
print("loaded:", sorted({{m.split(".")[0] for m in sys.modules}} & set(absent)))
"""
    done = _run(bare_python, "-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "\u2713 masked_softmax: matches the reference values (hidden check, seed 3)"
    assert lines[1:] == [f"failed: {mistake.key}", "loaded: []"]


@pytest.mark.grading  # a fresh environment (tests/conftest.py's tiers)
def test_the_gpu_tests_collect_without_traitlets(bare_python):
    done = _run(bare_python, "-m", "pytest", "-q", "-m", "gpu", "tests/checks/test_exercises.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    skipped = re.search(r"(\d+) skipped", done.stdout)
    assert skipped and int(skipped.group(1)) > len(EXERCISES), done.stdout[-2000:]
    assert "needs CUDA" in done.stdout and " error" not in done.stdout


@pytest.mark.grading  # a fresh environment (tests/conftest.py's tiers)
def test_the_quick_run_compares_every_exercise_and_mistake_cpu_against_cpu(bare_python, tmp_path):
    out = tmp_path / "gpu_check.json"
    done = _run(bare_python, str(SCRIPT), "--device", "cpu", "--quick", "--json", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.splitlines()[-1]
    found = re.fullmatch(r"cpu verdicts equal cpu: (\d+)/(\d+); named equal: (\d+)/(\d+)", last)
    assert found, last
    a, b, c, d = map(int, found.groups())
    assert a == b > 0 and c == d > 0
    data = json.loads(out.read_text())
    assert data["coverage"]["exercises"] == list(grader.EXERCISE_KEYS)
    assert data["coverage"]["mistakes"] == {key: [m.key for m in ex.mistakes]
                                            for key, ex in EXERCISES.items() if len(ex.mistakes)}
    assert data["totals"]["compared"] == b and not data["mismatches"]
    judged = {row["judged"] for row in data["rows"]}
    assert judged <= {"same", "device only: not judged on the CPU"}, judged
    assert {row["key"] for row in data["rows"] if row["dtype"] == "float64"} == set(EXERCISES)
    assert data["timings"]["decoding"]["rows"][0]["max_diff"] < 1e-4  # the cache agrees with F.sdpa


def _results(rows, change):
    """Synthetic results: the correct answers pass, each mistake fails named by its key, on both
    sides; change(side, row, result) alters them."""
    results = {}
    for row in rows:
        for side in ("cpu", "device"):
            if side == "cpu" and row.group != "compare":
                continue
            correct = row.answer in ("correct", "left_on_cpu")
            res = {"verdict": "pass" if correct else "fail", "named": None if correct else row.answer[8:],
                   "name": None, "message": "label\n  why", "seconds": 0.0, "handed": ["cuda:0"]}
            results[(side, row)] = change(side, row, res) or res
    return results


def test_a_difference_between_the_devices_is_counted_and_shown():
    key = "causal_weights"
    ex = EXERCISES[key]
    rows = [r for r in gpu_check.plan(EXERCISES, quick=True, device_type="cuda", accepted={k: [] for k in EXERCISES})
            if r.key == key]
    only, other = ex.mistakes[-1].key, ex.mistakes[0].key

    def change(side, row, res):
        if row.answer == f"mistake:{only}":  # right as far as the CPU can tell; the device misses it too
            return {**res, "verdict": "pass", "named": None}
        if side == "device" and row.answer == "correct" and row.focus == "output" and row.group == "compare":
            return {**res, "verdict": "fail", "named": "device"}
        if side == "device" and row.answer == f"mistake:{other}":
            return {**res, "named": "something_else"}
        if side == "device" and row.group == "device":  # the output left on the CPU
            return {**res, "verdict": "fail", "named": "device"}
        return None

    summaries, records, mismatches = gpu_check.judge(rows, _results(rows, change), "cuda", {})
    s = summaries[key]
    compared = len([r for r in rows if r.group == "compare" and r.answer != f"mistake:{only}"])
    assert (s.compared, s.equal) == (compared, compared - 1)
    assert (s.failed_on_cpu, s.named_equal) == (len(ex.mistakes) - 1, len(ex.mistakes) - 2)
    assert s.device_only == [1, 2]  # the output left on the CPU is named; the CPU-passing mistake is not
    assert s.tf32 == [1, 1]
    assert len(mismatches) == 3
    assert any(m.startswith(f"{key} correct output visible float32: cpu pass") for m in mismatches)
    assert any(f"mistake:{other}" in m and "something_else" in m for m in mismatches)
    assert any(f"the device should name {only}" in m for m in mismatches)


def test_notebook_outputs_are_compared_by_test_cell():
    committed = json.loads((ROOT / "solutions/05_scaled_attention/05_scaled_attention.ipynb").read_text())
    executed = json.loads(json.dumps(committed))
    tests = [c for c in executed["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    def text(cell):
        return "".join("".join(o.get("text", "")) for o in cell["outputs"])

    hidden = next(c for c in tests if "seed" in text(c))
    first, *rest = text(hidden).splitlines(keepends=True)
    hidden["outputs"] = [{"output_type": "stream", "name": "stdout", "text": first},  # the same, in pieces
                         {"output_type": "stream", "name": "stdout",
                          "text": re.sub(r"seed \d+", "seed 12345", "".join(rest))}]  # another seed
    tests[0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["\u2713 something else\n"]}]
    cells = gpu_check.compare_cells(committed, executed, gpu_check._sanitizers())
    assert len(cells) == len(tests)
    assert [c["grade_id"] for c in cells if not c["same"]] == [tests[0]["metadata"]["nbgrader"]["grade_id"]]
    assert not any(c["same"] for c in gpu_check.compare_cells(committed, None, gpu_check._sanitizers()))


def _probe_wheel(folder):
    """A small wheel (a package and a data file), built here: pip and unpacking install it alike."""
    files = {"gpu_check_probe/__init__.py": b"VALUE = 7\n",
             "gpu_check_probe-1.0.data/data/share/gpu_check_probe/note.txt": b"data\n",
             "gpu_check_probe-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: gpu-check-probe\nVersion: 1.0\n",
             "gpu_check_probe-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                    b"Tag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for name, data in files.items()) + "gpu_check_probe-1.0.dist-info/RECORD,,\n"
    files["gpu_check_probe-1.0.dist-info/RECORD"] = record.encode()
    folder.mkdir()
    with zipfile.ZipFile(folder / "gpu_check_probe-1.0-py3-none-any.whl", "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return folder


@pytest.mark.grading
@pytest.mark.parametrize("installer", ["pip", "unpack"])
def test_a_throwaway_venv_gets_the_wheels_without_an_index_and_sees_torch(tmp_path, installer):
    wheelhouse = _probe_wheel(tmp_path / "wheels")
    python, how = gpu_check.make_venv(tmp_path / "venv", wheelhouse, installer, packages=("gpu-check-probe",))
    assert how == {"pip": "pip", "unpack": "unpacked"}[installer]
    done = subprocess.run([str(python), "-c", "import gpu_check_probe, torch, sys; print(gpu_check_probe.VALUE, "
                           "gpu_check_probe.__file__.startswith(sys.prefix))"],
                          env=_bare_env(), capture_output=True, text=True)
    assert done.stdout.split() == ["7", "True"], done.stderr[-2000:]
    assert (tmp_path / "venv" / "share" / "gpu_check_probe" / "note.txt").read_text() == "data\n"


def test_without_a_venv_the_wheels_are_unpacked_beside_this_python(tmp_path, monkeypatch):
    def no_venv(*args, **kwargs):
        raise subprocess.CalledProcessError(1, [sys.executable, "-m", "venv"])
    monkeypatch.setattr(gpu_check, "make_venv", no_venv)
    unpacked = []
    monkeypatch.setattr(gpu_check, "unpack_wheels", lambda wheels, site, prefix: unpacked.append(Path(wheels)))
    info = gpu_check.run_notebooks("cpu", only=["no notebook has this name"], installer="auto",
                                   wheelhouse=_probe_wheel(tmp_path / "wheels"), timeout=10, jobs=1, progress=False)
    assert info["how"].startswith("this python (no venv could be made), wheels installed by unpacking")
    assert unpacked == [tmp_path / "wheels"] and info["notebooks"] == []


@pytest.mark.notebooks
def test_a_notebook_runs_with_the_device_set_and_its_checks_match(tmp_path):
    notebook = json.loads((ROOT / "solutions/01_bag_of_words/01_bag_of_words.ipynb").read_text())
    tests = [c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    out = tmp_path / "nb.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--no-checks", "--notebooks", "yes",
                           "--installer", "here", "--only", "01_bag_of_words", "--json", str(out)],
                          cwd=ROOT, env=_bare_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-2] == f"cpu notebook checks equal cpu: {len(tests)}/{len(tests)}"
    assert [n["notebook"] for n in json.loads(out.read_text())["notebooks"]["notebooks"]] == ["01_bag_of_words"]


def test_the_make_targets_use_the_machines_python_and_download_for_python_3_12():
    check = subprocess.run(["make", "--no-print-directory", "-n", "gpu-check"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert [line.strip() for line in check.stdout.splitlines()] == [f"PYTHONPATH={ROOT} python3 scripts/gpu_check.py"]
    wheels = subprocess.run(["make", "--no-print-directory", "-n", "gpu-wheelhouse"], cwd=ROOT, capture_output=True, text=True, check=True)
    command = " ".join(wheels.stdout.replace("\\\n", " ").split())
    assert "python3 -m pip download" in command and "--only-binary=:all: --python-version 3.12" in command
    assert "--platform manylinux2014_x86_64" in command and "-c requirements.lock" in command
    assert command.split("-c requirements.lock ")[1].split()[:3] == ["nbclient", "ipykernel", "ipywidgets"]
    assert "torch" not in command
    ignored = subprocess.run(["git", "check-ignore", "-q", "gpu-wheelhouse/x.whl"], cwd=ROOT)
    assert ignored.returncode == 0
