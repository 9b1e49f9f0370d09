"""What a diagnosis says (a Finding) and what it knows of an exercise (its Diagnosis hooks)."""
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional


@dataclass(frozen=True)
class Finding:
    """A named mistake: shown as 'Likely mistake: {name} — {hint}'."""
    key: str
    name: str
    hint: str


@dataclass(frozen=True)
class Scale:
    """The factor an exercise's scores are multiplied by, and how its findings say it."""
    factor: Callable  # factor(sizes) -> the right factor
    said: str  # "use {said}; here ..." after a listed wrong scale
    fitted: str  # "use {fitted}, computed from the inputs" after a fitted one


@dataclass(frozen=True)
class Diagnosis:
    """What the diagnosis knows of one exercise (an Exercise holds it). Every hook is
    optional: one left out leaves its finding out, and the check's message comes plain."""
    sizes: Optional[Callable] = None  # sizes(inputs) -> {course name: size}; None: no analysis
    crop: Optional[Callable] = None  # crop(inputs, L) -> inputs cut to the first L time steps
    picture: str = "output"  # the picture's axes (AXES); "ids" are shown whole, never cut
    reads: Mapping = field(default_factory=dict)  # size name -> where to read it ("x.shape[1]")
    baselines: Optional[Callable] = None  # baselines(inputs) -> [(description, tensor)]
    task: str = "see the exercise text"  # what a trivial answer skipped
    variants: tuple = ()  # families fn(diagnosis, inputs, sizes) -> (Finding, knobs) ...
    scale: Optional[Scale] = None  # the scores' scale: wrong ones are looked for, and fitted
    first_finding: Optional[Callable] = None  # fn(inputs, actual, expected, close), before the variants
    analysis: Optional[Callable] = None  # fn(inputs, actual, expected): replaces the value analysis
    nonfinite_hint: Optional[Callable] = None  # fn(index) -> hint, NaN/inf at one index of one dim
    running_max: bool = False  # a running maximum (online softmax, tiles): its own findings
    given_code: bool = False  # 07 and 08: the student's part sits in given code, with no mask argument
    reads_no_values: bool = False  # the notebook asks for no value read (.item(), a tensor kept as a
    # count): the run on the meta device, which has no values, then counts a value read as a mistake
    passing_note: Optional[Callable] = None  # fn(inputs, facts) -> a note for a passing check, or None
    error_finding: Optional[Callable] = None  # fn(sizes in an error, sizes, its message) -> Finding or None, before the rules


PLAIN = Diagnosis()


def reads(first, **dims):
    """Diagnosis.reads for sizes read off the input called first: B from dim 0, T from
    dim 1, C from the last, unless dims says otherwise (T="-2"; C=None: not read from it)."""
    dims = {"B": "0", "T": "1", "C": "-1", **dims}
    return {name: f"{first}.shape[{d}]" for name, d in dims.items() if d is not None}
