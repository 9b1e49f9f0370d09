"""Each sandbox's own control group: one memory limit and one process limit for all its
processes together, its CPU time counted, and nothing left behind."""
import textwrap
import time

import pytest
from jupyter_client.manager import KernelManager

from grader.isolation import KERNEL_NAME, cgroups, isolation_available, sandbox_settings

available, why = isolation_available()
support = cgroups.support()
pytestmark = [pytest.mark.skipif(not available, reason=f"no isolation here: {why}"),
              pytest.mark.skipif(not support.version, reason=support.reason),
              pytest.mark.xdist_group("isolation")]
MiB = 2**20


@pytest.fixture
def sandbox(tmp_path):
    """A kernel whose sandbox may hold 384 MiB and 48 processes in all."""
    km = KernelManager(kernel_name=KERNEL_NAME,
                       config=sandbox_settings(total_memory=384 * MiB, processes=48))
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run(kc, code, timeout=120):
    printed = []
    reply = kc.execute_interactive(textwrap.dedent(code), timeout=timeout, output_hook=lambda m:
                                   printed.append(m["content"].get("text", "")))
    return reply["content"]["status"], "".join(printed)


def test_processes_share_one_process_limit(sandbox):
    """A fork bomb meets the sandbox's one limit, whoever forks."""
    km, kc = sandbox
    status, out = run(kc, """
        import os, time
        made = 0
        try:
            for _ in range(200):
                pid = os.fork()
                if pid == 0:
                    time.sleep(3)
                    os._exit(0)
                made += 1
        except OSError as e:
            print("refused after", made)
    """)
    assert status == "ok"
    assert "refused after" in out and int(out.split()[-1]) < 48


def test_memory_spread_over_processes_meets_one_limit(sandbox):
    """Four children of 200 MiB each (800 MiB, each far below its own 4 GiB) go over the
    sandbox's 384 MiB together: the limit is hit, whichever process the OS then stops."""
    km, kc = sandbox
    msg_id = kc.execute(textwrap.dedent("""
        import subprocess, sys
        code = "x = bytearray(200 * 2**20); x[::4096] = b'1' * len(x[::4096]); import time; time.sleep(5)"
        procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
        print([p.wait() for p in procs])
    """))
    group = km.provisioner.cgroup
    deadline = time.monotonic() + 120  # the children start and touch their memory
    while group.memory_failures() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group.memory_failures() > 0, msg_id


def test_cpu_time_counts_every_process_of_the_sandbox(sandbox):
    km, kc = sandbox
    before = km.provisioner.sandbox_cpu_seconds()
    status, _ = run(kc, """
        import subprocess, sys, time
        subprocess.run([sys.executable, "-c",
                        "import time\\nend = time.process_time() + 1.0\\nwhile time.process_time() < end: pass"])
    """)
    assert status == "ok"
    assert km.provisioner.sandbox_cpu_seconds() - before >= 1.0


def test_the_group_goes_with_the_sandbox(tmp_path):
    km = KernelManager(kernel_name=KERNEL_NAME, config=sandbox_settings())
    km.start_kernel(cwd=str(tmp_path))
    folders = list(km.provisioner.cgroup.folders.values())
    assert all(f.is_dir() for f in folders)
    km.shutdown_kernel(now=True)
    assert not any(f.exists() for f in folders)
