"""Autograde every submission under submitted/<student>/<assignment>/, N at a time.

    python -m grader.autograde [--jobs N] [--device cuda] [--force] [--student S] [--assignment A]

Design (nbgrader's SQLite gradebook is not safe for concurrent writers):
- N worker processes, each with its own private copy of the course (its own gradebook,
  a copy of solutions/), run nbgrader's own autograde through NbGraderAPI, one
  submission at a time, and report the scores they recorded;
- this process is the only writer of the course gradebook: it merges each result in one
  transaction (nbgrader's Gradebook API), moves the autograded notebooks into place and
  records the submission's fingerprint in autograded/.status.json. Re-running skips
  submissions whose files, sources and settings have not changed, so an interrupted run
  finishes the class without losing, duplicating or keeping stale grades;
- a submission that nbgrader cannot grade (invalid or missing notebook, kernel death,
  tampered test cells, a worker past its time limit) is recorded as "needs attention"
  with its reason, its old grades are removed, and the rest of the class goes on.
"""
import argparse
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader import pipeline

# --- the worker: one private course, many submissions -----------------------------------

KEEP_VISIBLE = {".venv", "grader", "notebook_helpers", "data", "solutions", "notebooks",
                "nbgrader_config.py", "pyproject.toml"}
KERNEL_MEMORY = 6 * 2**30  # address space for each worker and the kernels it starts


def _worker_api(root, workdir, budget):
    workdir = Path(workdir)  # the parent put solutions/ and gradebook.db there
    config = pipeline.load_config(root)
    config.CourseDirectory.root = str(workdir)
    config.CourseDirectory.db_url = f"sqlite:///{workdir / 'gradebook.db'}"
    config.Application.log_level = "WARNING"
    config.BudgetedExecute.notebook_budget = budget
    return pipeline.nbgrader_api(config)


def _grade_one(api, root, workdir, student, assignment):
    from nbgrader.api import Gradebook

    src = Path(workdir) / "inbox" / student / assignment
    dst = Path(workdir) / "submitted" / student / assignment
    out = Path(workdir) / "autograded" / student / assignment
    for path in (dst, out):
        shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(src, dst)
    start = time.monotonic()
    result = api.autograde(assignment, student, force=True, create=True)
    elapsed = time.monotonic() - start
    if not result["success"] or not out.is_dir():
        return {"status": "needs_attention", "elapsed": elapsed,
                "reason": pipeline.explain_failure(f"{result['log']}\n{result['error']}")}
    with Gradebook(api.coursedir.db_url, api.coursedir.course_id) as gb:
        sub = gb.find_submission(assignment, student)
        notebooks = {}
        for nb in sub.notebooks:
            notebooks[nb.name] = {
                "grades": {g.name: [g.auto_score, g.max_score, g.needs_manual_grade] for g in nb.grades},
                "comments": {c.name: c.auto_comment for c in nb.comments},
                "late_penalty": nb.late_submission_penalty,
            }
        timestamp = sub.timestamp.isoformat() if sub.timestamp else None
    return {"status": "graded", "elapsed": elapsed, "timestamp": timestamp,
            "notebooks": notebooks, "autograded": str(out), **pipeline.scan_outputs(out)}


def worker_main(root, workdir, budget):
    """Read tasks as JSON lines on stdin; answer each with one JSON line on the original
    stdout. Everything else (nbgrader's logs, prints) goes to stderr."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (KERNEL_MEMORY, KERNEL_MEMORY))
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    api = _worker_api(root, workdir, budget)
    for line in sys.stdin:
        task = json.loads(line)
        try:
            result = _grade_one(api, root, workdir, task["student"], task["assignment"])
        except Exception as err:  # a broken submission must not take the worker down
            result = {"status": "needs_attention", "reason": pipeline.explain_failure(repr(err))}
        proto.write(json.dumps(result) + "\n")
        proto.flush()


# --- the parent: workers, merging, status ----------------------------------------------

def _worker_command(root, workdir, budget):
    """The worker, in new namespaces where the OS allows them: no network (its kernels talk
    to it over a private loopback), its own /proc and /tmp, and the course's gradebook,
    status, submissions and outputs hidden, so student code run by its kernels cannot
    read other students' work or touch any grade. The course code, data and the Python
    environment stay visible for the kernels; the private course is workdir."""
    from grader import verify

    argv = [sys.executable, "-m", "grader.autograde", "--worker", "--root", str(root),
            "--workdir", str(workdir), "--budget", str(budget)]
    expose = [sys.prefix, sys.base_prefix, str(workdir)] + [
        str(pipeline.ROOT / name) for name in sorted(KEEP_VISIBLE)]
    hide = verify.hidden_paths(pipeline.course_roots(root), KEEP_VISIBLE)
    return verify.namespace_command(argv, expose, hide)


class Worker:
    """A worker process, its private course folder and its pipes; restarted after a kill."""

    def __init__(self, root, template_db, budget, env, log):
        self.root, self.template_db, self.budget = Path(root), template_db, budget
        self.env, self.log, self.proc, self.workdir = env, log, None, None

    def start(self):
        self.workdir = Path(tempfile.mkdtemp(prefix="autograde-worker-"))
        shutil.copy(self.template_db, self.workdir / "gradebook.db")
        shutil.copytree(self.root / "solutions", self.workdir / "solutions")
        self.proc = subprocess.Popen(_worker_command(self.root, self.workdir, self.budget),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=self.env, start_new_session=True)
        self.buffer = b""

    def run(self, task, limit):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        inbox = self.workdir / "inbox" / task["student"] / task["assignment"]
        shutil.rmtree(inbox, ignore_errors=True)
        shutil.copytree(self.root / "submitted" / task["student"] / task["assignment"], inbox)
        self.proc.stdin.write((json.dumps(task) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + limit
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return {"status": "needs_attention",
                        "reason": f"grading took longer than {limit:.0f} s and was stopped"}
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    self.kill()
                    return {"status": "needs_attention", "reason": "the grading worker crashed"}
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def kill(self):
        if self.proc is None:
            return
        pipeline.kill_tree(self.proc.pid)
        self.proc.wait()
        self.proc = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def _fingerprint(root, student, assignment, settings):
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for base in (Path(root) / "submitted" / student / assignment, Path(root) / "solutions" / assignment):
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            h.update(str(path.relative_to(base)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


class Grading:
    def __init__(self, root, jobs=1, device=None, force=False, budget=None, verify=True):
        self.root = Path(root)
        self.jobs, self.device, self.force, self.verify = jobs, device, force, verify
        self.config = pipeline.load_config(self.root)
        self.budget = budget or self.config.BudgetedExecute.get("notebook_budget", 180)
        self.status = pipeline.Status(self.root)
        self.lock = threading.Lock()
        self.settings = {"device": device or "cpu", "budget": self.budget, "verify": verify}

    def tasks(self, students=None, assignments=None):
        todo, skipped = [], 0
        for student, assignment in pipeline.discover(self.root, students, assignments):
            fp = _fingerprint(self.root, student, assignment, self.settings)
            entry = self.status.get(student, assignment)
            if not self.force and entry and entry.get("fingerprint") == fp:
                skipped += 1
                continue
            todo.append((student, assignment, fp))
        return todo, skipped

    def run(self, students=None, assignments=None, progress=True):
        import warnings

        warnings.simplefilter("ignore")  # this process's own warnings (nbgrader, torch) are noise here
        pipeline.ensure_gradebook(self.root, self.config)
        if self.device and self.device.startswith("cuda"):
            pipeline.require_cuda()
        todo, skipped = self.tasks(students, assignments)
        pipeline.add_students(self.root, self.config, sorted({s for s, _, _ in todo}))
        summary = {"graded": 0, "needs_attention": 0, "skipped": skipped}
        if not todo:
            return summary
        template = self.root / "autograded" / ".template.db"
        template.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.root / "gradebook.db", template)
        env = dict(os.environ)
        env.pop("GRADER_DEVICE", None)
        if self.device:
            env["GRADER_DEVICE"] = self.device
        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        logs = self.root / "autograded" / ".logs"
        logs.mkdir(parents=True, exist_ok=True)
        bar = pipeline.progress(len(todo), enabled=progress)
        queue = list(todo)
        n_notebooks = lambda a: max(1, len(pipeline.expected_notebooks(self.root, a)))

        def drain(index):
            with open(logs / f"worker-{index}.log", "ab") as log:
                worker = Worker(self.root, template, self.budget, env, log)
                try:
                    while True:
                        with self.lock:
                            if not queue:
                                return
                            student, assignment, fp = queue.pop(0)
                        problem = pipeline.preflight(self.root, student, assignment)
                        if problem:
                            result = {"status": "needs_attention", "reason": problem}
                        else:
                            limit = self.budget * n_notebooks(assignment) + 120
                            result = worker.run({"student": student, "assignment": assignment}, limit)
                            if self.verify and result["status"] == "graded":
                                from grader import verify
                                result["verification"] = verify.verify_submission(
                                    self.root, student, assignment, self.device)
                        with self.lock:
                            self.merge(student, assignment, fp, result)
                            summary[result["status"]] += 1
                            bar.update(1)
                finally:
                    worker.close()

        try:
            with ThreadPoolExecutor(self.jobs) as pool:
                for future in [pool.submit(drain, i) for i in range(self.jobs)]:
                    future.result()
        finally:
            bar.close()
            template.unlink(missing_ok=True)
        return summary

    def merge(self, student, assignment, fp, result):
        """Record one result: the only place that writes the course gradebook."""
        from nbgrader.api import Gradebook, MissingEntry

        final = self.root / "autograded" / student / assignment
        entry = {"fingerprint": fp, "status": result["status"], "graded_at": time.time(),
                 "elapsed": result.get("elapsed")}
        with Gradebook(pipeline.db_url(self.root), self.config.CourseDirectory.course_id) as gb:
            if result["status"] == "graded":
                pipeline.replace_dir(Path(result["autograded"]), final)
                kwargs = {"timestamp": result["timestamp"]} if result["timestamp"] else {}
                gb.update_or_create_submission(assignment, student, **kwargs)
                scores, checks = _decide(result)
                for name, nb in result["notebooks"].items():
                    sub_nb = gb.find_submission_notebook(name, assignment, student)
                    for grade in sub_nb.grades:
                        _, _, manual = nb["grades"].get(grade.name, [None, None, True])
                        grade.auto_score = scores[name].get(grade.name, [None])[0]
                        grade.needs_manual_grade = manual
                    for comment in sub_nb.comments:
                        comment.auto_comment = nb["comments"].get(comment.name)
                    sub_nb.late_submission_penalty = nb["late_penalty"]
                gb.db.commit()
                from grader import late
                late.apply(gb, self.config, assignment, student)  # the policy on the verified score
                entry.update(mistakes=result.get("mistakes", {}), scores=scores, **checks,
                             budget_exceeded=result.get("budget_exceeded", False))
            else:
                try:
                    gb.remove_submission(assignment, student)  # no stale grades
                except MissingEntry:
                    pass
                shutil.rmtree(final, ignore_errors=True)
                entry["reason"] = result["reason"]
        self.status.set(student, assignment, entry)


def _decide(result):
    """Final scores: the verified result decides each test cell where verification ran.

    Returns ({notebook: {grade_id: [score, max]}}, {"disagreements", "incidents", ...})."""
    verification = result.get("verification") or {}
    scores, disagreements, incidents = {}, [], []
    for name, nb in result["notebooks"].items():
        checked = verification.get(name, {})
        scores[name] = {}
        for grade_id, (kernel, best, _) in nb["grades"].items():
            cell = checked.get("cells", {}).get(grade_id)
            if cell is None:
                scores[name][grade_id] = [kernel, best]
                continue
            verified = float(best or 0) if cell["passed"] else 0.0
            scores[name][grade_id] = [verified, best]
            if (kernel or 0) != verified:
                why = cell["message"] or "passes on fresh inputs outside the kernel"
                disagreements.append({"notebook": name, "cell": grade_id, "kernel": kernel,
                                      "verified": verified, "why": why})
        incidents += checked.get("incidents", [])
    isolation = {v.get("isolation") for v in verification.values()} or {None}
    return scores, {"disagreements": disagreements, "incidents": incidents,
                    "verified": bool(verification), "isolation": isolation.pop(),
                    "verify_elapsed": sum(v.get("elapsed", 0) for v in verification.values())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS") or 1))
    parser.add_argument("--device", default=os.environ.get("DEVICE") or None)
    parser.add_argument("--force", action="store_true", help="regrade unchanged submissions too")
    parser.add_argument("--budget", type=int, default=None, help="seconds per notebook")
    parser.add_argument("--student", action="append", help="only these students")
    parser.add_argument("--assignment", action="append", help="only these assignments")
    parser.add_argument("--root", default=str(pipeline.ROOT))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--no-verify", action="store_true",
                        help="skip verification outside the kernel (in-kernel scores only)")
    args = parser.parse_args(argv)
    if args.worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
        return worker_main(args.root, args.workdir, args.budget)
    grading = Grading(args.root, jobs=max(1, args.jobs), device=args.device, force=args.force,
                      budget=args.budget, verify=not args.no_verify)
    start = time.monotonic()
    summary = grading.run(args.student, args.assignment)
    print(f"autograde: {summary['graded']} graded, {summary['needs_attention']} need attention, "
          f"{summary['skipped']} unchanged and skipped, in {time.monotonic() - start:.1f} s "
          f"with {args.jobs} job(s)")
    for student, assignment, entry in grading.status.attention():
        print(f"  NEEDS ATTENTION {student} / {assignment}: {entry['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
