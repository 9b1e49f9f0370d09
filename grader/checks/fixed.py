"""The visible checks' fixed inputs and expected outputs, read from data/references/
(written by `make references`, grader/answers/fixtures.py)."""
import os
from pathlib import Path

DATA_ENV = "COURSE_REFERENCES"
# data/references/ beside grader/ in the course repository; grader/data/references/ in the
# student package (a wheel, grader/instructor/bundle.py), which has no data/ of its own.
_PACKAGED = Path(__file__).resolve().parents[1] / "data" / "references"
REFERENCES_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "data" / "references"


def references_dir():
    return Path(os.environ.get(DATA_ENV, REFERENCES_DIR))


def load(key, directory=None):
    import torch

    path = Path(directory or references_dir()) / f"{key}.pt"
    if not path.exists():
        raise FileNotFoundError(f"reference file {path} is missing: run `make references`")
    return torch.load(path, map_location="cpu", weights_only=True)
