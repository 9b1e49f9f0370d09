"""What the whole machine did while the suite ran, read from the Linux kernel's counters: the
CPU seconds every process spent (/proc/stat) and the seconds its tasks were stalled waiting
for a CPU, the disks or memory (/proc/pressure). `make test` prints both at its end; a run
whose wall time is long for its CPU seconds says why (the machine was shared, its disks slow,
its memory short) without a second run."""
import os
from pathlib import Path

STALLS = ("cpu", "io", "memory")


def busy_cpu_seconds():
    """CPU seconds the machine's processors spent on anything but idling (and waiting for
    disks) since boot, or None where /proc/stat cannot be read."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle, iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal (guest is in user)
    return busy / os.sysconf("SC_CLK_TCK")


def stall_seconds():
    """{"cpu" | "io" | "memory": seconds during which some task of the machine was kept waiting
    for it, since boot}; a kind the kernel does not count (no PSI) is left out."""
    found = {}
    for kind in STALLS:
        try:
            some = Path(f"/proc/pressure/{kind}").read_text().splitlines()[0]
            found[kind] = int(some.rpartition("total=")[2]) / 1e6
        except (OSError, ValueError, IndexError):
            continue
    return found


def since(start_busy, start_stalls):
    """(busy CPU seconds, {kind: stalled seconds}) since the two readings given, where known."""
    busy = busy_cpu_seconds()
    busy = None if busy is None or start_busy is None else busy - start_busy
    stalls = stall_seconds()
    return busy, {k: v - start_stalls[k] for k, v in stalls.items() if k in start_stalls}
