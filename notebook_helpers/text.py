"""The course's own small text corpus, as characters."""
from pathlib import Path

import torch

# data/corpus.txt of the course repository; notebook_helpers/data/corpus.txt in the student
# package (a wheel, grader/instructor/bundle.py).
_PACKAGED = Path(__file__).resolve().parent / "data" / "corpus.txt"
CORPUS_PATH = _PACKAGED if _PACKAGED.is_file() else Path(__file__).resolve().parent.parent / "data" / "corpus.txt"


def load_corpus(path=CORPUS_PATH):
    """The whole corpus as one string."""
    return Path(path).read_text(encoding="utf-8")


class Vocabulary:
    """Maps each distinct character of a text to an integer id and back."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.itos = dict(enumerate(self.chars))

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        unknown = sorted(set(text) - set(self.stoi))
        if unknown:
            raise ValueError(f"characters not in the vocabulary: {unknown!r}")
        return [self.stoi[ch] for ch in text]

    def decode(self, ids):
        return "".join(self.itos[int(i)] for i in ids)


def get_batch(data, batch_size, block_size, generator=None):
    """batch_size random windows of block_size consecutive ids: a (B, T) LongTensor."""
    if len(data) <= block_size:
        raise ValueError(f"need more than block_size={block_size} ids, got {len(data)}")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    return torch.stack([data[s : s + block_size] for s in starts.tolist()])  # (B, T)
