"""python -m grader.isolation install | check

install: write the attention-grading kernel spec into this environment.
check: say whether isolated kernels can run here (exit status 1 if not), which limits a
sandbox gets (a cgroup of its own, or per-process limits only) and whether kernels start
warm (forked from a template) or cold.
"""
import argparse
import sys

from grader.isolation import isolation_available, kernelspec


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader.isolation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install the kernel spec")
    install.add_argument("--prefix", help="environment prefix (default: this one)")
    install.add_argument("--name", default=kernelspec.KERNEL_NAME)
    sub.add_parser("check", help="can isolated kernels run here?")
    args = parser.parse_args(argv)
    if args.command == "install":
        print(f"installed kernel spec {args.name} in {kernelspec.install(args.prefix, args.name)}")
        return 0
    available, reason = isolation_available()
    print("isolated kernels: available" if available else f"isolated kernels: NOT available: {reason}")
    if available:
        print(enforced())
        print(warm_kernels())
    return 0 if available else 1


def enforced():
    """What limits a sandbox gets on this machine, in words."""
    from grader.isolation import cgroups
    from grader.isolation.namespaces import GiB, Limits

    limits = Limits()
    per_process = (f"per process (rlimits): {limits.memory / GiB:g} GiB of address space, "
                   f"{limits.cpu_seconds} s of CPU; {limits.processes} processes of the "
                   "sandbox's user")
    support = cgroups.support()
    if not support.version:
        return f"{support.describe()}; limits {per_process}"
    return (f"{support.describe()} ({limits.total_memory / GiB:g} GiB, {limits.processes} "
            f"processes); also {per_process}")


def warm_kernels():
    """One line: whether kernels are forked from a warm template here, or start cold."""
    import time

    from grader.isolation import template

    started = time.monotonic()
    tmpl, reason = template.shared()
    if tmpl is None:
        return f"warm kernels: NOT available, each kernel starts cold (imports torch itself): {reason}"
    seconds = time.monotonic() - started
    template.close_shared()
    return f"warm kernels: available (the template imported torch and the notebooks' imports in {seconds:.1f} s)"


if __name__ == "__main__":
    sys.exit(main())
