"""The `attention-grading` kernel spec: a Python 3 kernel started by the sandbox
provisioner. Installed into the environment by `make install`:

    python -m grader.isolation install [--prefix PREFIX] [--name NAME]

writes PREFIX/share/jupyter/kernels/NAME/kernel.json (PREFIX: this environment; it also
builds matplotlib's font list for the sandboxes once), where
jupyter_client finds it, so `KernelManager(kernel_name="attention-grading")`,
`NotebookClient(..., kernel_name="attention-grading")` and nbgrader's
`c.Execute.kernel_name` start isolated kernels.
"""
import json
import shutil
import sys
from pathlib import Path

KERNEL_NAME = "attention-grading"
PROVISIONER_NAME = "attention-sandbox"
DISPLAY_NAME = "Python 3 (grading sandbox)"


# The kernel's cells are compiled by IPython's own compiler, as in a terminal, not by
# ipykernel's, which names each cell's code after a hash computed in Python for its debugger
# (this spec has none): a check calls the student's code through a throwaway cell that carries
# its inputs, some fifty per notebook, and hashing them cost about 65 ms of a graded 05
# notebook's 0.8 CPU seconds in its kernel (20 correct notebooks, three runs each: 16.0 to 16.2
# CPU seconds in their kernels with it, 14.8 to 15.0 without). ipykernel sets the compiler
# without a setting of its own, so a line the kernel runs as it starts, before any cell,
# swaps it (and leaves no name behind).
CELL_COMPILER = ("from IPython.core.compilerop import CachingCompiler as _compiler; "
                 "get_ipython().compiler_class = _compiler; get_ipython().compile = _compiler(); del _compiler")


def kernel_spec(python=None):
    """The kernel.json content."""
    return {
        "argv": [python or sys.executable, "-m", "ipykernel_launcher", f"--IPKernelApp.exec_lines={CELL_COMPILER}",
                 "-f", "{connection_file}"],
        "display_name": DISPLAY_NAME,
        "language": "python",
        "interrupt_mode": "signal",
        "env": {},
        "metadata": {"debugger": False,
                     "kernel_provisioner": {"provisioner_name": PROVISIONER_NAME, "config": {}}},
    }


def install(prefix=None, name=KERNEL_NAME):
    """Write the kernel spec under prefix (default: this environment); returns its folder."""
    folder = Path(prefix or sys.prefix) / "share" / "jupyter" / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(kernel_spec(), indent=1) + "\n")
    try:
        import ipykernel

        resources = Path(ipykernel.__file__).parent / "resources"
        for logo in resources.glob("logo-*"):
            shutil.copy(logo, folder / logo.name)
    except ImportError:
        pass
    from grader.isolation.namespaces import font_cache

    font_cache()
    return folder
