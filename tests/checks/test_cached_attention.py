"""The key/value cache's check feeds a chunk of several tokens into a cache that already holds
some, on the visible inputs and on every hidden draw."""
import torch

from grader.answers import fixtures
from grader.checks.core import CheckError, run_check
from grader.checks.exercises import EXERCISES


def test_a_chunk_after_a_non_empty_cache_is_checked():
    """The 'short' case sends several tokens at once into a cache that holds some already."""
    chunks = fixtures.load("cached_attention")["short"]["inputs"]["chunks"]
    assert chunks[0] >= 1 and chunks[1] > 1, chunks
    sizes = {2, 12, 3, 5, 9}  # B, C, n_heads, head_size, block_size of the visible check
    assert chunks[1] not in sizes and chunks[1] != sum(chunks), chunks
    for seed in range(20):  # hidden checks draw other sizes: the reference accepts every draw
        run_check(EXERCISES["cached_attention"], ReferenceCache, "short", hidden=True, seed=seed, quiet=True)


class ReferenceCache(torch.nn.Module):
    """A right CachedSelfAttention (the notebook's given __init__ and a plain forward)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = torch.nn.Linear(C, n_heads * head_size, bias=False)
        self.key = torch.nn.Linear(C, n_heads * head_size, bias=False)
        self.value = torch.nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = torch.nn.Linear(n_heads * head_size, C)
        self.k_cache = self.v_cache = None

    def forward(self, x):
        B, T_new, _ = x.shape
        split = lambda t: t.view(B, T_new, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is not None:
            k, v = torch.cat([self.k_cache, k], dim=2), torch.cat([self.v_cache, v], dim=2)
        self.k_cache, self.v_cache = k[:, :, -self.block_size:], v[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        hide = torch.arange(L, device=x.device)[None, :] > torch.arange(L - T_new, L, device=x.device)[:, None]
        wei = q @ self.k_cache.mT * self.head_size ** -0.5
        wei = torch.softmax(wei.masked_fill(hide, float("-inf")), dim=-1)
        return self.proj((wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, -1))


NEVER_CROPPED = ("29-08-cache-never-cropped-slots-by-index", "29-08-cache-never-cropped-mask-buffer")


def test_a_cache_never_cropped_is_named_from_its_error_on_every_draw():
    """A cache that outgrows block_size fails with an error whose numbers are sizes of the draw
    (an index past block_size slots, a mask of block_size against a longer cache): the error is
    named as the cache never cropped on hidden draws too, never as another size (B·head_size)."""
    import run_attempts

    for attempt in (a for a in run_attempts.attempts("issue_29") if a.id in NEVER_CROPPED):
        student = run_attempts.define(attempt)
        for seed in range(6):
            try:
                run_check(EXERCISES["cached_attention"], student, "values", hidden=True, seed=seed, quiet=True)
            except CheckError as err:
                assert err.finding == "cache_not_cropped", (attempt.id, seed, str(err))
            else:
                raise AssertionError(f"{attempt.id} passed hidden draw {seed}")
