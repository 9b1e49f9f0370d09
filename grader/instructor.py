"""Instructor commands around autograde: collect, feedback, export and the grade report.

    python -m grader.instructor collect [--zip PATH --assignment NAME]
    python -m grader.instructor feedback
    python -m grader.instructor export        # grades.csv + reports/grade_report.md
"""
import argparse
import csv
import shutil
import subprocess
import sys
import warnings
from collections import Counter, defaultdict
from pathlib import Path

from grader.grading import layout as pipeline
from grader.grading.autograde import mistakes as named_mistakes
from grader.grading.status import Status


def _api(root):
    config = pipeline.load_config(root)
    config.Application.log_level = "WARNING"
    return pipeline.nbgrader_api(config)


def collect(root, zip_path=None, assignment=None):
    """From the local exchange (nbgrader collect), or from an LMS zip (nbgrader zip_collect)."""
    root = Path(root)
    if zip_path:
        if not assignment:
            raise SystemExit("collect ZIP=... needs ASSIGNMENT=<name>, e.g. ASSIGNMENT=05_scaled_attention")
        archive = root / "downloaded" / assignment / "archive"
        archive.mkdir(parents=True, exist_ok=True)
        shutil.copy(zip_path, archive / Path(zip_path).name)
        cmd = [sys.executable, "-m", "nbgrader", "zip_collect", assignment, "--force"]
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"zip_collect failed:\n{proc.stderr[-2000:]}")
        print(f"collected {assignment} from {zip_path} into submitted/")
        return
    api = _api(root)
    for name in pipeline.assignments(root):
        result = api.collect(name)
        state = "collected" if result["success"] else f"failed: {result['error'][-300:]}"
        print(f"{name}: {state}")


def feedback(root):
    """Per-student HTML feedback for every graded submission, hidden tests removed."""
    api = _api(root)
    status = Status(root)
    done = 0
    for student, assignment, entry in status.entries():
        if entry["status"] != "graded":
            continue
        result = api.generate_feedback(assignment, student)
        if not result["success"]:
            print(f"feedback failed for {student} / {assignment}: {result['error'][-300:]}")
            continue
        done += 1
    print(f"feedback written for {done} submission(s) under feedback/")


def export(root, csv_path=None, report_dir=None):
    """nbgrader's CSV export, with a needs_attention column, and the grade report."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin
    from sqlalchemy.exc import SAWarning

    root = Path(root)
    csv_path = Path(csv_path or root / "grades.csv")
    config = pipeline.load_config(root)
    pipeline.ensure_gradebook(root, config)
    status = Status(root)
    warnings.filterwarnings("ignore", category=SAWarning)
    with Gradebook(pipeline.db_url(root), config.CourseDirectory.course_id) as gb:
        pipeline.add_students(root, config, sorted(status.data))
        CsvExportPlugin(to=str(csv_path)).export(gb)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    fields = (list(rows[0]) if rows else []) + ["needs_attention", "flags"]
    attention = {(s, a): e["reason"] for s, a, e in status.attention()}
    for row in rows:
        reason = attention.get((row["student_id"], row["assignment"]), "")
        row["needs_attention"] = reason
        row["flags"] = "; ".join(_flags(status.get(row["student_id"], row["assignment"]) or {}))
        if reason:  # never a silent 0: no score, and the reason instead
            row["raw_score"] = row["score"] = ""
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    report = write_report(root, status, rows, Path(report_dir or root / "reports"))
    print(f"wrote {csv_path} ({len(rows)} rows, {len(attention)} need attention) and {report}")
    return csv_path, report


def _flags(entry):
    """What deserves a look in a graded submission: a notebook that ran out of time."""
    return [f"{nb}: ran out of its time budget" for nb, data in (entry.get("notebooks") or {}).items()
            if data.get("budget_exceeded")]


def write_report(root, status, rows, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    graded = [(s, a, e) for s, a, e in status.entries() if e["status"] == "graded"]
    attention = status.attention()

    totals = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        if row.get("score") not in ("", None):
            totals[row["student_id"]][0] += float(row["score"])
            totals[row["student_id"]][1] += float(row["max_score"] or 0)
    percent = [100 * got / best for got, best in totals.values() if best]

    passed, tried = Counter(), Counter()
    for s, a, e in graded:
        for nb, data in (e.get("notebooks") or {}).items():
            for cell, outcomes in data.get("outcomes", {}).items():
                tried[cell] += 1
                passed[cell] += bool(outcomes) and all(o["passed"] for o in outcomes)
    mistakes = Counter(name for _, _, e in graded for name in named_mistakes(e).values())

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(percent, bins=10, range=(0, 100), color="tab:blue", edgecolor="white")
    ax.set(xlabel="score (% of points in graded submissions)", ylabel="students", title="Score histogram")
    fig.tight_layout()
    fig.savefig(out / "score_histogram.png", dpi=100)
    plt.close(fig)

    cells = sorted(tried)
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(cells) + 1.2))
    ax.barh(cells, [100 * passed[c] / tried[c] for c in cells], color="tab:green")
    ax.set(xlabel="% of graded submissions with full points", xlim=(0, 100), title="Pass rate per test")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "pass_rate.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 0.35 * max(1, len(mistakes)) + 1.2))
    names = [n for n, _ in mistakes.most_common()]
    ax.barh(names or ["(none seen)"], [mistakes[n] for n in names] or [0], color="tab:red")
    ax.set(xlabel="test cells where the checker named it", title="Misconceptions seen")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "misconceptions.png", dpi=100)
    plt.close(fig)

    lines = ["# Grade report", "",
             f"- students: {len(totals) + len({s for s, _, _ in attention} - set(totals))}",
             f"- submissions graded: {len(graded)}",
             f"- submissions that need attention: {len(attention)}",
             f"- submissions that ran out of their time budget: "
             f"{sum(bool(e.get('budget_exceeded')) for _, _, e in graded)}", ""]
    lines += ["## Needs attention", ""]
    if attention:
        lines += ["| student | assignment | reason |", "|---|---|---|"]
        lines += [f"| {s} | {a} | {e['reason']} |" for s, a, e in attention]
    else:
        lines += ["Nothing: every submission was graded."]
    flagged = [(s, a, e) for s, a, e in graded if _flags(e)]
    lines += ["", "## Flagged", ""]
    if flagged:
        lines += ["| student | assignment | why |", "|---|---|---|"]
        lines += [f"| {s} | {a} | {f} |" for s, a, e in flagged for f in _flags(e)]
    else:
        lines += ["Nothing flagged."]
    lines += ["", "## Scores", "", "![score histogram](score_histogram.png)", "",
              "## Pass rate per test", "", "![pass rate](pass_rate.png)", "",
              "| test | passed | graded |", "|---|---|---|"]
    lines += [f"| {c} | {passed[c]} | {tried[c]} |" for c in cells]
    lines += ["", "## Misconceptions named by the checks", "", "![misconceptions](misconceptions.png)", "",
              "| misconception | test cells |", "|---|---|"]
    lines += [f"| {n} | {k} |" for n, k in mistakes.most_common()] or ["| (none) | 0 |"]
    report = out / "grade_report.md"
    report.write_text("\n".join(lines) + "\n")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["collect", "feedback", "export"])
    parser.add_argument("--zip", default=None)
    parser.add_argument("--assignment", default=None)
    parser.add_argument("--root", default=str(pipeline.ROOT))
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.root, args.zip or None, args.assignment or None)
    elif args.command == "feedback":
        feedback(args.root)
    else:
        export(args.root)


if __name__ == "__main__":
    main()
