"""Benchmark a class of 1,350 students x 8 assignments (10,800 submissions).

    python scripts/bench_class.py [--students 1350] [--assignments 8] [--dir /tmp/bench-class] [--reuse]
                                  [--skip browser,feedback,...] [--driver-submissions 2000]
    make bench-class [BENCH_ARGS="--students 300"]

Builds the class the way a term would leave it, from a few real gradings
(tests/support/big_class.py): three students' submissions of every assignment (a correct
one on time, the release's stub a day late, one whose functions raise three days late)
are graded for real by `make autograde` on two workers; then every other student gets a
copy of one of them per assignment: the gradebook's rows copied through SQL, submitted/
and autograded/ hard-linked, the status entries copied. Then it times, in one run:

  no-op       `make autograde` with nothing changed (the process's CPU)
  regrade     `make autograde STUDENT=s ASSIGNMENT=a` (one submission, graded for real,
              two workers) and `make autograde STUDENT=s` (all of theirs)
  export      `make export` (grades.csv, grades_canvas.csv, the report)
  feedback    `make feedback ASSIGNMENT=05_scaled_attention FORCE=1 JOBS=2` (every page
              of one assignment), then again without FORCE (nothing changed)
  driver      the CPU the `make autograde` process spends per submission (receiving,
              merging, recording, progress): --driver-submissions results of real
              gradings replayed by two workers as fast as the process takes them, merged
              into this class's gradebook; the marginal cost per submission against a run
              of 100, and from it and the workers' measured time per submission an
              estimate for the class (10,800 notebooks) on 64 workers
  formgrader  every page's API calls through a running Jupyter server with the course's
              formgrader (wall time, and the server's CPU), and the pages in Chromium
              (Playwright, Debian's /usr/bin/chromium) until their table is filled, and
              "Next" from one submission to the next

and prints each figure with its CPU time, the target beside it, and the load average
(the machine is shared: wall times are upper bounds; CPU times are steadier). The
figures are also written to <dir>/results.json.
"""
import argparse
import dataclasses
import datetime
import json
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from grader.grading import layout  # noqa: E402
from grader.grading.autograde import environment  # noqa: E402
from support import big_class, synthetic  # noqa: E402

A = "05_scaled_attention"
DUE = datetime.datetime(2025, 10, 1, 17, 0)
SEEDS = {"seed_correct": ("correct", -datetime.timedelta(hours=1)),
         "seed_stub": ("stub", datetime.timedelta(hours=26)),
         "seed_exception": ("exception", datetime.timedelta(days=3))}
TARGETS = {"page": 2.0, "next": 1.0, "export": 30.0, "feedback": 300.0, "regrade": 15.0, "noop_cpu": 10.0,
           "driver_cpu": 0.030, "estimate": 600.0}
RESULTS = {}


def load():
    return "load average %.1f %.1f %.1f" % os.getloadavg()


def say(text):
    print(text, flush=True)


def record(name, **figures):
    RESULTS[name] = {**figures, "load": os.getloadavg()}


def timed_command(cmd, cwd=REPO, env=None):
    """(wall seconds, CPU seconds of the command and its children, output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, cpu, proc.stdout + proc.stderr


# --- the class ------------------------------------------------------------------------

def build(course, students, count):
    """The course with real gradings of the seeds of its first `count` assignments,
    replicated to `students` students."""
    from nbgrader.api import Gradebook

    from grader.grading.autograde import Grading

    if course.exists():
        shutil.rmtree(course)
    root = synthetic.make_course(course)
    config = layout.load_config(root)
    start = time.monotonic()
    layout.ensure_gradebook(root, config)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        for name in layout.assignments(root):
            gb.update_or_create_assignment(name, duedate=DUE)
    say(f"  the gradebook (nbgrader generate_assignment x {len(layout.assignments(root))}): "
        f"{time.monotonic() - start:.0f} s")
    seeds = {}
    for name in layout.assignments(root)[:count]:
        seeds[name] = []
        for student, (variant, offset) in SEEDS.items():
            folder = synthetic.make_submission(root, student, name, variant)
            (folder / "timestamp.txt").write_text(f"{DUE + offset} UTC")
            seeds[name].append(student)
    start, cpu = time.monotonic(), time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = Grading(root, jobs=2).run(progress=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    graded = summary["graded"] + summary["needs_attention"]
    say(f"  real gradings: {summary['graded']} graded, {summary['needs_attention']} need attention, "
        f"{wall:.0f} s on 2 workers; the workers and their kernels used {workers:.1f} s of CPU "
        f"({workers / graded:.2f} s per submission, their start included) ({load()})")
    (course / "grading_cpu.json").write_text(json.dumps({"per_submission": workers / graded, "wall": wall}))
    start = time.monotonic()
    big_class.replicate(root, seeds, 0, students - len(SEEDS))
    say(f"  replicated to {students} students x {len(seeds)} assignments: {time.monotonic() - start:.0f} s")
    (course / "seeds.json").write_text(json.dumps(seeds))
    (course / "grader.json").write_text(json.dumps({"environment": environment(), "students": students}))
    return root, seeds


def worker_seconds(root, seeds):
    """The seeds' real gradings: each submission's time on its worker (status file)."""
    from grader.grading.status import Status

    status = Status(root)
    return [status.get(s, a)["elapsed"] for a, students in seeds.items() for s in students if status.get(s, a)]


# --- commands ---------------------------------------------------------------------------

def bench_commands(root, skip, assignments):
    py = sys.executable
    if "noop" not in skip:
        for label in ("first (reads and fingerprints every submission once)", "again"):
            wall, cpu, out = timed_command([py, "-m", "grader.grading.autograde", "--root", str(root), "--jobs", "2"])
            say(f"no-op autograde, {label}: {wall:.1f} s wall, {cpu:.1f} s CPU (target: under "
                f"{TARGETS['noop_cpu']:.0f} s of CPU)  [{out.strip().splitlines()[0][:110]}]  {load()}")
            record(f"noop_autograde {label}", wall=wall, cpu=cpu)
    if "regrade" not in skip:
        for label, args in [("one submission", ["--student", "s00042", "--assignment", A]),
                            (f"one student, all {assignments} assignments", ["--student", "s00042"])]:
            wall, cpu, out = timed_command([py, "-m", "grader.grading.autograde", "--root", str(root), "--jobs", "2",
                                            *args])
            summary = [l for l in out.splitlines() if l.startswith("autograde: ") and "submission(s) of" in l]
            say(f"regrade, {label}: {wall:.1f} s wall, {cpu:.1f} s CPU with its workers and kernels "
                f"(target: under {TARGETS['regrade']:.0f} s)  [{summary[-1][:140] if summary else ''}]  {load()}")
            record(f"regrade {label}", wall=wall, cpu=cpu)
    if "export" not in skip:
        wall, cpu, out = timed_command([py, "-m", "grader.instructor", "export", "--root", str(root)])
        say(f"make export: {wall:.1f} s wall, {cpu:.1f} s CPU (target: under {TARGETS['export']:.0f} s)  {load()}")
        record("export", wall=wall, cpu=cpu)
    if "feedback" not in skip:
        wall, cpu, out = timed_command([py, "-m", "grader.instructor", "feedback", "--root", str(root),
                                        "--assignment", A, "--force", "--jobs", "2"])
        line = [l for l in out.splitlines() if l.startswith("feedback: ") and "written" in l and "[" not in l]
        say(f"make feedback ASSIGNMENT={A} FORCE=1 JOBS=2: {wall:.1f} s wall, {cpu:.1f} s CPU with its workers "
            f"(target: under {TARGETS['feedback']:.0f} s)  [{line[-1][:120] if line else ''}]  {load()}")
        record("feedback", wall=wall, cpu=cpu)
        wall, cpu, out = timed_command([py, "-m", "grader.instructor", "feedback", "--root", str(root),
                                        "--assignment", A, "--jobs", "2"])
        say(f"make feedback ASSIGNMENT={A} again, nothing changed: {wall:.1f} s wall, {cpu:.1f} s CPU  {load()}")
        record("feedback unchanged", wall=wall, cpu=cpu)


# --- the driver -------------------------------------------------------------------------

def replay_task(job, expected_environment, shared):
    """A worker that "grades" instantly: the real result of the seed this student's
    submission is a copy of (big_class.replicate: student i has seed i % n), handed back
    as this student's."""
    seeds = shared["seeds"]
    seed = seeds[int(job.student[1:]) % len(seeds)]
    return dataclasses.replace(shared["replay"][seed], student=job.student)


def real_results(root, seeds):
    """{assignment: {seed: SubmissionResult}} of the seeds' real gradings, read back from
    the gradebook, the status file and autograded/."""
    from nbgrader.api import Gradebook

    from grader.grading.results import GRADED, CellGrade, NotebookChecks, NotebookResult, Record
    from grader.grading.status import Status
    from grader.grading.submission import SubmissionResult, _read_tree

    status = Status(root)
    out = {}
    with Gradebook(layout.db_url(root)) as gb:
        for assignment, students in seeds.items():
            out[assignment] = {}
            for student in students:
                entry = status.get(student, assignment)
                if not entry or entry["status"] != GRADED:
                    out[assignment][student] = SubmissionResult(student, assignment, "needs_attention",
                                                                entry["reason"] if entry else "not graded")
                    continue
                record = Record.from_json(entry)
                sub = gb.find_submission(assignment, student)
                notebooks = {nb.name: NotebookResult(
                    grades={g.name: CellGrade(g.auto_score, g.max_score, g.needs_manual_grade) for g in nb.grades},
                    comments={c.name: c.auto_comment for c in nb.comments},
                    late_penalty=nb.late_submission_penalty, checks=record.notebooks.get(nb.name) or NotebookChecks())
                    for nb in sub.notebooks}
                out[assignment][student] = SubmissionResult(
                    student, assignment, GRADED, elapsed=record.elapsed,
                    timestamp=sub.timestamp.isoformat() if sub.timestamp else None, notebooks=notebooks,
                    files=_read_tree(root / "autograded" / student / assignment))
    return out


def bench_driver(root, seeds, count):
    """The make autograde process's CPU per submission, results replayed by two workers."""
    from grader.grading.autograde import Grading

    replay = real_results(root, seeds)

    class Replaying(Grading):
        task = staticmethod(replay_task)

        def _shared(self, assignment, workdir):
            return {**super()._shared(assignment, workdir), "replay": replay[assignment], "seeds": seeds[assignment]}

    def run(n):
        students = sorted({big_class.student_name(i) for i in range(0, -(-n // len(seeds)))})
        chosen = [(s, a) for s in students for a in sorted(seeds)][:n]
        assignments = sorted({a for _, a in chosen})
        grading = Replaying(root, jobs=2, force=True)
        start, cpu = time.monotonic(), time.process_time()
        summary = grading.run(set(students), assignments, progress=False)
        return time.monotonic() - start, time.process_time() - cpu, summary

    small = 100
    w1, c1, _ = run(small)
    w2, c2, summary = run(count)
    n2 = summary["graded"] + summary["needs_attention"]
    marginal = (c2 - c1) / max(1, n2 - small)
    say(f"driver: {n2} results merged into the class's gradebook in {w2:.1f} s, {c2:.1f} s of the process's CPU "
        f"({1000 * c2 / n2:.1f} ms per submission, everything included: reading and fingerprinting the "
        f"submissions, the cluster, the scheduler); {1000 * marginal:.1f} ms per submission beyond a run of "
        f"{small} (target: at most {1000 * TARGETS['driver_cpu']:.0f} ms)  {load()}")
    record("driver", wall=w2, cpu=c2, submissions=n2, per_submission=c2 / n2, marginal=marginal)
    return c2 / n2, marginal


# --- the formgrader ---------------------------------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_of(pid):
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, root):
        self.root, self.port, self.token = root, _free_port(), "bench-class"
        self.log = open(root / "server.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "server", "--no-browser", f"--port={self.port}",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}", "--allow-root",
             "--ServerApp.jpserver_extensions={'grader.instructor.formgrader': True}"],
            cwd=root, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240
        while True:
            try:
                self.get("/api/status")
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the Jupyter server did not start:\n" + (root / "server.log").read_text()[-3000:])
                time.sleep(0.5)

    def url(self, path):
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}{path}{sep}token={self.token}"

    def get(self, path, follow=True):
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        opener = urllib.request.build_opener(*([] if follow else [NoRedirect()]))
        try:
            with opener.open(self.url(path), timeout=600) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as err:
            if 300 <= err.code < 400:
                return err.code, b"", err.headers
            raise

    def timed(self, path, follow=True):
        cpu, start = _cpu_of(self.proc.pid), time.monotonic()
        status, body, headers = self.get(path, follow)
        return time.monotonic() - start, _cpu_of(self.proc.pid) - cpu, status, body, headers

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def pages(server, student):
    """(page, its URL, the API calls its front end makes)."""
    _, body, _ = server.get(f"/formgrader/api/submitted_notebooks/{A}/{A}")
    ids = [row["id"] for row in json.loads(body)]
    sub_id = ids[len(ids) // 2]
    return sub_id, [
        ("Manage Assignments", "/formgrader/manage_assignments", ["/formgrader/api/assignments"]),
        (f"Manage Submissions ({A})", f"/formgrader/manage_submissions/{A}", [f"/formgrader/api/submissions/{A}"]),
        ("Manual Grading (assignments)", "/formgrader/gradebook", ["/formgrader/api/assignments"]),
        (f"Manual Grading ({A}: notebooks)", f"/formgrader/gradebook/{A}", [f"/formgrader/api/notebooks/{A}"]),
        (f"Manual Grading ({A}: submissions)", f"/formgrader/gradebook/{A}/{A}",
         [f"/formgrader/api/submitted_notebooks/{A}/{A}"]),
        ("Manage Students", "/formgrader/manage_students", ["/formgrader/api/students"]),
        (f"a student ({student})", f"/formgrader/manage_students/{student}",
         [f"/formgrader/api/student_submissions/{student}"]),
        (f"a student's notebooks ({student}, {A})", f"/formgrader/manage_students/{student}/{A}",
         [f"/formgrader/api/student_notebook_submissions/{student}/{A}"]),
        ("one submission", f"/formgrader/submissions/{sub_id}/",
         [f"/formgrader/submissions/{sub_id}/", f"/formgrader/api/grades?submission_id={sub_id}",
          f"/formgrader/api/comments?submission_id={sub_id}"]),
    ]


def bench_formgrader(root, skip):
    server = Server(root)
    try:
        student = "s00042"
        sub_id, listed = pages(server, student)
        worst = 0.0
        for title, _url, calls in listed:
            for attempt in ("first", "again"):
                wall = cpu = 0.0
                for call in calls:
                    w, c, status, _body, _ = server.timed(call)
                    assert status == 200, (call, status)
                    wall, cpu = wall + w, cpu + c
                if attempt == "first":
                    first = (wall, cpu)
            worst = max(worst, first[0])
            say(f"formgrader API, {title}: {first[0]:.2f} s ({first[1]:.2f} s of the server's CPU), again "
                f"{wall:.2f} s ({cpu:.2f} s CPU) (target: under {TARGETS['page']:.0f} s)")
            record(f"api {title}", wall=first[0], cpu=first[1], again=wall, again_cpu=cpu)
        w, c, status, _body, headers = server.timed(f"/formgrader/submissions/{sub_id}/next", follow=False)
        say(f"formgrader API, Next (the redirect): {w:.2f} s ({c:.2f} s CPU), HTTP {status} to "
            f"{headers.get('Location', '')[-60:]} (target: under {TARGETS['next']:.0f} s)  {load()}")
        record("api next", wall=w, cpu=c)
        if "browser" not in skip:
            browser(server, listed, sub_id)
    finally:
        server.stop()


FILLED = """() => {
  if (window.formgrader) return formgrader.grades && formgrader.grades.loaded && formgrader.comments && formgrader.comments.loaded;
  const t = document.querySelector('#main-table');
  if (!t || t.rows.length === 0 || t.innerText.includes('Loading, please wait')) return false;
  return !window.models || window.models.loaded !== false;
}"""


def _browser_cpu():
    """CPU seconds of this process's descendants other than the Jupyter server (Playwright's
    driver and Chromium's processes), live ones and those that ended."""
    import psutil

    me = psutil.Process()
    live = 0.0
    for child in me.children(recursive=True):
        try:
            if "jupyter" in " ".join(child.cmdline()):
                continue
            times = child.cpu_times()
            live += times.user + times.system
        except psutil.Error:
            pass
    return live


def browser(server, listed, sub_id):
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if not executable:
        say("browser: no chromium on the PATH (Debian: apt-get install chromium): skipped")
        return
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable)
        page = chromium.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url("/formgrader/manage_assignments"))  # logs in (the token sets a cookie)
        page.wait_for_function(FILLED, timeout=600_000)
        shots = server.root.parent / "screenshots"
        shots.mkdir(exist_ok=True)
        for i, (title, url, _calls) in enumerate(listed):
            start, cpu, chrome = time.monotonic(), _cpu_of(server.proc.pid), _browser_cpu()
            page.goto(f"http://127.0.0.1:{server.port}{url}")
            page.wait_for_function(FILLED, timeout=600_000, polling=50)
            wall = time.monotonic() - start
            cpu, chrome = _cpu_of(server.proc.pid) - cpu, _browser_cpu() - chrome
            page.screenshot(path=str(shots / f"{i}.png"))
            rows = page.evaluate("() => { const t = document.querySelector('#main-table'); return t ? t.rows.length : 0 }")
            shown = page.locator(".course-late-note").count()
            say(f"browser, {title}: {wall:.2f} s until the table is filled, {cpu:.2f} s of the server's CPU and "
                f"{chrome:.2f} s of Chromium's ({rows} rows shown"
                + (", the late-penalty note shown" if shown else "") + f") (target: under {TARGETS['page']:.0f} s)")
            record(f"browser {title}", wall=wall, cpu=cpu, browser_cpu=chrome, rows=rows)
        page.goto(f"http://127.0.0.1:{server.port}/formgrader/submissions/{sub_id}/")
        page.wait_for_function(FILLED, timeout=600_000)
        start, cpu, chrome = time.monotonic(), _cpu_of(server.proc.pid), _browser_cpu()
        page.goto(f"http://127.0.0.1:{server.port}/formgrader/submissions/{sub_id}/next")
        page.wait_for_function(FILLED, timeout=600_000, polling=50)
        wall = time.monotonic() - start
        cpu, chrome = _cpu_of(server.proc.pid) - cpu, _browser_cpu() - chrome
        moved = sub_id not in page.url
        say(f"browser, Next (to the next submission, loaded): {wall:.2f} s, {cpu:.2f} s of the server's CPU and "
            f"{chrome:.2f} s of Chromium's, {'moved on' if moved else 'DID NOT MOVE'} "
            f"(target: the redirect under {TARGETS['next']:.0f} s)  {load()}")
        record("browser next", wall=wall, cpu=cpu, browser_cpu=chrome)
        page.screenshot(path=str(shots / "next.png"))
        say(f"  screenshots of the pages in {shots}")
        chromium.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=1350)
    parser.add_argument("--assignments", type=int, default=8,
                        help="the course's first N assignments are handed in (8: the class of issue #34)")
    parser.add_argument("--dir", default="/tmp/bench-class")
    parser.add_argument("--reuse", action="store_true", help="use the class built by an earlier run in --dir")
    parser.add_argument("--skip", default="", help="comma-separated: noop,regrade,export,feedback,driver,formgrader,browser")
    parser.add_argument("--driver-submissions", type=int, default=2000)
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    course = Path(args.dir) / "course"
    say(f"bench-class: {args.students} students x {args.assignments} assignments in {course}; {load()}; "
        f"{os.cpu_count()} cores")
    built = json.loads((course / "grader.json").read_text()) if (course / "grader.json").exists() else {}
    reusable = (course / "seeds.json").exists() and built.get("environment") == environment() \
        and built.get("students") == args.students \
        and len(json.loads((course / "seeds.json").read_text())) == args.assignments
    if args.reuse and reusable:
        root, seeds = course, json.loads((course / "seeds.json").read_text())
    else:
        if args.reuse:
            say("  not reused: the class there was graded by another version of the grader (every submission "
                "would be graded again) or has another number of students or assignments; building it again")
        root, seeds = build(course, args.students, args.assignments)
    seconds = worker_seconds(root, seeds)
    mean = sum(seconds) / len(seconds) if seconds else float("nan")
    cpu = json.loads((course / "grading_cpu.json").read_text())["per_submission"]
    say(f"  a worker's time per real grading: {mean:.2f} s of wall time on average over {len(seconds)} "
        f"(max {max(seconds):.2f} s; the machine's load stretches these); {cpu:.2f} s of CPU each, "
        "the workers' start included")
    bench_commands(root, skip, len(seeds))
    if "driver" not in skip:
        per, marginal = bench_driver(root, seeds, min(args.driver_submissions, args.students * len(seeds)))
        n, workers = args.students * len(seeds), 64
        by_workers, by_driver = n * cpu / workers, n * max(per, marginal)
        say(f"estimate, {n} notebooks on {workers} workers of a core each: the workers need {by_workers / 60:.1f} min "
            f"({cpu:.2f} s of CPU per submission, as measured above), this process {by_driver / 60:.1f} min "
            f"({1000 * max(per, marginal):.1f} ms each, receiving and recording as the results come): about "
            f"{max(by_workers, by_driver) / 60:.1f} min (target: at most {TARGETS['estimate'] / 60:.0f} min), "
            "plus starting the cluster")
        record("estimate", minutes=max(by_workers, by_driver) / 60, worker_cpu=cpu, worker_wall_mean=mean)
    if "formgrader" not in skip:
        bench_formgrader(root, skip)
    (Path(args.dir) / "results.json").write_text(json.dumps(RESULTS, indent=1))
    say(f"bench-class: done; {load()}; figures in {Path(args.dir) / 'results.json'}")


if __name__ == "__main__":
    main()
