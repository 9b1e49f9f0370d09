"""Notebook 09's checks: right answers written several ways pass (complex and real RoPE with
neighbours paired; repeat_interleave, expand + reshape, indexing and a grouped einsum for
GQA; a cache as a tensor cut to its last entries, a deque, a ring of slots); the streamed
cache equals attention over the whole text with the window mask at every step, for several
windows and texts several windows long; a cache that grows, keeps repeated heads or more
than the window is named, one that keeps a constant table is not; every catalogued mistake
is named by a graded check too; and the function that does the whole GQA exercise is refused
when graded."""
import collections
import math

import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

import nbformat

from grader.answers import correct, reference
from grader.answers.correct import CORRECT, student_from
from grader.checks import core
from grader.checks.exercises import EXERCISES
from grader.instructor import first_cell
from grader.instructor.notebooks import ROOT

KEYS = ("apply_rope", "grouped_query_attention", "sliding_window_attention")


# --- right answers, written other ways -------------------------------------------------

def rope_complex(x, positions):
    hs = x.shape[-1]
    freqs = 1.0 / 10000.0 ** (torch.arange(0, hs, 2, dtype=x.dtype, device=x.device) / hs)
    angles = torch.outer(positions.to(x.dtype), freqs)  # (T, hs/2)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], hs // 2, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def rope_matrix(x, positions):
    """Each pair turned by a 2 x 2 rotation matrix, built per position and pair."""
    hs = x.shape[-1]
    i = torch.arange(hs // 2, dtype=x.dtype, device=x.device)
    theta = positions.to(x.dtype)[:, None] * torch.exp(-2 * i / hs * math.log(10000.0))  # (T, hs/2)
    rot = torch.stack([torch.stack([theta.cos(), -theta.sin()], -1),
                       torch.stack([theta.sin(), theta.cos()], -1)], -2)  # (T, hs/2, 2, 2)
    pairs = x.unflatten(-1, (hs // 2, 2))  # (..., T, hs/2, 2)
    return (rot @ pairs.unsqueeze(-1)).squeeze(-1).flatten(-2)


def gqa_expand(q, k, v, n_kv_heads, mask):
    B, nh, T_q, hs = q.shape
    T_k, g = k.shape[2], nh // n_kv_heads
    k = k[:, :, None].expand(B, n_kv_heads, g, T_k, hs).reshape(B, nh, T_k, hs)
    v = v[:, :, None].expand(B, n_kv_heads, g, T_k, hs).reshape(B, nh, T_k, hs)
    wei = (q @ k.mT / math.sqrt(hs)).masked_fill(mask, float("-inf")).softmax(-1)
    return wei @ v


def gqa_index(q, k, v, n_kv_heads, mask):
    nh = q.shape[1]
    which = torch.arange(nh, device=q.device) // (nh // n_kv_heads)
    k, v = k[:, which], v[:, which]
    return torch.softmax((q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).masked_fill(mask, -math.inf), dim=-1) @ v


def gqa_einsum(q, k, v, n_kv_heads, mask):
    B, nh, T_q, hs = q.shape
    qg = q.view(B, n_kv_heads, nh // n_kv_heads, T_q, hs)  # the groups side by side
    wei = torch.einsum("bkgqd,bktd->bkgqt", qg, k) * hs ** -0.5
    wei = wei.masked_fill(mask, float("-inf")).softmax(-1)
    return torch.einsum("bkgqt,bktd->bkgqd", wei, v).reshape(B, nh, T_q, hs)


class Given(nn.Module):
    """The notebook's given __init__ and reset_cache (defined here, so that the checks see the
    classes below as code of their own, as a notebook's cells are)."""

    def __init__(self, C, n_heads, n_kv_heads, head_size, window):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_size, self.window = n_heads, n_kv_heads, head_size, window
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_kv_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_kv_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None
        self.seen = 0


def _heads(module, x):
    B, T, C = x.shape
    split = lambda t, n: t.view(B, T, n, module.head_size).transpose(1, 2)
    positions = torch.arange(module.seen, module.seen + T, device=x.device)
    q = rope_complex(split(module.query(x), module.n_heads), positions)
    k = rope_complex(split(module.key(x), module.n_kv_heads), positions)
    return q, k, split(module.value(x), module.n_kv_heads), positions


class CatCache(Given):
    """The cache as tensors cut to their last window - 1 entries."""

    def forward(self, x):
        T = x.shape[1]
        q, k, v, positions = _heads(self, x)
        if self.k_cache is not None:
            k, v = torch.cat([self.k_cache, k], 2), torch.cat([self.v_cache, v], 2)
        key_pos = torch.arange(self.seen + T - k.shape[2], self.seen + T, device=x.device)
        hide = (key_pos[None] > positions[:, None]) | (key_pos[None] <= positions[:, None] - self.window)
        out = gqa_index(q, k, v, self.n_kv_heads, hide)
        self.k_cache, self.v_cache = k[:, :, max(k.shape[2] + 1 - self.window, 0):], v[:, :, max(v.shape[2] + 1 - self.window, 0):]
        return _finish(self, out, T)


def _finish(module, out, T):
    module.seen += T
    return module.proj(out.transpose(1, 2).reshape(out.shape[0], T, -1))


class DequeCache(Given):
    """One (position, key, value) per token in a deque of window - 1 entries."""

    def reset_cache(self):
        self.entries = collections.deque(maxlen=self.window - 1)
        self.seen = 0

    def forward(self, x):
        T = x.shape[1]
        q, k, v, positions = _heads(self, x)
        old = list(self.entries)
        keys = torch.cat([e[1] for e in old] + [k], 2)
        values = torch.cat([e[2] for e in old] + [v], 2)
        key_pos = torch.tensor([e[0] for e in old] + list(range(self.seen, self.seen + T)), device=x.device)
        hide = (key_pos[None] > positions[:, None]) | (key_pos[None] <= positions[:, None] - self.window)
        out = gqa_einsum(q, keys, values, self.n_kv_heads, hide)
        for t in range(T):
            self.entries.append((self.seen + t, k[:, :, t:t + 1], v[:, :, t:t + 1]))
        return _finish(self, out, T)


class RingCache(Given):
    """A ring of window slots, the entry of position p in slot p % window, attended with SDPA."""

    def reset_cache(self):
        self.k_ring = self.v_ring = None
        self.seen = 0

    def forward(self, x):
        B, T, C = x.shape
        W = self.window
        q, k, v, positions = _heads(self, x)
        if self.k_ring is None:
            self.k_ring = torch.zeros(B, self.n_kv_heads, W, self.head_size, dtype=x.dtype, device=x.device)
            self.v_ring = torch.zeros_like(self.k_ring)
        slots = torch.arange(W, device=x.device)
        slot_pos = self.seen - 1 - torch.remainder(self.seen - 1 - slots, W)  # (W,) -W.. for empty slots
        key_pos = torch.cat([slot_pos, positions])
        may = (key_pos[None] <= positions[:, None]) & (key_pos[None] > positions[:, None] - W) & (key_pos[None] >= 0)
        out = F.scaled_dot_product_attention(q, torch.cat([self.k_ring, k], 2), torch.cat([self.v_ring, v], 2),
                                             attn_mask=may, enable_gqa=True)
        last = positions[-W:]
        self.k_ring, self.v_ring = self.k_ring.clone(), self.v_ring.clone()
        self.k_ring[:, :, last % W] = k[:, :, -W:]
        self.v_ring[:, :, last % W] = v[:, :, -W:]
        return _finish(self, out, T)


class RopeTable(CatCache):
    """Right, with a constant table of angles kept as a buffer: it holds more than the cache,
    but never more as the text grows."""

    def __init__(self, C, n_heads, n_kv_heads, head_size, window):
        super().__init__(C, n_heads, n_kv_heads, head_size, window)
        self.register_buffer("table", torch.zeros(4096, head_size), persistent=False)


RIGHT = {
    "apply_rope": [correct.apply_rope, rope_complex, rope_matrix],
    "grouped_query_attention": [correct.grouped_query_attention, gqa_expand, gqa_index, gqa_einsum],
    "sliding_window_attention": [correct.SlidingWindowAttention, CatCache, DequeCache, RingCache, RopeTable],
}
RIGHT_CASES = [(k, s) for k, students in RIGHT.items() for s in students]


@pytest.mark.parametrize("key,student", RIGHT_CASES, ids=[f"{k}-{s.__name__}" for k, s in RIGHT_CASES])
def test_a_right_answer_written_another_way_passes_every_check(key, student):
    """Every focus, and a hidden values check; graded too, where the code is its own (this module's)."""
    ex = EXERCISES[key]
    graded = student.__module__ == __name__
    for focus in ex.focuses:
        core.run_check(ex, student, focus, quiet=True, graded=graded)
    core.run_check(ex, student, "values", hidden=True, seed=3, quiet=True, graded=graded)


@pytest.mark.parametrize("student", RIGHT["apply_rope"], ids=lambda s: s.__name__)
def test_right_rope_keeps_its_scores_relative_on_inputs_whose_float32_angles_drift(student):
    """In float32 an angle's error grows with its position: on the inputs of seed 1757161841
    a correct answer's scores moved by 1.9e-5 between two vectors whose
    score is near 0, and the relative check, comparing scores with an absolute tolerance of
    1e-5, failed it (one hidden check in about a thousand). A rotation whose angles are not
    position * frequency (position ** 1.01) still fails on every one of these seeds."""
    ex = EXERCISES["apply_rope"]
    seeds = (1757161841, 241, 1955, 2156)  # and the three of seeds 0 to 2999 it failed
    for seed in seeds:
        outcome = core.evaluate(ex, student, "relative", hidden=True, seed=seed)
        assert outcome.passed, (seed, outcome.message)

    def drifting(x, positions):
        return student(x, positions.to(x.dtype) ** 1.01)
    for seed in seeds:
        outcome = core.evaluate(ex, drifting, "relative", hidden=True, seed=seed)
        assert not outcome.passed and "cosine between two of them" in outcome.message, outcome.message


def test_the_other_pairing_convention_is_named_not_passed():
    def rotate_half_rope(x, positions):  # Hugging Face's Llama, GPT-NeoX: (i, i + half)
        half = x.shape[-1] // 2
        inv = 1.0 / 10000 ** (torch.arange(0, x.shape[-1], 2, dtype=x.dtype) / x.shape[-1])
        angles = torch.cat([positions.to(x.dtype)[:, None] * inv] * 2, -1)
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * angles.cos() + rotated * angles.sin()
    with pytest.raises(core.CheckError, match="rotate_half convention"):
        core.run_check(EXERCISES["apply_rope"], rotate_half_rope, "values", quiet=True)


# --- the streamed cache against attention over the whole text ----------------------------

def _brute_force(x, module):
    """Each token's output computed alone: its query against the keys of its window, from the
    whole sequence, with nothing of the cache (an independent check of the reference)."""
    B, T, C = x.shape
    module.reset_cache()
    q, k, v, _ = _heads(module, x)
    g = module.n_heads // module.n_kv_heads
    outs = []
    for t in range(T):
        lo = max(0, t - module.window + 1)
        kk = k[:, :, lo:t + 1].repeat_interleave(g, 1)
        vv = v[:, :, lo:t + 1].repeat_interleave(g, 1)
        w = torch.softmax(q[:, :, t:t + 1] @ kk.mT / math.sqrt(module.head_size), -1)
        outs.append(w @ vv)
    module.reset_cache()
    return module.proj(torch.cat(outs, 2).transpose(1, 2).reshape(B, T, -1))


def _weights(module):
    return (module.query.weight, module.key.weight, module.value.weight, module.proj.weight, module.proj.bias,
            module.n_heads, module.n_kv_heads, module.window)


CHUNKINGS = {
    "one at a time": lambda T, W: [1] * T,
    "a long prompt, then one at a time": lambda T, W: [2 * W + 1] + [1] * (T - 2 * W - 1),
    "chunks of several sizes": lambda T, W: [W + 2, 1, 1, W, 3, 1, W + 3] + [1] * (T - 3 * W - 11),
}


@pytest.mark.parametrize("window", [2, 3, 5, 8])
@pytest.mark.parametrize("cls", [correct.SlidingWindowAttention, CatCache, DequeCache, RingCache],
                         ids=lambda c: c.__name__)
def test_the_cache_equals_windowed_attention_over_the_whole_text_at_every_step(window, cls):
    torch.manual_seed(window)
    T = 5 * window + 9  # several windows long
    module = cls(12, 6, 2, 4, window).double()
    x = torch.randn(2, T, 12, dtype=torch.float64)
    with torch.no_grad():
        brute = _brute_force(x, module)
        for name, chunking in CHUNKINGS.items():
            chunks = chunking(T, window)
            assert sum(chunks) == T and all(n > 0 for n in chunks)
            whole = reference.sliding_window_attention(x, *_weights(module), chunks)
            torch.testing.assert_close(whole, brute, rtol=1e-10, atol=1e-12)
            module.reset_cache()
            start = 0
            for n in chunks:  # every step, compared as it comes
                out = module(x[:, start:start + n])
                torch.testing.assert_close(out, whole[:, start:start + n], rtol=1e-10, atol=1e-12,
                                           msg=f"{name}: step at {start}")
                start += n


# --- what the module holds ---------------------------------------------------------------

class NeverCropped(CatCache):
    def forward(self, x):
        out = super().forward(x)
        self.k_all = getattr(self, "k_all", [])  # everything, on top of the right cache
        self.k_all.append(torch.zeros(x.shape[0], self.n_kv_heads, x.shape[1], self.head_size))
        return out


class RepeatedHeads(CatCache):
    def forward(self, x):
        out = super().forward(x)
        g = self.n_heads // self.n_kv_heads  # a copy of the cache with every head repeated, kept
        self.k_repeated, self.v_repeated = self.k_cache.repeat_interleave(g, 1), self.v_cache.repeat_interleave(g, 1)
        return out


class TwoWindows(CatCache):
    def forward(self, x):
        old = (self.k_cache, self.v_cache)
        out = super().forward(x)
        if old[0] is not None:  # keep twice as much as the window needs
            self.k_cache = torch.cat([old[0], self.k_cache], 2)[:, :, -2 * self.window:]
            self.v_cache = torch.cat([old[1], self.v_cache], 2)[:, :, -2 * self.window:]
        return out


@pytest.mark.parametrize("cls,key", [(NeverCropped, "cache_grows"), (RepeatedHeads, "cache_repeated_heads")])
def test_a_cache_that_is_not_the_window_is_named(cls, key):
    ex = EXERCISES["sliding_window_attention"]
    core.run_check(ex, cls, "values", quiet=True)  # the values are right
    for hidden in (False, True):
        with pytest.raises(core.CheckError) as info:
            core.run_check(ex, cls, "memory", hidden=hidden, seed=5, quiet=True)
        assert info.value.finding == key, str(info.value)


def test_a_cache_of_two_windows_is_too_long():
    ex = EXERCISES["sliding_window_attention"]
    outcome = core.evaluate(ex, TwoWindows, "memory", graded=True, hidden=True, seed=2)
    assert not outcome.passed and outcome.mistake == "cache_too_long", outcome.message


# --- the catalogue named by the hidden check; the issue's mistakes named when graded -------

MISTAKES = [(k, m) for k in KEYS for m in EXERCISES[k].mistakes]


@pytest.mark.parametrize("key,mistake", MISTAKES, ids=[f"{k}-{m.key}" for k, m in MISTAKES])
def test_every_catalogued_mistake_is_named_by_a_hidden_check(key, mistake):
    """The catalogue's own code (grader/answers/mistakes.py) is the course's, which a graded
    run refuses as a shortcut: the hidden values check runs ungraded here, and the mistakes
    below, written into the notebook's own solution cells, are graded."""
    with pytest.raises(core.CheckError) as failed:  # run_check: evaluate would also draw its picture
        core.run_check(EXERCISES[key], student_from(key, mistake.fn), "values", hidden=True, seed=11, quiet=True)
    assert failed.value.finding == mistake.key, str(failed.value)


NB09 = ROOT / "solutions" / "09_attention_in_todays_models" / "09_attention_in_todays_models.ipynb"


def notebook_code(edits=None):
    """The names the notebook's imports and solution cells define, run as notebook code
    (module __main__), with edits ({grade_id: [(old, new)]}) made to the solution cells."""
    nb = nbformat.read(NB09, as_version=4)
    ns = {"__name__": "__main__"}
    imports = next(c for c in nb.cells if c.cell_type == "code" and not first_cell.is_install_cell(c))
    exec(compile(imports.source, "<imports>", "exec"), ns)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution"):
            source = "\n".join(line for line in cell.source.splitlines() if "### " not in line)
            for old, new in (edits or {}).get(grade_id, ()):
                assert old in source, (grade_id, old)
                source = source.replace(old, new)
            exec(compile(source, f"<{grade_id}>", "exec"), ns)
    return ns


PAIRS = "a, b = x[..., 0::2], x[..., 1::2]"
STACK = "return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)"
ANGLES = "angles = positions.to(x.dtype).view(-1, 1) * 10000.0 ** (-2 * i / x.shape[-1])"
K_REPEAT, V_REPEAT = "k = k.repeat_interleave(group, dim=1)", "v = v.repeat_interleave(group, dim=1)"
BAND, KEEP = "(cols <= rows - self.window)", "keep = max(0, k.shape[2] - (self.window - 1))"
POSITIONS = "positions = torch.arange(self.seen, self.seen + T_new, device=x.device)"
NOT_LATER = "(cols > rows)"
GQA_CALL = "out = grouped_query_attention(q, k, v, self.n_kv_heads, hidden)"
# (exercise key, focus, {grade_id: [(old, new)]}, the mistake a graded check must name): every
# mistake of issue #32, written as a student would write it in the notebook
ISSUE_MISTAKES = {
    "half split, both conventions": ("apply_rope", "values", {"apply_rope": [
        (PAIRS, "a, b = x[..., :half], x[..., half:]"),
        (STACK, "return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)")]}, "rope_half_split"),
    "rotate_half with neighbours' angles": ("apply_rope", "values", {"apply_rope": [
        (PAIRS, "a, b = x[..., :half], x[..., half:]"),
        (STACK, "c, s = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)\n"
                "    return x * c + torch.cat([-b, a], dim=-1) * s")]}, "rope_rotate_half_interleaved_angles"),
    "neighbours with the halves' angles": ("apply_rope", "values", {"apply_rope": [
        (STACK, "c, s = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)\n"
                "    return x * c + torch.stack([-b, a], dim=-1).flatten(-2) * s")]},
        "rope_adjacent_pairs_half_angles"),
    "positions from 0": ("apply_rope", "values", {"apply_rope": [
        (ANGLES, "angles = torch.arange(x.shape[-2], dtype=x.dtype).view(-1, 1) * 10000.0 ** (-2 * i / x.shape[-1])")]},
        "rope_positions_from_zero"),
    "tile": ("grouped_query_attention", "values", {"grouped_query_attention": [
        (K_REPEAT, "k = k.repeat(1, group, 1, 1)"), (V_REPEAT, "v = v.repeat(1, group, 1, 1)")]}, "kv_tiled"),
    "never repeated": ("grouped_query_attention", "values", {"grouped_query_attention": [
        (K_REPEAT, "pass"), (V_REPEAT, "pass")]}, "kv_not_repeated"),
    "repeated along time": ("grouped_query_attention", "values", {"grouped_query_attention": [
        (K_REPEAT, "k = k.repeat_interleave(group, dim=2).reshape(q.shape[0], q.shape[1], k.shape[2], -1)"),
        (V_REPEAT, "v = v.repeat_interleave(group, dim=2).reshape(q.shape[0], q.shape[1], v.shape[2], -1)")]},
        "kv_repeated_along_time"),
    "every head on head 0": ("grouped_query_attention", "values", {"grouped_query_attention": [
        (K_REPEAT, "k = torch.stack([k[:, h // q.shape[1]] for h in range(q.shape[1])], dim=1)"),
        (V_REPEAT, "v = torch.stack([v[:, h // q.shape[1]] for h in range(q.shape[1])], dim=1)")]},
        "kv_head_zero"),
    "a window of W + 1": ("sliding_window_attention", "values", {"SlidingWindowAttention": [
        (BAND, "(cols < rows - self.window)"), (KEEP, "keep = max(0, k.shape[2] - self.window)")]},
        "window_plus_one"),
    "the diagonal hidden": ("sliding_window_attention", "prompt", {"SlidingWindowAttention": [
        (NOT_LATER, "(cols >= rows)")]}, "window_hides_itself"),
    "the next token seen": ("sliding_window_attention", "prompt", {"SlidingWindowAttention": [
        (NOT_LATER, "(cols > rows + 1)")]}, "window_sees_next"),
    "the cache one long, single tokens unmasked": ("sliding_window_attention", "values", {"SlidingWindowAttention": [
        (GQA_CALL, "out = grouped_query_attention(q, k, v, self.n_kv_heads, hidden if T_new > 1 else hidden & False)"),
        (KEEP, "keep = max(0, k.shape[2] - self.window)")]}, "cache_one_long"),
    "the cache one short": ("sliding_window_attention", "values", {"SlidingWindowAttention": [
        (KEEP, "keep = max(0, k.shape[2] - (self.window - 2))")]}, "cache_one_short"),
    "positions restarted per chunk": ("sliding_window_attention", "values", {"SlidingWindowAttention": [
        (POSITIONS, "positions = torch.arange(T_new, device=x.device)")]}, "positions_restarted_in_mask"),
    "positions restarted per chunk, for the rotation only": ("sliding_window_attention", "values", {
        "SlidingWindowAttention": [(POSITIONS, POSITIONS + "\n        turn_at = positions - self.seen"),
                                   ("positions)  # (B, n_heads", "turn_at)  # (B, n_heads"),
                                   ("positions)  # (B, n_kv_heads", "turn_at)  # (B, n_kv_heads")]},
        "positions_restarted"),
    "the cache never cropped": ("sliding_window_attention", "memory", {"SlidingWindowAttention": [
        (KEEP, "keep = 0")]}, "cache_grows"),
}


@pytest.mark.parametrize("case", ISSUE_MISTAKES)
def test_each_mistake_of_the_issue_is_named_by_graded_checks(case):
    key, focus, edits, expected = ISSUE_MISTAKES[case]
    ns = notebook_code(edits)
    student = ns[EXERCISES[key].name]
    with pytest.raises(core.CheckError) as failed:  # as evaluate(graded=True), without its picture
        core.run_check(EXERCISES[key], student, focus, graded=True, quiet=True)
    assert failed.value.finding == expected, str(failed.value)
    assert len(str(failed.value).splitlines()) <= 6, str(failed.value)


def test_the_notebooks_own_solution_passes_graded():
    ns = notebook_code()
    for key in KEYS:
        for focus in EXERCISES[key].focuses:
            outcome = core.evaluate(EXERCISES[key], ns[EXERCISES[key].name], focus, graded=True)
            assert outcome.passed, outcome.message


def test_pytorchs_grouped_attention_passes_in_the_lab_with_a_note_and_scores_nothing_graded():
    def sdpa_gqa(q, k, v, n_kv_heads, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=~mask, enable_gqa=True)
    ex = EXERCISES["grouped_query_attention"]
    result = core.run_check(ex, sdpa_gqa, "values", quiet=True)
    assert any("F.scaled_dot_product_attention" in n for n in result.notes)
    outcome = core.evaluate(ex, sdpa_gqa, "values", graded=True)
    assert not outcome.passed and outcome.mistake == "shortcut"


def test_pytorchs_attention_inside_the_window_module_is_its_own_work():
    """Part C's exercise is the window and the cache: the attention step may be PyTorch's."""
    assert core.evaluate(EXERCISES["sliding_window_attention"], RingCache, "values", graded=True).passed


def test_every_exercise_of_09_has_a_correct_answer_and_a_catalogue():
    for key in KEYS:
        assert key in CORRECT and len(EXERCISES[key].mistakes) >= 7
