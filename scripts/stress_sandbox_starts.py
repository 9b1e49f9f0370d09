"""Build many sandboxes at once and count the ones that fail to start.

    python scripts/stress_sandbox_starts.py [--starts 1000] [--concurrency 4]

Each start builds a whole sandbox (namespaces, mounts, pivot, the unprivileged user,
limits) that runs `true`, as `python -m grader.isolation check` does; --concurrency
starts run at the same time. Prints the number of failures, each distinct reason with
its count, and the starts per second. Exit status 1 if any start failed.
"""
import argparse
import collections
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from grader.isolation.namespaces import try_sandbox


def stress(starts, concurrency):
    """{reason: count} of the failed starts among `starts` sandbox builds."""
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda _: try_sandbox(), range(starts)))
    # the same failure with another pid counts as the same reason
    return collections.Counter(re.sub(r"\d+", "N", reason) for ok, reason in results if not ok)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    began = time.monotonic()
    failures = stress(args.starts, args.concurrency)
    wall = time.monotonic() - began
    print(f"{args.starts} sandbox starts at concurrency {args.concurrency}: "
          f"{sum(failures.values())} failed, {wall:.1f} s ({args.starts / wall:.1f} starts/s)")
    for reason, count in failures.most_common():
        print(f"  {count} x {reason}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
