"""What hostile input costs the trusted side: the grading worker's peak memory and time for
notebooks that print a 300 MB and a 2 GB line (and send 300 MB past the kernel's own bounds),
and the CPU time of each trusted-side step on the largest hostile input it accepts.

    python scripts/bench_bounded_input.py [--skip-grading] [--skip-steps]

Grading: each case is graded by grade_submission (what a Dask worker runs), in a fresh
process of its own so that its peak memory is its own (ru_maxrss), in the course's grading
kernel (the sandbox where the machine allows it); a correct answer follows the line, so the
score says whether the answer was still graded. Printed: the worker's peak resident memory,
its CPU seconds and the wall time, beside an honest notebook's.

Steps: CPU seconds, in this process, of reading (the notebook bounds), the scan, the
tamper comparison and the sanitiser, on inputs built to be costly: a notebook of 20,000
cells, 5.3 MB of nested markup, markup with every start tag open at once, parse bombs, a
notebook at every bound; and the sanitiser's cost for 1,000 to 20,000 nested <div>, which
bleach alone (what the sanitiser used to do) pays about the square of.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
A = "05_scaled_attention"
CASES = {
    "honest": "",
    "print a 300 MB line": 'print("x" * 300_000_000)\n',
    "print a 2 GB line": 'print("x" * 2_000_000_000)\n',
    "send 300 MB past the kernel's bounds": (
        "k = get_ipython().kernel\n"
        "k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'x' * 300_000_000}, "
        "parent=k.get_parent());\n"),
}


def grade_one(case, budget):
    """Grade one case in this (fresh) process; print its figures as JSON."""
    import nbformat

    from grader.grading import layout
    from grader.grading.autograde import Grading
    from grader.grading.submission import grade_submission
    from support import synthetic

    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        root = synthetic.make_course(Path(tmp) / "course")
        folder = root / "submitted" / "student" / A
        folder.mkdir(parents=True)
        nb = synthetic.answered(root, A, A, edit=lambda gid, src: CASES[case] + src)
        nbformat.write(nb, folder / f"{A}.ipynb")
        grading = Grading(root, jobs=1, budget=budget)
        layout.ensure_gradebook(root, grading.config)
        todo, _, _ = grading.plan()
        with tempfile.TemporaryDirectory() as work:
            (job, _), = list(grading.complete_jobs(todo, work))
            base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            cpu, wall = time.process_time(), time.monotonic()
            result = grade_submission(job)
            cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        score = sum(g.auto_score or 0 for nb in result.notebooks.values() for g in nb.grades.values())
        text = b"".join(result.files.values()).decode("utf-8", "replace")
        note = ("output cut" if "output cut" in text else "") + ("output dropped" if "output dropped" in text else "")
        print(json.dumps({"case": case, "status": result.status, "reason": result.reason, "score": score,
                          "peak_mib": peak / 1024, "before_mib": base / 1024, "cpu_s": cpu, "wall_s": wall,
                          "note": note, "notebook_kib": sum(len(v) for v in result.files.values()) / 1024}))


def grading(budget):
    print(f"Grading one notebook of 05 per case in a fresh worker process (budget {budget} CPU s); "
          "the worker's peak resident memory, its CPU time and the wall time of grade_submission:")
    print(f"  {'case':40} {'score':>5} {'peak MiB':>9} {'(at start)':>10} {'CPU s':>6} {'wall s':>7}  graded notebook")
    for case in CASES:
        out = subprocess.run([sys.executable, __file__, "--grade-one", case, "--budget", str(budget)],
                             capture_output=True, text=True, cwd=ROOT, timeout=1800,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
        try:
            r = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            print(f"  {case}: failed\n{out.stderr[-2000:]}")
            continue
        what = r["status"] if r["status"] != "graded" else f"{r['notebook_kib']:.0f} KiB, {r['note'] or 'no note'}"
        print(f"  {case:40} {r['score']:5.1f} {r['peak_mib']:9.0f} {r['before_mib']:10.0f} {r['cpu_s']:6.1f} "
              f"{r['wall_s']:7.1f}  {what} {r['reason'][:80]}")


def _cpu(fn, *args):
    start = time.process_time()
    value = fn(*args)
    return time.process_time() - start, value


def steps():
    import nbformat

    from grader.grading import bounds, sanitize, scan, submission, tamper
    from support import synthetic

    warnings.simplefilter("ignore")
    nested = lambda n: "<div>" * n + "x" + "</div>" * n  # noqa: E731
    print("\nThe sanitiser on n nested <div> (one Markdown cell and one HTML output), CPU s:")
    from bleach import clean
    from bleach.css_sanitizer import CSSSanitizer

    def bleach_alone(html):  # the sanitiser as it was: bleach on any markup, with the course's tags
        return clean(html, tags=sorted(sanitize.SAFE_TAGS), attributes=sanitize._allowed_attribute,
                     strip=False, protocols={"http", "https", "mailto", "data"},
                     css_sanitizer=CSSSanitizer(allowed_css_properties=[]))

    for n in (1000, 2000, 4000, 20_000):
        bleach_s = _cpu(bleach_alone, nested(n))[0] if n <= 4000 else float("nan")
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(nested(n)), nbformat.v4.new_code_cell(
            "x", outputs=[nbformat.v4.new_output("display_data", data={"text/html": nested(n), "text/plain": "x"})])])
        ours = _cpu(sanitize.NoActiveContent().preprocess, nb, {})[0]
        print(f"  {n:6} nested: bleach alone {bleach_s:6.2f}   the course's sanitiser {ours:6.3f}")

    def notebook_text(cells):
        return nbformat.writes(nbformat.v4.new_notebook(cells=cells))

    cases = {
        "20,000 cells of `pass`": notebook_text([nbformat.v4.new_code_cell("pass") for _ in range(20_000)]),
        "24 cells of 20,000 nested <div> (5.3 MB)": notebook_text(
            [nbformat.v4.new_markdown_cell(nested(20_000)) for _ in range(24)]),
    }
    print("\nReading a notebook over the bounds (submission.check_notebooks), CPU s and the reason:")
    for label, text in cases.items():
        seconds, reason = _cpu(submission.check_notebooks, {f"{A}.ipynb": text.encode()}, [A])
        print(f"  {label:44} {seconds:6.2f}  {reason}")

    # the largest notebook within the bounds, built to be costly for each step
    limits = bounds.LIMITS
    markup_cell = "".join(f"<b title=0-{i}>" for i in range(sanitize.MAX_TAGS - 2))  # all open: the costliest
    n_markup = (limits.source - 200 * 1024) // (len(markup_cell) + 1000)
    bomb = "x = " + " + ".join(["'a'"] * 3000)
    lambdas = "f = " + "lambda: " * 900 + "0"
    deep_code = "".join("    " * i + f"if x{i}:\n" for i in range(90)) + "    " * 90 + "pass\n"
    flat_code = "\n".join(f"x{i} = getattr(F, 'a' + str({i}))" for i in range(3000))
    cells = [nbformat.v4.new_markdown_cell(markup_cell.replace("title=0-", f"title={c}-")) for c in range(n_markup)]
    cells += [nbformat.v4.new_code_cell(c) for c in (bomb, lambdas, deep_code, flat_code[:scan.MAX_CELL_CHARS - 1])]
    cells += [nbformat.v4.new_code_cell(f"y{i} = {i}") for i in range(limits.cells - len(cells))]
    text = notebook_text(cells)
    print(f"\nOne notebook at the bounds ({len(cells)} cells, {len(text) / 2**20:.1f} MB: {n_markup} Markdown cells "
          f"of {len(markup_cell) // 1024} KiB of markup with {sanitize.MAX_TAGS} tags open at once, parse bombs, "
          "3,000 getattr lines), CPU s of each trusted-side step:")
    course = nbformat.read(ROOT / "solutions" / A / f"{A}.ipynb", as_version=4)
    nb = nbformat.reads(text, as_version=4)
    seconds, reason = _cpu(submission.check_notebooks, {f"{A}.ipynb": text.encode()}, [A])
    print(f"  reading (bounds, nbformat):  {seconds:6.2f}  {reason or 'accepted'}")
    seconds, found = _cpu(scan.scan, nb, course)
    print(f"  the scan:                    {seconds:6.2f}  {len(found.flags)} flags, {len(found.unreadable)} cells unread")
    seconds, _ = _cpu(tamper.changes, nb, course)
    print(f"  the tamper comparison:       {seconds:6.2f}")
    seconds, _ = _cpu(sanitize.NoActiveContent().preprocess, nb, {})
    print(f"  the sanitiser:               {seconds:6.2f}  (at most {sanitize.SANITIZE_SECONDS:g} s, then text)")
    honest = synthetic.answered(ROOT, A, A)
    seconds, _ = _cpu(lambda: (scan.scan(honest, course), tamper.changes(honest, course),
                               sanitize.NoActiveContent().preprocess(honest, {})))
    print(f"  (an honest notebook, all three: {seconds:.2f})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-grading", action="store_true")
    parser.add_argument("--skip-steps", action="store_true")
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--grade-one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.grade_one:
        return grade_one(args.grade_one, args.budget)
    if not args.skip_steps:
        steps()
    if not args.skip_grading:
        print()
        grading(args.budget)


if __name__ == "__main__":
    main()
