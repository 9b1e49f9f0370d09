"""Grading on a real Dask cluster: `dask scheduler` and `dask worker` processes started
here on 127.0.0.1, faults caused as they happen on a cluster (a worker's machine lost in
the middle of a task, a submission whose every worker is lost, the scheduler gone),
and the same scores as the embedded default.

These grade real notebooks (5 to 30 s each on a loaded machine), so the classes are
tiny and the tests share one xdist worker.
"""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from support.classes import CLASS_ASSIGNMENT as A, CLASS_BUDGET as BUDGET
from support.gradebook import db_scores
from support import synthetic
from support.processes import ProcessCluster
from grader.grading.status import Status

pytestmark = pytest.mark.xdist_group("dask")  # its own worker: real clusters beside the graded class

CLASS = {"ada": "correct", "bo": "softmax_wrong_dim", "di": "stub"}
SCORES = {"correct": 10.0, "softmax_wrong_dim": 2.0, "stub": 0.0}
RUN_TIMEOUT = 1200  # seconds; a bound, never reached on an idle machine


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course whose gradebook knows the assignments, copied for each class."""
    return synthetic.make_course(tmp_path_factory.mktemp("dask") / "course", gradebook=True)


def make_class(course, folder, students):
    root = Path(shutil.copytree(course, folder))
    for student, variant in students.items():
        synthetic.make_submission(root, student, A, variant)
    return root


def autograde(root, *args):
    return subprocess.Popen([sys.executable, "-m", "grader.grading.autograde", "--root", str(root),
                             "--budget", str(BUDGET), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def outcomes(root):
    """{student: {grade_id: [passed, ...]}} from the status file."""
    found = {}
    for student, _, entry in Status(root).entries():
        for nb in (entry.get("notebooks") or {}).values():
            found[student] = {gid: [o["passed"] for o in outs] for gid, outs in nb["outcomes"].items()}
    return found


def graded_once(root, students):
    """Every submission has one status entry, one gradebook submission, one autograded
    folder, and nothing half-written is left."""
    entries = {s: e for s, a, e in Status(root).entries()}
    assert set(entries) == set(students)
    assert {e["status"] for e in entries.values()} == {"graded"}
    assert set(db_scores(root)) == set(students)
    assert sorted(p.parent.name for p in (root / "autograded").glob(f"*/{A}")) == sorted(students)
    assert not list((root / "autograded").glob("*/.*.incoming"))


def _executing(client, address, prefix):
    """Whether the worker at `address` is running a task whose key starts with `prefix`
    (the scheduler's processing() also lists the tasks queued on it)."""
    try:
        running = client.run(lambda dask_worker: [str(ts.key) for ts in dask_worker.state.executing],
                             workers=[address], on_error="return").get(address, [])
    except OSError:  # the worker went away meanwhile
        return False
    return isinstance(running, list) and any(key.startswith(prefix) for key in running)


def kernels_of(proc):
    try:
        return [p for p in psutil.Process(proc.pid).children(recursive=True)
                if "ipykernel_launcher" in " ".join(p.cmdline())
                or p.name() == "ipykernel"]  # a warm kernel, forked from the template
    except psutil.NoSuchProcess:
        return []


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing_and_scores_match_the_embedded_default(course, tmp_path):
    external = make_class(course, tmp_path / "external", CLASS)
    embedded = make_class(course, tmp_path / "embedded", CLASS)

    with ProcessCluster(tmp_path / "cluster", workers=2) as cluster:
        run = autograde(external, "--scheduler", cluster.address)
        killed, deadline = None, time.monotonic() + RUN_TIMEOUT
        with cluster.client() as watcher:
            while killed is None and run.poll() is None and time.monotonic() < deadline:
                for address, keys in watcher.processing().items():
                    worker = cluster.worker_of(address, watcher)
                    if keys and kernels_of(worker):  # in the middle of a notebook
                        cluster.kill_worker(worker)  # its machine is lost: nanny, worker, kernel
                        killed = keys[0]
                        break
                time.sleep(0.5)
        code, out, err = finish(run)
    assert code == 0, err[-3000:]
    assert killed, f"no worker was seen grading:\n{out[-3000:]}"
    # one merge per submission: nothing lost, nothing counted twice
    assert f"{len(CLASS)} graded, 0 need attention, 0 unchanged and skipped" in out, out
    graded_once(external, CLASS)
    assert any(killed == f"grade-{s}-{A}-" + Status(external).get(s, A)["fingerprint"][:12]
               for s in CLASS), killed  # the killed task was rerun and merged

    code, out, err = finish(autograde(embedded, "--jobs", "2"))
    assert code == 0, err[-3000:]
    graded_once(embedded, CLASS)
    assert db_scores(external) == db_scores(embedded) == {s: SCORES[v] for s, v in CLASS.items()}
    assert outcomes(external) == outcomes(embedded)


def test_a_submission_that_kills_its_workers_needs_attention_after_the_allowed_tries(course, tmp_path):
    """Every machine that grades ava's submission is lost (as a kernel bug it triggers would
    take it down: an output flood no longer can, since the kernel and its client bound what
    they send and read): the scheduler's own setting decides, here one death is forgiven and
    the second is not, and the rest of the class is graded on the machines that replace them.
    Dask charges a death to every task on the worker, the ones queued behind the running one
    too, so a submission whose workers died is graded again alone at the end: ben, queued
    beside ava whenever the scheduler put them on one worker, is graded; ava, whose workers
    die when she runs alone too (four kills in all), needs attention."""
    students = {"ava": "stub", "ben": "stub"}
    root = make_class(course, tmp_path / "course", students)
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"}
    with ProcessCluster(tmp_path / "cluster", workers=1, scheduler_env=env) as cluster:
        run = autograde(root, "--scheduler", cluster.address)
        kills, deadline = 0, time.monotonic() + RUN_TIMEOUT
        with cluster.client() as watcher:
            while kills < 4 and run.poll() is None and time.monotonic() < deadline:
                for address, keys in watcher.processing().items():
                    if any(key.startswith(f"grade-ava-{A}-") for key in keys):
                        worker = cluster.worker_of(address, watcher)
                        if _executing(watcher, address, f"grade-ava-{A}-") and kernels_of(worker):
                            # in the middle of ava's notebook, not of a classmate's queued before it
                            cluster.kill_worker(worker)
                            kills += 1
                            cluster.add_worker()
                            break
                time.sleep(0.3)
        code, out, err = finish(run)
    assert kills == 4, out[-3000:] + err[-3000:]
    assert code == 0, err[-3000:]
    assert "1 graded, 1 need attention" in out, out
    ava = Status(root).get("ava", A)
    assert ava["status"] == "needs_attention"
    assert "killed 2 workers" in ava["reason"] and "also when it was graded alone" in ava["reason"], ava["reason"]
    assert db_scores(root) == {"ben": 0.0}
    # recorded: the next run does not try it again (and lose workers again) while it is unchanged
    from grader.grading.autograde import Grading

    todo, refused, skipped = Grading(root, budget=BUDGET).plan()
    assert (todo, refused, skipped) == ([], [], 2)


def test_a_scheduler_that_goes_away_stops_the_run_with_what_finished_recorded(course, tmp_path):
    students = {f"s{i}": "stub" for i in range(3)}
    root = make_class(course, tmp_path / "course", students)
    with ProcessCluster(tmp_path / "cluster", workers=1) as cluster:
        run = autograde(root, "--scheduler", cluster.address)
        deadline = time.monotonic() + RUN_TIMEOUT
        while run.poll() is None and not Status(root).data and time.monotonic() < deadline:
            time.sleep(0.5)
        cluster.kill_scheduler()
        code, out, err = finish(run)
    assert code == 1, (out, err[-3000:])
    assert "went away" in err and "everything finished so far is recorded" in err, err[-3000:]
    done = {s for s, a, e in Status(root).entries()}
    assert 1 <= len(done) < len(students)
    assert f"{len(done)} graded, 0 need attention" in out, out
    assert set(db_scores(root)) == done  # the gradebook holds exactly what the status says
    assert "Traceback" not in err

    code, out, err = finish(autograde(root, "--jobs", "1"))  # run again: the rest is graded
    assert code == 0, err[-3000:]
    assert f"{len(students) - len(done)} graded, 0 need attention, {len(done)} unchanged" in out, out
    graded_once(root, students)


def test_the_embedded_cluster_starts_no_more_workers_than_there_are_submissions(course, tmp_path):
    """Regrading one student with JOBS=4 starts one worker (each costs seconds to start)."""
    from grader.grading.autograde import Grading

    root = make_class(course, tmp_path / "course", {"ada": "stub"})
    grading = Grading(root, jobs=4, budget=BUDGET)
    assert grading.run(progress=False)["graded"] == 1
    assert grading.started == 1


def test_embedded_workers_start_warm_with_the_environment_and_threads_of_the_run(course, monkeypatch):
    """The embedded workers are forked from one server that has imported torch, nbgrader and
    the checks (a worker then starts in a fraction of a second), yet each has the grading
    process's environment as it is when the run starts (not as it was when that server
    started) and torch's thread count for its share of the cores; they fork their kernels
    from the grading process's one warm template, not each from its own; and they spend no CPU
    on what only a dashboard shows (the embedded cluster serves none)."""
    import dask
    import distributed  # noqa: F401 (its configuration's defaults)

    from grader.grading import autograde
    from grader.isolation import template

    def facts(dask_worker):
        import gc
        import os
        import sys

        import psutil
        import torch
        return {"probe": os.environ.get("COURSE_RUN_PROBE"), "threads": torch.get_num_threads(),
                "preloaded": all(m in sys.modules for m in autograde.WORKER_PRELOAD),
                # what the preload made, out of the collector's sight (grader.grading.freeze)
                "frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects()),
                "parent": " ".join(psutil.Process().parent().cmdline()),
                "template": os.environ.get(template.ENV),
                # what only a dashboard shows (autograde.DASK_CONFIG): no profiler sampling the
                # task thread, the event loop timed once a second, not fifty times
                "sampling": sorted({"profile", "profile-cycle"} & set(dask_worker.periodic_callbacks)),
                "tick_ms": dask_worker.periodic_callbacks["tick"].callback_time}

    grading = autograde.Grading(course, jobs=2, budget=BUDGET)
    seen = []
    for probe in (None, "set after the first cluster"):
        if probe:
            monkeypatch.setenv("COURSE_RUN_PROBE", probe)
        with dask.config.set(autograde.DASK_CONFIG):
            cluster, client = grading._connect(2)
            try:
                seen.append(list(client.run(facts).values()))
            finally:
                autograde._close_quietly(client, cluster)
    threads = max(1, (os.cpu_count() or 1) // 2)
    for run, probe in zip(seen, (None, "set after the first cluster")):
        assert len(run) == 2
        for worker in run:
            assert worker["probe"] == probe
            assert worker["threads"] == threads
            assert worker["preloaded"]
            assert worker["frozen"] > 10 * worker["tracked"], worker
            assert "forkserver" in worker["parent"]
            assert worker["template"] == str(template.shared()[0].socket)
            assert worker["sampling"] == [] and worker["tick_ms"] >= 1000
    # the feedback pages' cluster (grader.instructor.feedback): forked alike, handed no template
    with dask.config.set(autograde.DASK_CONFIG):
        cluster, client = grading._connect(2, kernels=False)
        try:
            pages = list(client.run(facts).values())
        finally:
            autograde._close_quietly(client, cluster)
    assert [("forkserver" in w["parent"], w["preloaded"], w["template"], w["sampling"]) for w in pages] \
        == [(True, True, None, [])] * 2
