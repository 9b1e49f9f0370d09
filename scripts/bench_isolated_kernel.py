"""Kernel start through the sandbox provisioner (warm and cold) against a plain python3 kernel.

    python scripts/bench_isolated_kernel.py [--rounds N]

Each round starts a kernel by name (attention-grading forked from the warm template,
attention-grading cold, then python3, in turn), waits until it answers, runs a first cell `import torch`, and shuts it down. Printed per
kernel: median and best wall time from start to the first cell's reply, the kernel
process's own CPU time up to the end of that cell (less sensitive to a busy machine than
wall time), and for the sandbox the wall time its set-up took (namespaces, mounts, the
working folder's copy) before the kernel started.
"""
import argparse
import statistics
import tempfile
import time

from jupyter_client.manager import KernelManager

from grader.isolation import KERNEL_NAME, require_isolation, sandbox_settings

WAYS = {"sandbox, warm": (KERNEL_NAME, True), "sandbox, cold": (KERNEL_NAME, False),
        "python3": ("python3", None)}

FIRST_CELL = "import torch"
CPU_SO_FAR = "import time; print(time.process_time())"


def one_start(way):
    kernel_name, warm = WAYS[way]
    workdir = tempfile.mkdtemp(prefix="bench-kernel-")
    start = time.perf_counter()
    km = KernelManager(kernel_name=kernel_name,
                       **({} if warm is None else {"config": sandbox_settings(warm=warm)}))
    km.start_kernel(cwd=workdir)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=300)
    ready = time.perf_counter() - start
    reply = kc.execute_interactive(FIRST_CELL, timeout=300)
    total = time.perf_counter() - start
    assert reply["content"]["status"] == "ok", reply["content"]
    printed = []
    kc.execute_interactive(CPU_SO_FAR, timeout=60,
                           output_hook=lambda m: printed.append(m["content"].get("text", "")))
    cpu = float("".join(printed))
    setup = getattr(km.provisioner, "setup_seconds", None)
    kc.stop_channels()
    km.shutdown_kernel()
    return {"ready": ready, "total": total, "cpu": cpu, "setup": setup}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    require_isolation()
    names = list(WAYS)
    runs = {name: [] for name in names}
    one_start("sandbox, cold")  # the file cache and matplotlib's font list, for all
    one_start("sandbox, warm")  # and the warm template (started once per process)
    for _ in range(args.rounds):
        for name in names:
            runs[name].append(one_start(name))
    med = lambda name, key: statistics.median(r[key] for r in runs[name])
    best = lambda name, key: min(r[key] for r in runs[name])
    print(f"kernel start + first cell `{FIRST_CELL}`, {args.rounds} rounds each")
    print(f"{'kernel':20s} {'ready s':>8s} {'total s':>8s} {'best s':>7s} {'CPU s':>6s}")
    for name in names:
        print(f"{name:20s} {med(name, 'ready'):8.2f} {med(name, 'total'):8.2f} "
              f"{best(name, 'total'):7.2f} {med(name, 'cpu'):6.2f}")
    sandbox, plain = "sandbox, cold", "python3"
    print(f"sandbox set-up before the kernel starts (namespaces, mounts, copies): "
          f"median {med(sandbox, 'setup') * 1000:.0f} ms")
    print(f"sandbox / plain: wall {med(sandbox, 'total') / med(plain, 'total'):.2f}x, "
          f"CPU {med(sandbox, 'cpu') / med(plain, 'cpu'):.2f}x "
          f"(+{med(sandbox, 'cpu') - med(plain, 'cpu'):.2f} s CPU per kernel)")
    print(f"warm / cold sandbox: wall {med('sandbox, warm', 'total') / med(sandbox, 'total'):.2f}x "
          f"({med(sandbox, 'total') - med('sandbox, warm', 'total'):.2f} s less per kernel)")


if __name__ == "__main__":
    main()
