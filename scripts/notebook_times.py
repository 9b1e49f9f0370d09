"""Print the CPU and wall time each notebook needs, not counting kernel start.

    python scripts/notebook_times.py [solutions|notebooks]

A first cell starts the clocks inside the kernel (after the kernel is up) and a last
cell reads them; the notebook files are not modified.
"""
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

from grader.instructor import notebooks

START = "import time as _t\n_cpu0, _wall0 = _t.process_time(), _t.perf_counter()"
STOP = "print(f'{_t.process_time() - _cpu0:.2f} {_t.perf_counter() - _wall0:.2f}')"


def measure(path):
    nb = nbformat.read(path, as_version=4)
    nb.cells = [new_code_cell(START)] + nb.cells + [new_code_cell(STOP)]
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    total = time.perf_counter() - start
    cpu, wall = map(float, nb.cells[-1].outputs[0]["text"].split())
    return cpu, wall, total


def main(folder="solutions"):
    print(f"{'notebook':28s} {'CPU s':>7s} {'wall s':>7s} {'with kernel start':>18s}")
    for path in notebooks.notebook_paths(folder):
        cpu, wall, total = measure(path)
        print(f"{path.parent.name:28s} {cpu:7.2f} {wall:7.2f} {total:18.2f}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
