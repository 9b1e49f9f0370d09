"""Grade every submission under submitted/<student>/<assignment>/ on a Dask cluster.

    python -m grader.grading.autograde [--jobs N] [--scheduler tcp://host:8786] [--force]
                                       [--device cuda] [--student S] [--assignment A]

Each submission is one task, `grader.grading.submission.grade_submission(job)`: a pure
function of the submission's files, the assignment's source and the grading settings,
run in a course folder of its own. By default the tasks run on an embedded
`LocalCluster` (processes, one thread each, `--jobs` workers); `--scheduler` uses an
existing cluster (dask-jobqueue on Slurm/PBS, the Dask Helm chart on Kubernetes, ...)
whose workers have the same environment and commit of the course.

This process is the only writer of the course gradebook: it merges each result as it
arrives, in one transaction, moves the autograded files into place and records the
submission's fingerprint in autograded/.status.json. Re-running skips what has not
changed (files, the assignment's source, the grader's code and data, the configuration,
the due date, the settings); `--force` regrades everything. A worker that dies has its
task rerun elsewhere by the scheduler; a submission that kills workers again and again
is marked "needs attention"; a scheduler that goes away stops the run with everything
finished so far recorded.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

from grader import late
from grader.grading import layout
from grader.grading.status import Status, fingerprint, grading_inputs
from grader.grading.submission import Job, Refused, Settings, SubmissionResult, read_submission

WORKER_MEMORY = "6GiB"  # per Dask worker process (the kernel it starts has its own limits)
ALLOWED_FAILURES = 2  # workers a submission may kill before it needs attention


def _duedate(gb, assignment):
    try:
        return gb.find_assignment(assignment).duedate
    except Exception:
        return None


class Grading:
    def __init__(self, root, jobs=1, device=None, force=False, budget=None, scheduler=None,
                 call_timeout=None):
        self.root = Path(root)
        self.jobs, self.force, self.scheduler = max(1, jobs), force, scheduler
        self.config = layout.load_config(self.root)
        execute = self.config.GradingExecute
        self.settings = Settings(device=device or "cpu",
                                 notebook_budget=budget or execute.get("notebook_budget", 180),
                                 call_timeout=call_timeout or execute.get("call_timeout", 20),
                                 kernel_name=execute.get("kernel_name", ""))
        self.status = Status(self.root)

    # --- what to grade --------------------------------------------------------------

    def plan(self, students=None, assignments=None):
        """(jobs to run, results known without running: refused submissions, skipped count)."""
        from nbgrader.api import Gradebook

        settings = vars(self.settings)
        with Gradebook(layout.db_url(self.root), self.config.CourseDirectory.course_id) as gb:
            inputs = {a: grading_inputs(self.root, a, _duedate(gb, a))
                      for a in layout.assignments(self.root)}
        todo, refused, skipped = [], [], 0
        for student, assignment in layout.discover(self.root, students, assignments):
            folder = self.root / "submitted" / student / assignment
            try:
                files = read_submission(folder)
            except Refused as err:
                fp = fingerprint({}, inputs[assignment], {**settings, "refused": str(err)})
                refused.append((SubmissionResult(student, assignment, "needs_attention", str(err)), fp))
                continue
            fp = fingerprint(files, inputs[assignment], settings)
            entry = self.status.get(student, assignment)
            if not self.force and entry and entry.get("fingerprint") == fp:
                skipped += 1
                continue
            todo.append((student, assignment, files, fp))
        return todo, refused, skipped

    def _jobs(self, todo, workdir):
        templates, sources = {}, {}
        config_text = (self.root / "nbgrader_config.py").read_text()
        for student, assignment, files, fp in todo:
            if assignment not in templates:
                templates[assignment] = layout.gradebook_template(
                    self.root, self.config, assignment, Path(workdir) / f"{assignment}.db")
                base = self.root / "solutions" / assignment
                sources[assignment] = {str(p.relative_to(base)): p.read_bytes()
                                       for p in sorted(base.rglob("*")) if p.is_file()}
            yield Job(student, assignment, layout.expected_notebooks(self.root, assignment), files,
                      sources[assignment], templates[assignment], config_text, self.settings), fp

    # --- the run --------------------------------------------------------------------

    def run(self, students=None, assignments=None, progress=True):
        warnings.simplefilter("ignore")  # nbgrader's and dask's own warnings are noise here
        layout.ensure_gradebook(self.root, self.config)
        if self.settings.device.startswith("cuda"):
            layout.require_cuda()
        todo, refused, skipped = self.plan(students, assignments)
        layout.add_students(self.root, self.config,
                            sorted({s for s, *_ in todo} | {r.student for r, _ in refused}))
        summary = {"graded": 0, "needs_attention": 0, "skipped": skipped}
        for result, fp in refused:
            self.merge(result, fp)
            summary["needs_attention"] += 1
        if not todo:
            return summary
        with tempfile.TemporaryDirectory(prefix="autograde-") as workdir:
            jobs = list(self._jobs(todo, workdir))
            bar = layout.progress(len(jobs), enabled=progress)
            try:
                for result, fp in self._map(jobs):
                    self.merge(result, fp)
                    summary[result.status] += 1
                    bar.update(1)
            finally:
                bar.close()
        return summary

    def _map(self, jobs):
        """(result, fingerprint) for every job, as they finish, on the Dask cluster."""
        import dask
        from distributed import Client, LocalCluster, as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        from grader.grading.submission import grade_submission

        with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                              "distributed.worker.daemon": False,
                              "distributed.logging.distributed": "error"}):
            if self.scheduler:
                cluster, client = None, Client(self.scheduler, timeout="30s")
            else:
                threads = max(1, (os.cpu_count() or 1) // self.jobs)
                env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
                cluster = LocalCluster(n_workers=self.jobs, threads_per_worker=1, processes=True,
                                       memory_limit=WORKER_MEMORY, dashboard_address=None,
                                       silence_logs=40, env=env)
                client = Client(cluster)
            try:
                futures = {}
                for job, fp in jobs:
                    key = f"grade-{job.student}-{job.assignment}-{fp[:12]}"
                    futures[client.submit(grade_submission, job, key=key, pure=False)] = (job, fp)
                for future in as_completed(futures):
                    job, fp = futures[future]
                    try:
                        result = future.result()
                    except KilledWorker:
                        result = SubmissionResult(
                            job.student, job.assignment, "needs_attention",
                            f"grading it killed {ALLOWED_FAILURES + 1} workers in a row "
                            "(a crash or running out of memory); not graded")
                    except (FutureCancelledError, OSError, TimeoutError) as err:
                        raise SystemExit(f"the Dask scheduler went away ({type(err).__name__}); "
                                         "everything finished so far is recorded: run again "
                                         "to grade the rest") from None
                    except Exception as err:
                        result = SubmissionResult(job.student, job.assignment, "needs_attention",
                                                  f"grading failed: {type(err).__name__}: {str(err)[:200]}")
                    yield result, fp
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()

    # --- the only writer ------------------------------------------------------------

    def merge(self, result, fp):
        """Record one result: the only place that writes the course gradebook and status."""
        from nbgrader.api import Gradebook, MissingEntry

        student, assignment = result.student, result.assignment
        final = self.root / "autograded" / student / assignment
        entry = {"fingerprint": fp, "status": result.status, "graded_at": time.time(),
                 "elapsed": round(result.elapsed, 2)}
        with Gradebook(layout.db_url(self.root), self.config.CourseDirectory.course_id) as gb:
            if result.status == "graded":
                _replace_dir(final, result.files)
                kwargs = {"timestamp": result.timestamp} if result.timestamp else {}
                gb.update_or_create_submission(assignment, student, **kwargs)
                for name, nb in result.notebooks.items():
                    sub_nb = gb.find_submission_notebook(name, assignment, student)
                    for grade in sub_nb.grades:
                        score, _, manual = nb["grades"].get(grade.name, [None, None, True])
                        grade.auto_score, grade.needs_manual_grade = score, manual
                    for comment in sub_nb.comments:
                        comment.auto_comment = nb["comments"].get(comment.name)
                    sub_nb.late_submission_penalty = nb["late_penalty"]
                gb.db.commit()
                late.apply(gb, self.config, assignment, student)  # the course's late policy
                entry["notebooks"] = {name: {"outcomes": nb["outcomes"],
                                             "budget_exceeded": nb["budget_exceeded"]}
                                      for name, nb in result.notebooks.items()}
            else:
                try:
                    gb.remove_submission(assignment, student)  # no stale grades
                except MissingEntry:
                    pass
                shutil.rmtree(final, ignore_errors=True)
                entry["reason"] = result.reason
        self.status.set(student, assignment, entry)


def _replace_dir(dst, files):
    """Write files (relative path -> bytes) as the folder dst, replacing what was there."""
    dst = Path(dst)
    tmp = dst.with_name(f".{dst.name}.incoming")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, data in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)


def mistakes(entry):
    """{notebook/grade_id: name of the mistake} the checks named in one graded submission."""
    found = {}
    for name, nb in (entry.get("notebooks") or {}).items():
        for grade_id, outcomes in nb.get("outcomes", {}).items():
            for outcome in outcomes:
                if outcome.get("mistake"):
                    found[f"{name}/{grade_id}"] = outcome.get("mistake_name") or outcome["mistake"]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS") or 1))
    parser.add_argument("--scheduler", default=os.environ.get("SCHEDULER") or None,
                        help="address of an existing Dask scheduler (default: an embedded LocalCluster)")
    parser.add_argument("--device", default=os.environ.get("DEVICE") or None)
    parser.add_argument("--force", action="store_true", help="regrade unchanged submissions too")
    parser.add_argument("--budget", type=int, default=None, help="seconds per notebook")
    parser.add_argument("--student", action="append", help="only these students")
    parser.add_argument("--assignment", action="append", help="only these assignments")
    parser.add_argument("--root", default=str(layout.ROOT))
    args = parser.parse_args(argv)
    grading = Grading(args.root, jobs=args.jobs, device=args.device, force=args.force,
                      budget=args.budget, scheduler=args.scheduler)
    start = time.monotonic()
    summary = grading.run(args.student, args.assignment)
    where = args.scheduler or f"{grading.jobs} local worker(s)"
    print(f"autograde: {summary['graded']} graded, {summary['needs_attention']} need attention, "
          f"{summary['skipped']} unchanged and skipped, in {time.monotonic() - start:.1f} s "
          f"on {where}")
    for student, assignment, entry in grading.status.attention():
        print(f"  NEEDS ATTENTION {student} / {assignment}: {entry['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
