"""The sizes of a check's inputs, and the numbers and shapes they name."""
import itertools
import math
import re


def sizes(exercise, inputs):
    """The sizes of a check's inputs, by their course names; None when the exercise does not
    say them (then nothing is analysed)."""
    hook = exercise.diagnosis.sizes
    return hook(inputs) if hook else None


def _products(sz):
    """Names for the numbers that only one thing can be: a size that no other size equals,
    or, for a number that is no size, the one product of two to four sizes that gives it.
    A number two sizes (or two products) share gets no name: naming it would be a guess."""
    singles = {}
    for k, v in sz.items():
        singles.setdefault(v, []).append(k)
    names = {v: ks[0] for v, ks in singles.items() if len(ks) == 1 and v > 1}
    items = [(k, v) for k, v in sz.items() if k != "block_size" and v > 1]
    products = {}
    for r in (2, 3, 4):
        for combo in itertools.combinations_with_replacement(items, r):
            if any(combo.count(c) > 2 for c in combo):
                continue  # B·B·B: no shape multiplies a size by itself three times
            value = math.prod(v for _, v in combo)
            if value not in singles:
                products.setdefault(value, set()).add("\u00b7".join(k for k, _ in combo))
    names.update({value: labels.pop() for value, labels in products.items() if len(labels) == 1})
    return names


def name_number(n, sz):
    """'T' for 7 when T = 7, 'B·T' for 21 when B = 3 and T = 7; None when no size fits, or
    when more than one does."""
    return _products(sz).get(int(n))


def name_shape(shape, sz):
    """'(B, n_heads, T, head_size)' when every dim is exactly one size; None otherwise."""
    single = {}
    for k, v in sz.items():
        single.setdefault(v, []).append(k)
    names = [single.get(int(d), [None, None]) for d in shape]
    if len(shape) == 0 or any(len(n) != 1 for n in names):
        return None
    return "(" + ", ".join(n[0] for n in names) + ")"


# What one index along a dim is called, by the dim's name: "at positions t = 0, 1, 2"
INDEX_WORDS = {"T": ("position", "t"), "B": ("sequence", "b"), "C": ("channel", "c"),
               "N": ("score", "j"), "n_heads": ("head", "h"), "head_size": ("feature", "d"),
               "vocab_size": ("token id", "v")}


def index_word(name):
    """(word, letter) for one index along the dim called name: ("position", "t") for T."""
    return INDEX_WORDS.get(name, (f"index along {name}", "i"))


def at_indices(name, indices):
    """Indices along the dim called name, said as indices, never as the dim's size:
    "position t = 3", "positions t = 36..40" (indices: an int, a list of ints, or a "36..40" span)."""
    if isinstance(indices, int):
        indices = [indices]
    text = indices if isinstance(indices, str) else ", ".join(map(str, indices))
    many = isinstance(indices, str) or len(indices) > 1
    if name not in INDEX_WORDS:
        return f"{name}, {'indices' if many else 'index'} {text}"
    word, letter = INDEX_WORDS[name]
    return f"{word}{'s' if many else ''} {letter} = {text}"


def _sizes_text(sz, only=None):
    return ", ".join(f"{k} = {v}" for k, v in sz.items() if only is None or k in only)


SIZE_CONTEXT = re.compile(r"[\[(]\s*(\d+(?:\s*,\s*\d+)+)\s*,?\s*[\])]|torch\.Size\(\[([\d, ]+)\]\)"
                          r"|\bsizes? \(?(\d+)\)?|\bshape \[?(\d+)")


def size_numbers(message):
    """The numbers an error message gives as sizes (in a shape like (2, 3, 5) or [2, 3], or
    after "size"), not the dims, positions, counts and indices it also mentions."""
    out = []
    for m in SIZE_CONTEXT.finditer(message):
        text = next(g for g in m.groups() if g is not None)
        out += [int(n) for n in re.findall(r"\d+", text)]
    return out
