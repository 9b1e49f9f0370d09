"""Isolated kernels for grading: each kernel in a sandbox made for it alone.

    from grader.isolation import KERNEL_NAME, isolation_available, sandbox_settings

    ok, reason = isolation_available()          # (False, why) where namespaces are missing
    config = sandbox_settings(readable=[...])    # a traitlets Config for the provisioner
    km = KernelManager(kernel_name=KERNEL_NAME, config=config)
    km.start_kernel(cwd=notebook_folder)         # the folder's copy is the kernel's cwd

While it runs, km.provisioner tells where the kernel is: `kernel_cwd` (its working folder
as it sees it: /home/<user>/<the folder's name>), `host_path(path)` (that path seen from
the host, under /proc/<init>/root), `init_pid`, `kernel_pid()`, and how long the kernel
waited for a CPU (`kernel_wait_for_cpu()`); `kernel_output()` is what the kernel printed
to its stdout and stderr (for a kernel that died). A kernel that cannot start raises
SandboxError with the reason.

The kernel spec `attention-grading` (installed by `make install`) names the
`attention-sandbox` provisioner (grader/isolation/provisioner.py); namespaces.py says
what a sandbox contains, launch.py builds it, stub.py writes the `grader` package the
kernel sees (the imports work, the checks are not there). Importing this package
imports neither torch nor jupyter_client.
"""
from grader.isolation.kernelspec import KERNEL_NAME, PROVISIONER_NAME
from grader.isolation.namespaces import (IsolationUnavailable, Limits, SandboxError,
                                        isolation_available)

__all__ = ["KERNEL_NAME", "PROVISIONER_NAME", "IsolationUnavailable", "Limits", "SandboxError",
           "isolation_available", "require_isolation", "sandbox_settings"]

SETTINGS = ("memory", "cpu_seconds", "processes", "open_files", "file_size", "tmp_size",
            "shm_size", "work_size", "threads", "readable", "workdir", "copy_workdir",
            "course_dirs", "extra_env", "host_uid", "host_gid", "setup_timeout", "warm", "start_tries",
            "total_memory", "use_cgroups", "user", "hostname")


def require_isolation():
    """Raise IsolationUnavailable, with the reason, where no sandbox can be built."""
    available, reason = isolation_available()
    if not available:
        raise IsolationUnavailable(reason)


def sandbox_settings(config=None, **settings):
    """A traitlets Config setting the sandbox provisioner's options, e.g.
    sandbox_settings(readable=["/data/extra"], memory=2 * 2**30, course_dirs=[root]);
    merged into config when given. Pass it as `config=` to a KernelManager,
    NotebookClient or nbgrader app. Options: see SETTINGS and
    grader/isolation/provisioner.py."""
    from traitlets.config import Config

    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"unknown sandbox settings {unknown}; known: {', '.join(SETTINGS)}")
    merged = Config(config or {})
    merged.merge(Config({"SandboxProvisioner": {
        k: (str(v) if k == "workdir" and v is not None else
            [str(p) for p in v] if k in ("readable", "course_dirs") else v)
        for k, v in settings.items()}}))
    return merged
