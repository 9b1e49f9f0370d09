"""Warm kernels: forked from a template that has imported torch, each in a sandbox of its
own, and indistinguishable from a cold kernel to the notebook they run."""
import json
import textwrap
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from grader.isolation import KERNEL_NAME, isolation_available, sandbox_settings
from grader.isolation import template
from grader.isolation.namespaces import start_time

available, why = isolation_available()
pytestmark = [pytest.mark.skipif(not available, reason=f"no isolation here: {why}"),
              pytest.mark.xdist_group("isolation")]


def start(tmp_path, warm=True):
    km = KernelManager(kernel_name=KERNEL_NAME, config=sandbox_settings(warm=warm))
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return km, kc


def probe(kc, code):
    """Run code that leaves its answer in `result`; the answer, as JSON."""
    printed = []
    code = textwrap.dedent(code) + "\nprint('<<' + __import__('json').dumps(result))"
    reply = kc.execute_interactive(code, timeout=120, output_hook=lambda m: printed.append(
        m["content"].get("text", "")))
    assert reply["content"]["status"] == "ok", reply["content"]
    return json.loads("".join(printed).rsplit("<<", 1)[1])


def stop(km, kc):
    kc.stop_channels()
    km.shutdown_kernel(now=True)


STATE = """
    import gc, random, numpy, torch, notebook_helpers
    result = {"marked": hasattr(torch, "_left_by_a_kernel") or hasattr(numpy, "_left_by_a_kernel"),
              "frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects()),
              "helpers": getattr(notebook_helpers, "shared", None),
              "random": random.random(), "numpy": float(numpy.random.random()),
              "torch_seed": torch.initial_seed(), "torch": torch.rand(1).item()}
    torch._left_by_a_kernel = numpy._left_by_a_kernel = True
    notebook_helpers.shared = "changed"
"""


def test_kernels_share_no_state_and_draw_fresh_random_numbers(tmp_path):
    """What one warm kernel writes into a module is not seen by the next, and each draws
    its own random numbers (Python's, numpy's and torch's, as fresh interpreters do)."""
    seen = []
    for _ in range(2):
        km, kc = start(tmp_path)
        try:
            assert km.provisioner.warm_started, template.shared()[1]
            seen.append(probe(kc, STATE))
        finally:
            stop(km, kc)
    first, second = seen
    assert not first["marked"] and not second["marked"]
    assert first["helpers"] is None and second["helpers"] is None
    assert first["random"] != second["random"] and first["numpy"] != second["numpy"]
    assert first["torch"] != second["torch"]
    km, kc = start(tmp_path, warm=False)
    try:
        assert not km.provisioner.warm_started
        cold = probe(kc, STATE)
    finally:
        stop(km, kc)
    assert len({first["torch_seed"], second["torch_seed"], cold["torch_seed"]}) == 3
    # what the template imported is out of the collector's sight in a warm kernel (gc.freeze:
    # its full collections walk only the kernel's own objects), as nothing is in a cold one
    assert first["frozen"] > 10 * first["tracked"] and second["frozen"] == first["frozen"], (first, second)
    assert cold["frozen"] == 0


def test_the_template_is_out_of_reach_and_single_threaded(tmp_path):
    """A warm kernel is in its own sandbox: its own pid 1, no view of the template's
    process, one thread before the kernel started its own. The template is looked for by
    its start time, not its number: pids are the namespace's own, and the sandbox draws its
    program's from 1000 to 30000 (namespaces.FIRST_PIDS), so the template's pid on the host
    can be a thread of the kernel's inside (it was, once in some thousand runs)."""
    tmpl, reason = template.shared()
    assert tmpl is not None, reason
    km, kc = start(tmp_path)
    try:
        inside = probe(kc, f"""
    import os
    def _start_time(pid):  # grader.isolation.namespaces.start_time, which the sandbox does not hold
        with open(f"/proc/{{pid}}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    # every process and thread in sight (a thread's id has its /proc entry too), and when each started
    started = [_start_time(t) for p in pids for t in os.listdir(f"/proc/{{p}}/task")]
    result = {{"pids": pids, "started": started, "uid": os.getuid(),
              "socket_visible": os.path.exists({str(tmpl.socket)!r})}}
""")
    finally:
        stop(km, kc)
    template_started = start_time(tmpl.process.pid)
    assert inside["started"] and min(inside["started"]) > 0
    assert inside["uid"] != 0 and template_started not in inside["started"] and not inside["socket_visible"]
    assert inside["pids"][0] == 1 and len(inside["pids"]) <= 3  # init, the kernel, maybe its child
    assert len(list(Path(f"/proc/{tmpl.process.pid}/task").iterdir())) == 1


NOTEBOOK = [
    "import torch, numpy, matplotlib.pyplot as plt\n"
    "from notebook_helpers import load_corpus, show_heatmap\n"
    "torch.manual_seed(0)\nprint(torch.randn(3), torch.get_num_threads())",
    "text = load_corpus()\nprint(len(text), text[:40])",
    "show_heatmap(torch.softmax(torch.randn(4, 4), dim=-1), title='weights')",
    "plt.plot([1, 2, 3]); plt.show()",
    "import sys, os\nprint(sys.argv[1:], os.getcwd(), [p for p in sys.path if 'tmp' in p])",
    "raise ValueError('as in a cold kernel')",
]


def run_notebook(folder, warm):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK])
    client = NotebookClient(nb, kernel_name=KERNEL_NAME, allow_errors=True, timeout=120,
                            resources={"metadata": {"path": str(folder)}},
                            config=sandbox_settings(warm=warm))
    client.execute()
    for cell in nb.cells:
        for out in cell.outputs:
            out.pop("execution_count", None)
            if out.output_type == "error":
                out.traceback = [line for line in out.traceback if "Cell In[" not in line]
    return [cell.outputs for cell in nb.cells]


def test_a_notebook_gives_the_same_outputs_warm_and_cold(tmp_path):
    """Text, figures (the inline backend's PNGs) and errors are the same, byte for byte."""
    warm, cold = run_notebook(tmp_path, True), run_notebook(tmp_path, False)
    assert any(out.output_type == "display_data" for out in warm[2])
    assert warm == cold


def test_kernels_start_cold_where_no_template_can_be_made(tmp_path, monkeypatch):
    """A template that cannot import what it needs: kernels start cold, and the reason
    is logged and given by `python -m grader.isolation check`. This process's own template
    is set aside meanwhile, not stopped: the tests after this one fork from it still (a
    template costs about 3 CPU s to start)."""
    from grader.isolation.__main__ import warm_kernels

    broken = tmp_path / "broken_template.py"
    broken.write_text("import this_module_does_not_exist\n")
    monkeypatch.setitem(template._SHARED, "template", None)  # as if none were started yet;
    monkeypatch.setitem(template._SHARED, "reason", None)  # both put back when the test ends
    monkeypatch.delenv(template.ENV, raising=False)  # nor one offered to attach to
    monkeypatch.setattr(template, "SERVER", broken)
    line = warm_kernels()
    assert "NOT available" in line and "this_module_does_not_exist" in line
    assert template.shared() == (None, template._SHARED["reason"])  # not tried again
    km, kc = start(tmp_path)
    try:
        assert not km.provisioner.warm_started
        assert probe(kc, "import torch\nresult = float(torch.ones(2).sum())") == 2.0
    finally:
        stop(km, kc)


def after_the_templates_imports(code, *args):
    """Run code in a fresh Python (json and sys imported, args in sys.argv[1:]) once it has
    imported what the template imports (template_server.warm_imports, in the template's
    environment); what its last printed line says, as JSON."""
    import subprocess
    import sys

    server = template.SERVER
    prelude = (f"import json, sys; sys.path.insert(0, {str(server.parent)!r}); "
               "import template_server; template_server.warm_imports()\n")
    run = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code), *map(str, args)],
                         capture_output=True, text=True, timeout=300, cwd=str(server.parent.parent.parent),
                         env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def after_warm_imports():
    """One fresh Python (about 3 CPU s) for the two tests below: the modules it holds once it
    has imported what the template imports ("warm"), then what the checks' meta probe
    answers and imports after those (META_PROBE)."""
    from grader.grading import channel

    return after_the_templates_imports("warm = sorted(sys.modules)\n" + META_PROBE, channel.STUDENT_CALL)


def test_a_warm_kernel_starts_without_importing_what_the_template_could_have(tmp_path, after_warm_imports):
    """A kernel's start imports its debugger, shell and event loop (about 150 modules, a
    third of a second): the template has them, so a forked kernel imports only the few
    modules that must bind to its own shell."""
    warm = set(after_warm_imports["warm"])
    km, kc = start(tmp_path)
    try:
        assert km.provisioner.warm_started, template.shared()[1]
        loaded = set(probe(kc, "import sys\nresult = sorted(sys.modules)"))
    finally:
        stop(km, kc)
    new = sorted(loaded - warm - {"template_server"})
    heavy = [m for m in new if m.split(".")[0] in {"debugpy", "pydevd", "_pydevd_bundle", "tornado", "sqlite3"}]
    assert not heavy, heavy
    assert len(new) < 40, new


META_PROBE = """
import importlib.util
spec = importlib.util.spec_from_file_location("_grading_channel", sys.argv[1])
channel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(channel)
import torch
before = set(sys.modules)
def attend(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1) @ v
args = [torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 4)]
answer = channel.execute_on_meta(attend, {"kind": "function", "args": args})
print(json.dumps({"warm": warm, "answer": answer, "new": sorted(set(sys.modules) - before)}))
"""


def test_the_checks_meta_probe_imports_nothing_heavy_after_the_templates_imports(after_warm_imports):
    """Each graded notebook's checks run the student's code once on the meta device (in the
    kernel, grader/checks/student_call.py); its first operation under a dispatch mode imports
    torch's compiler package (about 1.8 s of CPU). The template has imported it, so the probe
    in a forked kernel imports (almost) nothing."""
    result = after_warm_imports
    assert result["answer"] == {"device": "meta", "dtype": "torch.float32", "shape": [2, 5, 4]}, result
    assert len(result["new"]) < 10 and not [m for m in result["new"] if m.startswith("torch._dynamo")], result["new"]


def test_a_kernel_forked_from_a_shared_template_dies_with_the_process_that_asked(tmp_path):
    """The grading process shares its template with its Dask workers (template.ENV): a
    worker's kernel is then the template's grandchild, not the worker's. A worker that
    exits without shutting its kernel down (killed, or lost) still leaves nothing running:
    the launcher watches the process that asked for it. The template stays, for the others."""
    import os
    import subprocess
    import sys
    import time

    tmpl, reason = template.shared()
    assert tmpl is not None, reason
    marker = 810000 + os.getpid() % 1000
    script = textwrap.dedent(f"""
        import os
        from jupyter_client.manager import KernelManager
        from grader.isolation import KERNEL_NAME, sandbox_settings
        km = KernelManager(kernel_name=KERNEL_NAME, config=sandbox_settings())
        km.start_kernel(cwd={str(tmp_path)!r})
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        kc.execute_interactive("import subprocess; subprocess.Popen(['sh', '-c', '(sleep {marker} &) &'])")
        print("kernel", km.provisioner.warm_started, km.provisioner.init_pid, km.provisioner.rundir, flush=True)
        os._exit(0)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, template.ENV: str(tmpl.socket)})
    warm, init_pid, rundir = proc.stdout.rsplit("kernel ", 1)[1].split()
    assert warm == "True", proc.stderr[-2000:]  # forked from this process's template
    ps = lambda: subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (f"sleep {marker}" in ps() or os.path.exists(f"/proc/{init_pid}")
                                           or os.path.exists(rundir)):
        time.sleep(0.2)
    assert f"sleep {marker}" not in ps()
    assert not os.path.exists(f"/proc/{init_pid}")
    assert not os.path.exists(rundir)  # the launcher cleaned up after the sandbox
    assert tmpl.alive()  # the shared template serves on
