"""Instructor commands around autograde (each is also a make target):

    python -m grader.instructor setup-exchange [--owner NAME]                 # make setup-exchange
    python -m grader.instructor release-exchange [--assignment A] [--force]   # make release-exchange
    python -m grader.instructor roster students.csv                           # make roster CSV=...
    python -m grader.instructor collect [--assignment A]                      # make collect
    python -m grader.instructor collect --zip lms.zip [--assignment A] [--times times.csv]
                                                    # make collect ZIP=... [ASSIGNMENT=...] [TIMES=...]
    python -m grader.instructor extensions extensions.csv                     # make extensions CSV=...
    python -m grader.instructor feedback [--assignment A] [--student S] [--force] [--jobs N]
                                                    # make feedback [ASSIGNMENT=...] [STUDENT=...] [FORCE=1]
    python -m grader.instructor release-feedback [--assignment A]             # make release-feedback
    python -m grader.instructor export                                        # make export

The work is done in grader.instructor's lms (LMS downloads), submission_times, roster,
extensions, late (late policy) and report (grades.csv, grades_canvas.csv, the grade report).
A names one assignment or several separated by spaces ("01_bag_of_words 05_scaled_attention"),
as `make release` takes them; an LMS download holds one.
"""
import argparse
import os
import sys
from pathlib import Path

from grader.grading import late, layout


def _api(root, **settings):
    config = layout.load_config(root)
    config.Application.log_level = "WARNING"
    for key, value in settings.items():
        section, name = key.split(".")
        setattr(getattr(config, section), name, value)
    return layout.nbgrader_api(config)


def ensure_exchange(root):
    """nbgrader's exchange folder (grader.instructor.exchange): the local route's is created
    on first use, private to this account; the course server's must have been set up."""
    from grader.instructor import exchange

    try:
        return exchange.ensure_local(layout.load_config(root))
    except exchange.ExchangeSetupError as e:
        raise SystemExit(str(e)) from None


def setup_exchange(root, owner=None):
    """Build or repair the course server's exchange (make setup-exchange)."""
    from grader.instructor import exchange

    try:
        lines = exchange.setup(layout.load_config(root), root, owner)
    except (exchange.ExchangeSetupError, KeyError) as e:
        raise SystemExit(f"setup-exchange: {e}") from None
    for line in lines:
        print(line)


def _chosen(root, assignment):
    """The assignments ASSIGNMENT names (one, or several separated by spaces, as `make release`
    takes them), every one there is where it names none."""
    names = layout.assignments(root)
    chosen = (assignment or "").split()
    unknown = [name for name in chosen if name not in names]
    if unknown:
        raise SystemExit(f"unknown assignment {unknown[0]!r}: use one of {', '.join(names)}")
    return chosen or names


def release_exchange(root, assignment=None, force=False):
    """nbgrader release_assignment for every assignment (or one) into the exchange."""
    root = Path(root)
    ensure_exchange(root)
    config = layout.load_config(root)
    api = _api(root, **{"ExchangeReleaseAssignment.force": True} if force else {})
    released = api.get_released_assignments()
    course = config.CourseDirectory.course_id
    for name in _chosen(root, assignment):
        if not (root / "notebooks" / name).is_dir():
            print(f"{name}: no student version in notebooks/{name}: run make release first")
            continue
        if name in released and not force:
            print(f"{name}: already in the exchange (FORCE=1 replaces it; students who fetched it keep their copy)")
            continue
        result = api.release_assignment(name)
        print(f"{name}: " + (f"released to {Path(config.Exchange.root) / course}" if result["success"]
                             else f"FAILED: {(result.get('error') or result.get('log') or '')[-500:]}"))


def collect(root, zip_path=None, assignment=None, times_path=None):
    """From the local exchange (nbgrader collect), or from an LMS download (grader.instructor.lms),
    dated from the LMS's times file when given."""
    root = Path(root)
    if times_path and not zip_path:
        raise SystemExit("TIMES=... dates the files of an LMS download: give the zip too (make collect ZIP=... TIMES=...)")
    if zip_path:
        from grader.instructor import lms
        if not assignment:
            assignment = lms.guess_assignment(root, zip_path)
            print(f"{zip_path} holds {assignment}")
        return lms.collect(root, zip_path, assignment, times_path=times_path)
    from grader.instructor import exchange

    ensure_exchange(root)
    config = layout.load_config(root)
    api = _api(root)
    released = api.get_released_assignments()
    for name in _chosen(root, assignment):
        if name not in released:
            print(f"{name}: not released to the exchange (make release-exchange)")
            continue
        before = _submission_times(root, name)
        result = api.collect(name)
        if result["success"]:
            print(_collected(name, before, _submission_times(root, name)))
        else:
            print(f"{name}: collect failed: {(result.get('error') or '')[-300:]}")
        refused = exchange.refusals(config, name)
        lines = [r.line() for r in refused]
        # and those refused while they were copied (changed after they were checked)
        entries = tuple(f"{exchange.printable(r.entry)}: " for r in refused)
        lines += [line.split("Not collected: ", 1)[1] for line in (result.get("log") or "").splitlines()
                  if "Not collected: " in line and not line.split("Not collected: ", 1)[1].startswith(entries or ("\0",))]
        if lines:
            print(f"  refused {len(lines)} submission(s), not collected (left in the exchange's "
                  "inbound/ folder):")
            for line in lines:
                print(f"    {line}")
        due = exchange.duedate(layout.db_url(root), config.CourseDirectory.course_id, name)
        late = exchange.late_writes(config, name, due)
        if late:
            print(f"  {len(late)} submission(s) changed after the time they claim:")
            for write in late:
                print(f"    {write.line()}")


def _submission_times(root, assignment):
    """{student: the time of their submission in submitted/} (nbgrader's timestamp.txt)."""
    times = {}
    for folder in Path(root).glob(f"submitted/*/{assignment}"):
        stamp = folder / "timestamp.txt"
        times[folder.parent.name] = stamp.read_text().strip() if stamp.exists() else ""
    return times


def _collected(assignment, before, after):
    """What a collect changed in submitted/: new students, newer submissions that replaced
    the one collected before, and those that stayed as they were."""
    new = sorted(set(after) - set(before))
    replaced = sorted(s for s in set(after) & set(before) if after[s] != before[s])
    lines = [f"{assignment}: {len(after)} submission(s) in submitted/: {len(new)} new, "
             f"{len(replaced)} replaced by a newer submission, {len(after) - len(new) - len(replaced)} unchanged"]
    if new:
        lines.append(f"  new: {', '.join(new)}")
    if replaced:
        lines.append(f"  replaced: {', '.join(replaced)} (autograde grades the newer one)")
    return "\n".join(lines)


def feedback(root, assignment=None, student=None, force=False, jobs=None, scheduler=None, memory=None):
    """Per-student HTML feedback for the graded submissions (of one assignment, one student,
    or both), hidden tests removed, with the late penalty of the current score; only what
    changed since the pages were made (grader.instructor.feedback)."""
    from grader.instructor import feedback as pages

    try:
        return pages.run(root, assignment, student, force, jobs, scheduler, memory)
    except KeyboardInterrupt:
        print("feedback: INTERRUPTED (Ctrl-C): the pages written so far are kept; run the same command again "
              "to make the rest (what is done is skipped)", file=sys.stderr)
        raise SystemExit(130)


def release_feedback(root, assignment=None):
    """nbgrader release_feedback: students on the exchange route get it with fetch_feedback."""
    from grader.instructor import feedback as pages_of

    root = Path(root)
    ensure_exchange(root)
    api = _api(root)
    names = _chosen(root, assignment)
    withdrawn = [w for name in (names if assignment else [None]) for w in pages_of.withdraw_stale(root, name)]
    for line in pages_of.withdrawn_lines(withdrawn):
        print(line)
    for name in names:
        pages = list((root / "feedback").glob(f"*/{name}/*.html"))
        if not pages:
            continue
        result = api.release_feedback(name)
        state = (f"released {len(pages)} feedback page(s)" if result["success"]
                 else f"FAILED: {(result.get('error') or '')[-500:]}")
        print(f"{name}: {state}")


def export(root, csv_path=None, report_dir=None):
    from grader.instructor import report

    result = report.export(root, csv_path=csv_path, report_dir=report_dir)
    return result["grades"], result["report"]


def import_extensions(root, csv_path):
    """Store the CSV's extensions, then apply the late policy again to what they change."""
    from nbgrader.api import Gradebook

    from grader.instructor import extensions

    store, config = extensions.import_csv(root, csv_path)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        changed = late.apply(gb, config)
    for student, assignment, notebook, old, new in changed:
        print(f"  {student} / {assignment} / {notebook}: late penalty {old or 0:g} -> {new or 0:g} in the gradebook")
    print(f"extensions: {len(store)} in {extensions.STORE}; {len(changed)} penalty(ies) changed in the gradebook")
    return store


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader.instructor", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["setup-exchange", "release-exchange", "roster", "collect",
                                            "feedback", "release-feedback", "export", "extensions"])
    parser.add_argument("csv", nargs="?", help="roster, extensions: the CSV file")
    parser.add_argument("--zip", default=None)
    parser.add_argument("--times", default=None, help="collect --zip: the LMS's submission times (CSV)")
    parser.add_argument("--assignment", default=None,
                        help="one assignment, or several separated by spaces (an LMS download: one)")
    parser.add_argument("--student", default=None, help="feedback: only this student's")
    parser.add_argument("--force", action="store_true",
                        help="release-exchange: replace a released assignment; feedback: make every page again")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS") or 0) or None,
                        help="feedback: embedded workers (default: one per core)")
    parser.add_argument("--scheduler", default=os.environ.get("SCHEDULER") or None,
                        help="feedback: an existing Dask scheduler's address")
    parser.add_argument("--memory", default=os.environ.get("MEMORY") or None)
    parser.add_argument("--owner", default=None,
                        help="setup-exchange, run by root: the instructor's login name (default: "
                             "the course folder's owner)")
    parser.add_argument("--root", default=str(layout.ROOT))
    args = parser.parse_args(argv)
    assignment = args.assignment or None
    if args.command == "setup-exchange":
        setup_exchange(args.root, args.owner)
    elif args.command == "release-exchange":
        release_exchange(args.root, assignment, args.force)
    elif args.command == "roster":
        if not args.csv:
            raise SystemExit("roster needs a CSV file: make roster CSV=students.csv")
        from grader.instructor import roster
        roster.import_roster(args.root, args.csv)
    elif args.command == "extensions":
        if not args.csv:
            raise SystemExit("extensions needs a CSV file: make extensions CSV=extensions.csv")
        import_extensions(args.root, args.csv)
    elif args.command == "collect":
        if args.zip and len((assignment or "").split()) > 1:
            raise SystemExit("an LMS download holds one assignment: give one name (make collect ZIP=... ASSIGNMENT=...)")
        collect(args.root, args.zip or None, assignment, args.times or None)
    elif args.command == "feedback":
        # an unknown name stops here, with the names there are; several are made one after another
        for name in (_chosen(args.root, assignment) if assignment else [None]):
            feedback(args.root, name, args.student or None, args.force, args.jobs, args.scheduler, args.memory)
    elif args.command == "release-feedback":
        release_feedback(args.root, assignment)
    else:
        export(args.root)


if __name__ == "__main__":
    main()
