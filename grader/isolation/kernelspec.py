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


def kernel_spec(python=None):
    """The kernel.json content."""
    return {
        "argv": [python or sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
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
