"""Notebooks 07 and 08 tried as a student would: wrong answers that are not in the
catalogue get an honest message (no mistake named by accident), correct answers written
in unusual ways pass, and the rules the checks enforce while recording (one pass over a
row, no T x T matrix, no fused kernel) say what the code did."""
import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

import grader
from grader.answers.correct import Block, CachedSelfAttention, CORRECT, generate, online_softmax, tiled_attention
from support.paths import ROOT


def _fails(check, student, focus, *expected):
    with pytest.raises(grader.CheckError) as info:
        check(student, focus)
    message = str(info.value)
    for part in expected:
        assert part in message, message
    assert "Traceback" not in message
    return message


# --- 07 ------------------------------------------------------------------------------

class HalfAttentionBlock(Block):
    def forward(self, x):  # the attention branch halved: not a catalogued mistake
        x = x + 0.5 * self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class LoopBlock(Block):
    def forward(self, x):  # correct, written as a loop over the two branches
        h = x
        for norm, branch in ((self.ln1, self.attn), (self.ln2, self.mlp)):
            h = torch.add(h, branch(norm(h)))
        return h


class DropoutBlock(Block):
    def forward(self, x):  # an extra dropout that ignores evaluation mode
        x = x + F.dropout(self.attn(self.ln1(x)), 0.25)
        return x + self.mlp(self.ln2(x))


def test_block_unlisted_mistake_gets_the_difference_not_a_wrong_name():
    message = _fails(grader.check_block, HalfAttentionBlock, "values", "largest difference")
    assert "Likely mistake" not in message


def test_block_written_as_a_loop_passes():
    for focus in grader.FOCUSES["block"]:
        grader.check_block(LoopBlock, focus)
        grader.check_block(LoopBlock, focus, hidden=True, seed=11)


def test_block_dropout_left_on_is_called_what_it_is_not_a_causality_problem():
    grader.check_block(DropoutBlock, "output")
    for focus in ("causal", "values", "eval"):
        with pytest.raises(grader.CheckError) as info:
            grader.check_block(DropoutBlock, focus)
        assert info.value.finding == "not_repeatable", info.value
        assert "not causal" not in str(info.value) and "F.dropout(..., training=self.training)" in str(info.value)


def generate_without_generator(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    for _ in range(max_new_tokens):
        probs = F.softmax(model(idx[:, -block_size:])[:, -1] / temperature, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
    return idx


def generate_crop_one_short(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    for _ in range(max_new_tokens):
        probs = F.softmax(model(idx[:, -(block_size - 1):])[:, -1] / temperature, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return idx


def generate_new_tokens_only(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    return generate(model, idx, max_new_tokens, block_size, temperature, generator)[:, idx.shape[1]:]


def generate_unusual(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    target = idx.size(1) + max_new_tokens
    while idx.size(1) < target:
        last = model(idx[:, max(0, idx.size(1) - block_size):]).select(1, -1)
        probs = torch.softmax(last.div(temperature), -1)
        idx = torch.hstack((idx, probs.multinomial(1, generator=generator)))
    return idx


def test_generate_without_the_generator_is_told_to_pass_it():
    _fails(grader.check_generate, generate_without_generator, "output",
           "two runs with the same seed gave different tokens", "generator=generator")


def generate_powered_probabilities(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """softmax(logits) ** (1 / temperature) is proportional to softmax(logits / temperature):
    the same distribution, and torch.multinomial normalises, so this is a correct answer."""
    for _ in range(max_new_tokens):
        probs = F.softmax(model(idx[:, -block_size:])[:, -1], dim=-1) ** (1 / temperature)
        idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return idx


def test_generate_cropped_one_short_is_named_with_the_length_it_used():
    _fails(grader.check_generate, generate_crop_one_short, "cropped",
           "the sampled tokens differ from the reference: sequence", "(position 6)",
           "Likely mistake: the model was given the last 5 tokens each step", "block_size - 1")


def test_generate_with_powered_probabilities_passes():
    for focus in ("cropped", "values", "hot"):
        grader.check_generate(generate_powered_probabilities, focus)


def test_generate_returning_only_the_new_tokens_gets_the_shape():
    _fails(grader.check_generate, generate_new_tokens_only, "output",
           "returned shape (2, 15); expected (2, 18) = (B, T + max_new_tokens)")


def test_generate_written_unusually_passes():
    for focus in grader.FOCUSES["generate"]:
        grader.check_generate(generate_unusual, focus)
        grader.check_generate(generate_unusual, focus, hidden=True, seed=5)


def test_generate_with_the_stand_in_model_uncropped_names_the_mistake_and_the_sizes():
    def uncropped(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
        for _ in range(max_new_tokens):
            probs = F.softmax(model(idx)[:, -1] / temperature, dim=-1)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
        return idx
    _fails(grader.check_generate, uncropped, "cropped", "context of 10 tokens",
           "positions for only 9 tokens", "Likely mistake: the context not cropped to block_size")


# --- 08 ------------------------------------------------------------------------------

def softmax_directly(scores):
    return torch.softmax(scores, dim=-1)


def softmax_two_passes(scores):
    m = scores.amax(-1, keepdim=True)
    e = torch.exp(scores - m)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype)
    for j in range(scores.shape[-1]):
        l = l + e[..., j]
    return e / l.unsqueeze(-1)


def softmax_in_chunks(scores, chunk=3):
    """Correct, streamed three scores at a time."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros_like(m)
    for block in scores.split(chunk, dim=-1):
        m_new = torch.maximum(m, block.amax(-1))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - shift) + torch.exp(block - shift.unsqueeze(-1)).sum(-1)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)


def test_online_softmax_that_reads_whole_rows_is_refused_with_what_it_did():
    grader.check_online_softmax(softmax_directly, "values")  # the values alone are right
    _fails(grader.check_online_softmax, softmax_directly, "one_pass",
           "it read a whole row at once: aten._softmax over a tensor of shape (3, 5, 11)")
    _fails(grader.check_online_softmax, softmax_two_passes, "one_pass", "aten.amax")


def test_online_softmax_in_chunks_passes():
    for focus in grader.FOCUSES["online_softmax"]:
        grader.check_online_softmax(softmax_in_chunks, focus)
        grader.check_online_softmax(softmax_in_chunks, focus, hidden=True, seed=3)


def tiled_in_name_only(q, k, v, tile_size):
    T = q.shape[-2]
    s = q @ k.mT * q.shape[-1] ** -0.5
    return torch.softmax(s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), -1) @ v


def tiled_queries_against_all_keys(q, k, v, tile_size):
    T = q.shape[-2]
    outs = []
    for i0 in range(0, T, tile_size):
        qi = q[..., i0:i0 + tile_size, :]
        s = qi @ k.mT * q.shape[-1] ** -0.5
        hide = torch.arange(T)[None, :] > torch.arange(i0, i0 + qi.shape[-2])[:, None]
        outs.append(torch.softmax(s.masked_fill(hide, float("-inf")), -1) @ v)
    return torch.cat(outs, dim=-2)


def tiled_fused(q, k, v, tile_size):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def tiled_reverse_einsum(q, k, v, tile_size):
    """Correct, unusual: key tiles visited from the diagonal backwards, einsum products."""
    B, H, T, hs = q.shape
    out = []
    for i0 in range(0, T, tile_size):
        qi = q[:, :, i0:i0 + tile_size]
        rows = torch.arange(i0, i0 + qi.shape[2], device=q.device)[:, None]
        m = l = acc = None
        for j0 in reversed(range(0, i0 + qi.shape[2], tile_size)):
            kj, vj = k[:, :, j0:j0 + tile_size], v[:, :, j0:j0 + tile_size]
            s = torch.einsum("bhqd,bhkd->bhqk", qi, kj) / hs**0.5
            s = s.masked_fill(torch.arange(j0, j0 + kj.shape[2], device=q.device)[None, :] > rows, float("-inf"))
            t_max = s.amax(-1, keepdim=True)
            if m is None:
                m, l, acc = t_max, torch.zeros_like(t_max), torch.zeros_like(qi)
            m_new = torch.maximum(m, t_max)
            p = torch.exp(s - m_new)
            l = l * torch.exp(m - m_new) + p.sum(-1, keepdim=True)
            acc = acc * torch.exp(m - m_new) + torch.einsum("bhqk,bhkd->bhqd", p, vj)
            m = m_new
        out.append(acc / l)
    return torch.cat(out, dim=2)


def test_tiled_full_matrix_strip_and_fused_kernel_are_refused_with_what_they_did():
    for student in (tiled_in_name_only, tiled_queries_against_all_keys, tiled_fused):
        grader.check_tiled_attention(student, "values")  # the values alone are right
    _fails(grader.check_tiled_attention, tiled_in_name_only, "memory",
           "(2, 3, 41, 41)", "the T x T matrix")
    _fails(grader.check_tiled_attention, tiled_queries_against_all_keys, "memory",
           "(2, 3, 9, 41)", "a strip of one tile against all T=41 keys")
    _fails(grader.check_tiled_attention, tiled_fused, "memory", "fused attention kernel")


def test_tiled_written_unusually_passes():
    for focus in grader.FOCUSES["tiled_attention"]:
        grader.check_tiled_attention(tiled_reverse_einsum, focus)
        grader.check_tiled_attention(tiled_reverse_einsum, focus, hidden=True, seed=8)


class CacheCroppedOneShort(CachedSelfAttention):
    def forward(self, x):
        self.block_size -= 1
        try:
            return super().forward(x)
        finally:
            self.block_size += 1


class CacheWithSdpaMask(CachedSelfAttention):
    """Correct, unusual: F.scaled_dot_product_attention with a bottom-right mask."""

    def forward(self, x):
        B, T, _ = x.shape
        heads = lambda t: t.unflatten(-1, (self.n_heads, self.head_size)).transpose(1, 2)
        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        if self.k_cache is not None:
            k, v = torch.cat((self.k_cache, k), 2), torch.cat((self.v_cache, v), 2)
        self.k_cache, self.v_cache = k[..., -self.block_size:, :], v[..., -self.block_size:, :]
        L = self.k_cache.shape[2]
        allowed = torch.ones(T, L, dtype=torch.bool, device=x.device).tril(L - T)
        out = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=allowed)
        return self.proj(out.transpose(1, 2).flatten(2))


class CacheReturningTheLastTokenOnly(CachedSelfAttention):
    def forward(self, x):
        return super().forward(x)[:, -1:]


def test_cache_cropped_one_short_passes_within_block_size_and_fails_past_it():
    grader.check_cached_attention(CacheCroppedOneShort, "short")
    message = _fails(grader.check_cached_attention, CacheCroppedOneShort, "values", "values differ")
    assert "Likely mistake: the cache cropped to block_size - 1 entries" in message


def test_cache_with_an_sdpa_mask_passes():
    for focus in grader.FOCUSES["cached_attention"]:
        grader.check_cached_attention(CacheWithSdpaMask, focus)
        grader.check_cached_attention(CacheWithSdpaMask, focus, hidden=True, seed=4)


def test_cache_output_of_the_wrong_length_says_which_call():
    _fails(grader.check_cached_attention, CacheReturningTheLastTokenOnly, "output",
           "given 7 new token(s)", "expected (2, 7, 12) = (B, T_new, C)")


def test_reference_cache_matches_attention_without_a_cache():
    """The course's answer and the reference agree on a long stream (any chunking of one token)."""
    from grader.answers import reference as ref
    torch.manual_seed(0)
    model = CORRECT["cached_attention"](10, 2, 3, 6).double()
    x = torch.randn(2, 15, 10, dtype=torch.float64)
    with torch.no_grad():
        outs = [model(x[:, :4])] + [model(x[:, t:t + 1]) for t in range(4, 15)]
        want = ref.cached_attention(x, model.query.weight, model.key.weight, model.value.weight,
                                    model.proj.weight, model.proj.bias, 2, 6, [4] + [1] * 11)
    torch.testing.assert_close(torch.cat(outs, 1), want)


def test_recording_modes_do_not_outlive_the_call():
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    grader.check_tiled_attention(tiled_attention, "memory")
    grader.check_online_softmax(online_softmax, "one_pass")
    assert _get_current_dispatch_mode() is None


class CacheTopLeftUncropped(CachedSelfAttention):
    """Two mistakes at once: is_causal=True with a cache, and no cropping."""

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is not None:
            k, v = torch.cat([self.k_cache, k], 2), torch.cat([self.v_cache, v], 2)
        self.k_cache, self.v_cache = k, v
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))


def test_cache_with_two_mistakes_is_named_where_only_one_shows():
    _fails(grader.check_cached_attention, CacheTopLeftUncropped, "short",
           "Likely mistake: the causal mask aligned to the first cached key")
    message = _fails(grader.check_cached_attention, CacheTopLeftUncropped, "values", "largest difference")
    assert "Likely mistake" not in message


# --- graded runs: refusals and shortcuts are named mistakes ----------------------------

def _graded(key, student, focus):
    from grader.checks.core import evaluate
    from grader.checks.exercises import EXERCISES
    return evaluate(EXERCISES[key], student, focus, graded=True)


def test_refused_calls_carry_the_mistake_they_name():
    cases = [("tiled_attention", tiled_in_name_only, "memory", "full_matrix"),
             ("tiled_attention", tiled_queries_against_all_keys, "memory", "tile_strip"),
             ("online_softmax", lambda scores: scores.exp() / scores.exp().sum(-1, keepdim=True),
              "one_pass", "whole_row"),
             ("cached_attention", CacheReturningTheLastTokenOnly, "output", "stream_shape")]
    for key, student, focus, mistake in cases:
        outcome = _graded(key, student, focus)
        assert not outcome.passed and outcome.mistake == mistake, outcome
        assert outcome.mistake_name


def test_fused_attention_scores_nothing_in_graded_tiled_and_cache_checks():
    for key, student in (("tiled_attention", tiled_fused), ("cached_attention", CacheWithSdpaMask)):
        for focus in grader.FOCUSES[key]:
            outcome = _graded(key, student, focus)
            assert not outcome.passed and outcome.mistake == "shortcut", outcome
            assert "F.scaled_dot_product_attention" in outcome.message


def _notebook_namespace(name, grade_id, edit):
    """The given code and one solution cell of a source notebook, run as a notebook would
    (its classes live in one namespace), with the solution edited."""
    import types

    import nbformat
    nb = nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)
    module = types.ModuleType("__main__")
    module.__dict__.update(torch=torch, nn=nn, F=F)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and cell.source.lstrip().startswith("class ") or meta.get("grade_id") == grade_id:
            source = edit(cell.source) if meta.get("grade_id") == grade_id else cell.source
            exec(compile(source, f"<{meta.get('grade_id', 'cell')}>", "exec"), module.__dict__)
        if meta.get("grade_id") == grade_id:
            return module.__dict__


def test_the_notebooks_given_code_leads_to_no_false_mistake_name():
    """The given attention of notebook 07 uses C // n_heads and register_buffer(... .triu(1)):
    neither may be named as the mistake of a Block whose own forward is wrong."""
    ns = _notebook_namespace("07_transformer_block", "Block", lambda s: s.replace(
        "x = x + self.attn(self.ln1(x))", "x = self.ln1(x + self.attn(self.ln1(x)))"))
    message = _fails(grader.check_block, ns["Block"], "values", "largest difference")
    assert "Likely mistake" not in message
