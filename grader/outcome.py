"""The result of one check, as data (no torch): what a graded test cell shows, what the
merge records in autograded/.status.json and what the report reads back.

Kept apart from the check engine (grader.core, which needs torch) so that the instructor's
tools read outcomes without importing torch.
"""
import random
from dataclasses import dataclass, field
from typing import Optional


def draw_seed():
    """A fresh seed for a hidden check."""
    return random.SystemRandom().randrange(2**31)


def check_label(student, description, hidden, seed):
    """"<student>: <what the focus checks>[ (hidden check, seed N)]": the one wording of a
    check's label, in JupyterLab, in a graded cell and in a check that was not run."""
    where = f" (hidden check, seed {seed})" if hidden else ""
    return f"{student}: {description}{where}"


@dataclass
class Outcome:
    """The result of one check, as data: what the test cell shows and the merge reads."""
    exercise: str  # the exercise's name (the student's object is expected under it)
    student: str  # the name of the object that was checked
    focus: str
    hidden: bool
    seed: Optional[int]
    passed: bool
    label: str  # check_label(...)
    message: str = ""  # for the learner when it failed: what is wrong, maybe the likely mistake
    mistake: Optional[str] = None  # the key of the named mistake (catalogue or analysis)
    mistake_name: Optional[str] = None  # and its name, as the message gives it
    notes: tuple = ()  # for a passed check (e.g. a shortcut noted in JupyterLab)
    # PNG: expected | yours | difference. Shown in the graded cell only, never stored.
    picture: Optional[bytes] = field(default=None, repr=False, compare=False)

    def line(self):
        """What a passing check prints."""
        return f"\u2713 {self.label}" + "".join(f"\n  {note}" for note in self.notes)

    def to_json(self):
        data = dict(vars(self))
        data.pop("picture")
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_json(cls, data):
        """The Outcome that to_json wrote (without its picture)."""
        return cls(**{**data, "notes": tuple(data.get("notes", ()))})
