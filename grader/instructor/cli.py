"""Instructor commands around autograde (each is also a make target):

    python -m grader.instructor setup-exchange [--owner NAME]                 # make setup-exchange
    python -m grader.instructor release-exchange [--assignment A] [--force]   # make release-exchange
    python -m grader.instructor roster students.csv                           # make roster CSV=...
    python -m grader.instructor collect [--assignment A]                      # make collect
    python -m grader.instructor collect --zip lms.zip [--assignment A] [--times times.csv]
                                                    # make collect ZIP=... [ASSIGNMENT=...] [TIMES=...]
    python -m grader.instructor extensions extensions.csv                     # make extensions CSV=...
    python -m grader.instructor feedback                                      # make feedback
    python -m grader.instructor release-feedback [--assignment A]             # make release-feedback
    python -m grader.instructor export                                        # make export

The work is done in grader.instructor's lms (LMS downloads), submission_times, roster,
extensions, late (late policy) and report (grades.csv, grades_canvas.csv, the grade report).
"""
import argparse
from pathlib import Path

from grader.instructor import late
from grader.grading import layout


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
    names = layout.assignments(root)
    if assignment and assignment not in names:
        raise SystemExit(f"unknown assignment {assignment!r}: use one of {', '.join(names)}")
    return [assignment] if assignment else names


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
        if refused:
            print(f"  refused {len(refused)} submission(s), not collected (left in the exchange's "
                  "inbound/ folder):")
            for refusal in refused:
                print(f"    {refusal.line()}")
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


def feedback(root):
    """Per-student HTML feedback for every graded submission, hidden tests removed, with the
    late penalty of the current score (grader.instructor.late)."""
    from nbgrader.api import Gradebook

    root = Path(root)
    config = layout.load_config(root)
    with Gradebook(layout.db_url(root), config.CourseDirectory.course_id) as gb:
        late.apply(gb, config)
        graded = sorted((sub.student.id, a.name) for a in gb.assignments
                        for sub in gb.assignment_submissions(a.name))
    api = _api(root)
    done = 0
    for student, assignment in graded:
        result = api.generate_feedback(assignment, student)
        if not result["success"]:
            print(f"feedback failed for {student} / {assignment}: {(result.get('error') or '')[-300:]}")
            continue
        done += 1
    print(f"feedback written for {done} submission(s) under feedback/")


def release_feedback(root, assignment=None):
    """nbgrader release_feedback: students on the exchange route get it with fetch_feedback."""
    root = Path(root)
    ensure_exchange(root)
    api = _api(root)
    for name in _chosen(root, assignment):
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
    parser.add_argument("--assignment", default=None)
    parser.add_argument("--force", action="store_true", help="release-exchange: replace a released assignment")
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
        collect(args.root, args.zip or None, assignment, args.times or None)
    elif args.command == "feedback":
        feedback(args.root)
    elif args.command == "release-feedback":
        release_feedback(args.root, assignment)
    else:
        export(args.root)


if __name__ == "__main__":
    main()
