"""A check's inputs: the visible checks' fixed ones (data/references/, read once per
exercise), or, for a hidden check, sizes and inputs drawn from its seed."""
import torch

from grader.checks import fixed
from grader.outcome import draw_seed


def draw_dims(exercise, gen):
    """Random sizes for a hidden check, all different from each other where it matters."""
    for _ in range(1000):
        dims = {k: int(torch.randint(lo, hi + 1, (1,), generator=gen)) for k, (_, (lo, hi))
                in exercise.dims.items()}
        if "block_size" in dims:  # drawn as how much longer than T the module is built for
            dims["block_size"] += dims["T"]
        picked = [dims[k] for k in exercise.distinct]
        if len(set(picked)) == len(picked) and _dims_ok(dims):
            return dims
    raise RuntimeError(f"could not draw distinct sizes for {exercise.name}")


def _dims_ok(dims):
    if "n_heads" in dims and "head_size" in dims and "C" in dims:
        return dims["n_heads"] * dims["head_size"] != dims["C"]
    return True


def fixed_dims(exercise):
    return {k: value for k, (value, _) in exercise.dims.items()}


_FIXED = {}


def load_fixed(exercise):
    """{case: {"inputs", "expected"}} of a visible check, read once per exercise."""
    if exercise.key not in _FIXED:
        _FIXED[exercise.key] = fixed.load(exercise.key)
    return _FIXED[exercise.key]


def case_inputs(exercise, spec, hidden, seed, stored=None):
    """(inputs float64 on the CPU, the stored expected output or None, the seed): a hidden
    check draws fresh sizes and inputs from its seed; a visible one reads its stored case
    (stored: the exercise's cases, else those of data/references/)."""
    if hidden:
        seed = draw_seed() if seed is None else seed
        gen = torch.Generator().manual_seed(seed)
        return exercise.draw(gen, spec.case, draw_dims(exercise, gen)), None, seed
    stored_case = (stored or load_fixed(exercise))[spec.case]
    return stored_case["inputs"], stored_case["expected"], seed
