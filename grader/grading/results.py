"""What grading produces, as data: from the grading preprocessor to the worker's result, to
the merge, to the one store of outcomes (autograded/.status.json) that the report reads.

    NotebookChecks   one notebook's checks, as GradingExecute ran them (grader.grading.execute)
    CellGrade        one graded cell's score, as nbgrader recorded it
    NotebookResult   one notebook's grades, comments, late penalty and checks (the worker's)
    Record           one submission's entry in autograded/.status.json (grader.grading.status)

Each is turned into JSON only where it leaves a process or is written to a file (to_json),
and read back with from_json: from_json(to_json(x)) == x.
"""
from dataclasses import dataclass, field
from typing import Optional

from grader.grading.scan import Flag
from grader.outcome import Outcome

GRADED, NEEDS_ATTENTION = "graded", "needs_attention"


@dataclass
class NotebookChecks:
    """One notebook's checks: the outcomes of each test cell, the flags for the instructor,
    and how the notebook's time ran out, if it did."""
    outcomes: dict = field(default_factory=dict)  # grade_id -> [Outcome]
    flags: list = field(default_factory=list)  # [Flag]
    budget_exceeded: bool = False  # its time budget ran out: later cells were not run
    stalled: bool = False  # the machine starved it (wall-clock ceiling): graded again later
    stall_reason: str = ""  # what was measured, where stalled

    def mistakes(self):
        """{grade_id: name of the mistake} the checks of each test cell named."""
        found = {}
        for grade_id, outcomes in self.outcomes.items():
            for outcome in outcomes:
                if outcome.mistake:
                    found[grade_id] = outcome.mistake_name or outcome.mistake
        return found

    def to_json(self):
        data = {"outcomes": {g: [o.to_json() for o in outs] for g, outs in self.outcomes.items()},
                "flags": [vars(f) for f in self.flags],
                "budget_exceeded": self.budget_exceeded, "stalled": self.stalled}
        if self.stall_reason:
            data["stall_reason"] = self.stall_reason
        return data

    @classmethod
    def from_json(cls, data):
        return cls(outcomes={g: [Outcome.from_json(o) for o in outs]
                             for g, outs in data.get("outcomes", {}).items()},
                   flags=[Flag(**f) for f in data.get("flags", [])],
                   budget_exceeded=bool(data.get("budget_exceeded")),
                   stalled=bool(data.get("stalled")), stall_reason=data.get("stall_reason", ""))


@dataclass(frozen=True)
class CellGrade:
    """One graded cell's score as nbgrader's autograde recorded it."""
    auto_score: Optional[float]
    max_score: float
    needs_manual_grade: bool


@dataclass
class NotebookResult:
    """One graded notebook, as the worker hands it to the merge."""
    grades: dict = field(default_factory=dict)  # grade_id -> CellGrade
    comments: dict = field(default_factory=dict)  # comment name -> nbgrader's auto comment
    late_penalty: Optional[float] = None  # the course's late policy for this score (grader.late)
    checks: NotebookChecks = field(default_factory=NotebookChecks)

    def to_json(self):
        return {"grades": {g: vars(c) for g, c in self.grades.items()},
                "comments": dict(self.comments), "late_penalty": self.late_penalty,
                "checks": self.checks.to_json()}

    @classmethod
    def from_json(cls, data):
        return cls(grades={g: CellGrade(**c) for g, c in data["grades"].items()},
                   comments=dict(data["comments"]), late_penalty=data["late_penalty"],
                   checks=NotebookChecks.from_json(data["checks"]))


@dataclass
class Record:
    """One submission's entry in autograded/.status.json: the fingerprint it was graded
    from (None: grade it again), "graded" or "needs_attention" with the reason, and the
    checks of each notebook. The one store of outcomes."""
    status: str
    fingerprint: Optional[str]
    graded_at: float
    elapsed: float
    reason: str = ""
    notebooks: dict = field(default_factory=dict)  # notebook -> NotebookChecks
    # the fingerprint of a submission that needs attention because the machine starved its
    # sandbox: the next run grades it on its wall-clock ceiling rather than asking again
    starved: Optional[str] = None

    def to_json(self):
        data = {"fingerprint": self.fingerprint, "status": self.status,
                "graded_at": self.graded_at, "elapsed": self.elapsed}
        if self.status == GRADED:
            data["notebooks"] = {name: checks.to_json() for name, checks in self.notebooks.items()}
        else:
            data["reason"] = self.reason
        if self.starved:
            data["starved"] = self.starved
        return data

    @classmethod
    def from_json(cls, data):
        return cls(status=data["status"], fingerprint=data.get("fingerprint"),
                   graded_at=data.get("graded_at", 0.0), elapsed=data.get("elapsed", 0.0),
                   reason=data.get("reason") or "", starved=data.get("starved"),
                   notebooks={name: NotebookChecks.from_json(nb)
                              for name, nb in (data.get("notebooks") or {}).items()})

    def flag_texts(self):
        """What the instructor is asked to look at, per notebook: a time budget that ran out,
        then the flags."""
        return ([f"{name}: ran out of its time budget"
                 for name, checks in self.notebooks.items() if checks.budget_exceeded]
                + [f"{name}: {flag.text()}" for name, checks in self.notebooks.items()
                   for flag in checks.flags])

    def mistakes(self):
        """{notebook/grade_id: name of the mistake} the checks named."""
        return {f"{name}/{grade_id}": mistake for name, checks in self.notebooks.items()
                for grade_id, mistake in checks.mistakes().items()}
