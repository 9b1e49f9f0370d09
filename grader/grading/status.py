"""autograded/.status.json: what was graded from which files, with which result.

One entry per (student, assignment), a grader.grading.results.Record: the fingerprint of
everything the grade depends on, "graded" or "needs_attention" (with the reason), and the
typed outcomes of every check. It is the one store of outcomes: grades.csv, the report and
the tests read them here. The file is replaced atomically, so a killed run never leaves half of it, and a
re-run regrades exactly what changed.

A large class is not rewritten whole for every submission: past SMALL entries, the
results are appended to autograded/.status.journal, a line each, which is folded into the
file once it holds an eighth as many lines as the file has entries (at the end of a run
too, or for a small class). Reading replays the journal over the file; a line cut short by a kill is
ignored, so that submission is graded again.
"""
import hashlib
import json
import os
from pathlib import Path

from grader.grading.layout import ROOT
from grader.grading.results import Record


SMALL = 500  # entries below which every set rewrites the whole file


class Status:
    def __init__(self, root):
        self.path = Path(root) / "autograded" / ".status.json"
        self.journal = self.path.with_name(".status.journal")
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}
        self._count = sum(len(v) for v in self.data.values())
        self._journaled = 0
        if self.journal.exists():
            for line in self.journal.read_bytes().splitlines():
                try:
                    item = json.loads(line)
                    self._put(item["student"], item["assignment"], item["entry"])
                except (ValueError, KeyError, TypeError):
                    continue  # cut short by a kill: that submission is graded again
                self._journaled += 1

    def get(self, student, assignment):
        return self.data.get(student, {}).get(assignment)

    def _put(self, student, assignment, entry):
        by_assignment = self.data.setdefault(student, {})
        self._count += assignment not in by_assignment
        by_assignment[assignment] = entry

    def set(self, student, assignment, entry):
        self.set_many([(student, assignment, entry)])

    def set_many(self, items):
        """Record several entries ((student, assignment, entry)) with one write: the whole
        file for a small class or when the journal is due to be folded, else one append to
        the journal."""
        if not items:
            return
        for student, assignment, entry in items:
            self._put(student, assignment, entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._count < SMALL or self._journaled + len(items) >= self._count // 8:
            self._write()
            return
        lines = "".join("\n" + json.dumps({"student": student, "assignment": assignment, "entry": entry},
                                          sort_keys=True) + "\n"  # never glued to a line a kill cut short
                        for student, assignment, entry in items)
        with open(self.journal, "a") as f:
            f.write(lines)
        self._journaled += len(items)

    def drop_student(self, student):
        """Forget every entry of a student (a stand-in id merged into the roster's,
        grader.instructor.roster), written at once."""
        if self.data.pop(student, None) is not None:
            self._count = sum(len(v) for v in self.data.values())
            self._write()

    def flush(self):
        """Fold the journal into the file."""
        if self._journaled or self.journal.exists():
            self._write()

    def fold_if_due(self):
        """At the end of a run: fold the journal into the file, unless the class is large
        and the journal short (a regrade of a few submissions does not rewrite the status
        of the whole class; the journal is read with the file)."""
        if self._count < SMALL or self._journaled >= self._count // 8:
            self.flush()

    def _write(self):
        """Write the whole file (atomically: a kill never leaves half of it), then drop
        the journal it now contains."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)
        self.journal.unlink(missing_ok=True)
        self._journaled = 0

    def entries(self):
        for student, by_assignment in sorted(self.data.items()):
            for assignment, entry in sorted(by_assignment.items()):
                yield student, assignment, entry

    def records(self):
        """(student, assignment, Record) for every entry."""
        for student, assignment, entry in self.entries():
            yield student, assignment, Record.from_json(entry)

    def attention(self):
        return [(s, a, e) for s, a, e in self.entries() if e["status"] == "needs_attention"]


def _hash_tree(h, base, pattern="*"):
    base = Path(base)
    if not base.exists():
        return
    for path in sorted(p for p in base.rglob(pattern) if p.is_file() and not p.is_symlink()
                       and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(base)).encode() + b"\0")
        h.update(path.read_bytes())


def grading_inputs(root, assignment, duedate=None):
    """A hash of everything a grade depends on besides the submission: the assignment's
    source, the grader's code, the reference data, the course configuration, the due date."""
    h = hashlib.sha256()
    _hash_tree(h, Path(root) / "solutions" / assignment)
    _hash_tree(h, ROOT / "grader", "*.py")
    _hash_tree(h, ROOT / "data" / "references")
    config = Path(root) / "nbgrader_config.py"
    h.update(config.read_bytes() if config.exists() else b"")
    h.update(str(duedate).encode())
    return h.hexdigest()


QUICK_DEPTH = 40  # folders deeper than this get no quick signature (the submission is read, and refused)


def quick_signature(folder, inputs, settings):
    """What a submission's folder looks like to the OS, with the grading inputs and the
    settings: every entry's path, type, size, inode, modification and change times (the
    change time moves with any write, and no program can set it). Equal to the one recorded
    when the submission was graded, the files are the ones graded: a run that changes
    nothing reads none of them. Computed before the files are read, so a file written
    after that is seen next time. None for a folder nested deeper than QUICK_DEPTH."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    h.update(inputs.encode())
    folder = str(folder)
    info = os.lstat(folder)
    h.update(f"{info.st_mode}\0{info.st_ino}\0{info.st_mtime_ns}\0{info.st_ctime_ns}\n".encode())
    pending = [("", 0)]
    while pending:
        rel, depth = pending.pop()
        if depth > QUICK_DEPTH:
            return None
        with os.scandir(os.path.join(folder, rel)) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                info = entry.stat(follow_symlinks=False)
                path = os.path.join(rel, entry.name)
                h.update(f"{path}\0{info.st_mode}\0{info.st_size}\0{info.st_ino}\0{info.st_mtime_ns}\0"
                         f"{info.st_ctime_ns}\n".encode("utf-8", "surrogateescape"))
                if entry.is_dir(follow_symlinks=False):
                    pending.append((path, depth + 1))
    return h.hexdigest()


def fingerprint(files, inputs, settings):
    """The fingerprint of one submission: its files, the grading inputs, the settings."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    h.update(inputs.encode())
    for rel in sorted(files):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256(files[rel]).digest())
    return h.hexdigest()
