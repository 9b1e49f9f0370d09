"""The later class: submissions of notebooks 01 to 04, 06, 07, 08 and 09 graded in one run by
the real pipeline (tests/grading/conftest.py's later_class, graded once per session, with
the course's own limits), for tests/grading/test_graded_07_08.py (07 and 08 right, wrong
with named mistakes, and without attention), tests/grading/test_graded_09.py (09 right and
wrong) and tests/grading/test_graded_no_attention.py (01 to 06 without attention): one class
with the same limits, one run and one xdist worker, instead of one each (measured in one
process, the three runs took the same CPU as the one, 67 CPU seconds). Students' names are
unique across the three tables."""
from support.edits import replace_body

LATER_GROUP = "later_class"  # the xdist group of the tests that read it
LATER_BUDGET = 150  # seconds per notebook
LATER_CALL_TIMEOUT = 20  # seconds per call of the student's code (07's training calls need a few)


def _replace(*pairs):
    """An edit of a solution cell: each (old, new) replaced, old required to be there."""
    def edit(source):
        for old, new in pairs:
            assert old in source, f"the solution no longer contains {old!r}"
            source = source.replace(old, new)
        return source
    return edit


# --- 07 and 08 (tests/grading/test_graded_07_08.py) ---------------------------------

NB07, NB08 = "07_transformer_block", "08_attention_at_scale"
PRE_NORM = ("        x = x + self.attn(self.ln1(x))  # (B, T, C) tokens communicate\n"
            "        x = x + self.mlp(self.ln2(x))  # (B, T, C) each token computes\n")
POST_NORM = ("        x = self.ln1(x + self.attn(x))  # (B, T, C)\n"
             "        x = self.ln2(x + self.mlp(x))  # (B, T, C)\n")
RESCALED = "l = l * torch.exp(m - shift) + torch.exp(x - shift)"
CROPPED = "self.k_cache, self.v_cache = k[:, :, -self.block_size:], v[:, :, -self.block_size:]"


# Answers that do no attention (tests/support/baselines.py has more, graded through the checks)
NO_ATTENTION_07 = {
    "Block": replace_body("    return x + self.mlp(self.ln2(x))  # the attention left out"),
    "GPT": replace_body("    return torch.zeros(*idx.shape, self.lm_head.out_features)  # constant logits"),
    "generate": replace_body("""
    V = model(idx[:, -1:]).shape[-1]
    new = torch.randint(0, V, (idx.shape[0], max_new_tokens), generator=generator)
    return torch.cat([idx, new], dim=1)  # random tokens"""),
}
NO_ATTENTION_08 = {
    "online_softmax": replace_body("    return torch.full_like(scores, 1.0 / scores.shape[-1])  # uniform"),
    "tiled_attention": replace_body("    return v.clone()  # every query keeps its own value"),
    "CachedSelfAttention": replace_body("""
    B, T_new, C = x.shape
    split = lambda t: t.view(B, T_new, self.n_heads, self.head_size).transpose(1, 2)
    q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
    hide = torch.ones(T_new, T_new, dtype=torch.bool, device=x.device).triu(1)
    wei = (q @ k.mT * self.head_size ** -0.5).masked_fill(hide, float("-inf")).softmax(-1)
    return self.proj((wei @ v).transpose(1, 2).reshape(B, T_new, -1))  # the new tokens only: no cache"""),
}

# student -> (assignment, {grade_id of a solution cell: edit}, {test cell: points}, {test cell: mistake key})
SUBMISSIONS_07_08 = {
    "correct_07": (NB07, {}, None, {}),
    "post_norm_hot_after_softmax": (NB07, {
        "Block": _replace((PRE_NORM, POST_NORM)),
        "generate": _replace(("F.softmax(logits / temperature, dim=-1)", "F.softmax(logits, dim=-1) / temperature")),
    }, {"test_block_output": 1, "test_block_causal": 1, "test_block_values": 0, "test_block_eval": 0,
        # GPT is built from the student's Block: its values fail with it
        "test_gpt_output": 1, "test_gpt_causal": 1, "test_gpt_values": 0,
        # at temperature 1 the mistake changes nothing
        "test_generate_output": 1, "test_generate_cropped": 3, "test_generate_values": 0, "test_generate_hot": 0},
        {"test_block_values": "post_norm", "test_generate_values": "temperature_after_softmax"}),
    "correct_08": (NB08, {}, None, {}),
    "unrescaled_uncropped": (NB08, {
        "online_softmax": _replace((RESCALED, "l = l + torch.exp(x - shift)")),
        "CachedSelfAttention": _replace((CROPPED, "self.k_cache, self.v_cache = k, v")),
    }, {"test_online_softmax_output": 1, "test_online_softmax_rows": 0, "test_online_softmax_plain": 0,
        "test_online_softmax_values": 0, "test_online_softmax_one_pass": 0,
        "test_tiled_output": 1, "test_tiled_causal": 1, "test_tiled_values": 4, "test_tiled_memory": 4,
        "test_cache_output": 1, "test_cache_short": 4, "test_cache_values": 0},
        {"test_online_softmax_plain": "sum_not_rescaled", "test_cache_values": "cache_not_cropped"}),
    "no_attention_07": (NB07, NO_ATTENTION_07, None, {}),
    "no_attention_08": (NB08, NO_ATTENTION_08, None, {}),
}


# --- 09 (tests/grading/test_graded_09.py) ---------------------------------------------

NB09 = "09_attention_in_todays_models"

ROPE_PAIRS = "a, b = x[..., 0::2], x[..., 1::2]"
ROPE_STACK = "return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)"
ROPE_POSITIONS = "angles = positions.to(x.dtype).view(-1, 1)"
GQA_K = "k = k.repeat_interleave(group, dim=1)"
GQA_V = "v = v.repeat_interleave(group, dim=1)"
WINDOW_MASK = "(cols <= rows - self.window)"
WINDOW_KEEP = "keep = max(0, k.shape[2] - (self.window - 1))"


HALF_SPLIT = _replace(  # the rotate_half convention, consistent: pairs (i, i + half)
    (ROPE_PAIRS, "a, b = x[..., :half], x[..., half:]"),
    (ROPE_STACK, "return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)"))
FROM_ZERO = _replace((ROPE_POSITIONS, "angles = torch.arange(x.shape[-2], dtype=x.dtype, device=x.device).view(-1, 1)"))
TILED = _replace((GQA_K, "k = k.repeat(1, group, 1, 1)"), (GQA_V, "v = v.repeat(1, group, 1, 1)"))
HEAD_ZERO = _replace((GQA_K, "k = k[:, :1].expand(-1, q.shape[1], -1, -1)"),
                     (GQA_V, "v = v[:, :1].expand(-1, q.shape[1], -1, -1)"))
WINDOW_PLUS_ONE = _replace((WINDOW_MASK, "(cols < rows - self.window)"),
                           (WINDOW_KEEP, "keep = max(0, k.shape[2] - self.window)"))
NEVER_CROPPED = _replace((WINDOW_KEEP, "keep = 0"))

# student -> ({grade_id of a solution cell: edit}, {test cell: points}, {test cell: mistake key})
SUBMISSIONS_09 = {
    "correct_09": ({}, None, {}),
    "half_split_tiled_plus_one": (
        {"apply_rope": HALF_SPLIT, "grouped_query_attention": TILED, "SlidingWindowAttention": WINDOW_PLUS_ONE},
        {"test_rope_output": 1, "test_rope_rotation": 1, "test_rope_relative": 1, "test_rope_values": 0,
         "test_gqa_output": 1, "test_gqa_groups": 0, "test_gqa_masked": 1, "test_gqa_values": 0,
         "test_gqa_rectangular": 0,
         # Part C calls the student's own apply_rope and grouped_query_attention: wrong with them
         "test_window_output": 1, "test_window_prompt": 0, "test_window_values": 0, "test_window_memory": 2},
        {"test_rope_values": "rope_half_split", "test_gqa_values": "kv_tiled"}),
    "from_zero_head_zero_uncropped": (
        {"apply_rope": FROM_ZERO, "grouped_query_attention": HEAD_ZERO, "SlidingWindowAttention": NEVER_CROPPED},
        {"test_rope_output": 0, "test_rope_rotation": 0, "test_rope_relative": 0, "test_rope_values": 0,
         "test_gqa_output": 1, "test_gqa_groups": 0, "test_gqa_masked": 1, "test_gqa_values": 0,
         "test_gqa_rectangular": 0,
         "test_window_output": 1, "test_window_prompt": 0, "test_window_values": 0, "test_window_memory": 0},
        {"test_rope_values": "rope_positions_from_zero", "test_gqa_values": "kv_head_zero",
         "test_window_memory": "cache_grows"}),
}


# --- 01 to 06 without attention (tests/grading/test_graded_no_attention.py) -----------

RANDOM_CAUSAL = """
    T = x.shape[1]
    w = torch.rand(T, T, dtype=x.dtype, device=x.device).tril()  # random weights on the past
    return {apply}(w / w.sum(-1, keepdim=True)) @ {values}"""

# student -> (assignment, {grade_id of a solution cell: edit})
SUBMISSIONS_NO_ATTENTION = {
    "uniform_01": ("01_bag_of_words", {
        "bag_of_words_loop": replace_body("    return x.mean(1, keepdim=True).expand_as(x).clone()  # the whole mean")}),
    "eye_random_02": ("02_tril_matmul", {
        "running_average_weights": replace_body("    return torch.eye(T)  # identity weights"),
        "bag_of_words_matmul": replace_body(RANDOM_CAUSAL.format(apply="", values="x"))}),
    "random_identity_03": ("03_masked_softmax", {
        "masked_softmax": replace_body("""
    w = torch.rand_like(scores).masked_fill(mask, 0.0)  # random weights on the visible keys
    return w / w.sum(-1, keepdim=True).clamp_min(1e-12)"""),
        "causal_weights": replace_body(
            "    return torch.eye(scores.shape[-1], dtype=scores.dtype, device=scores.device).expand_as(scores).clone()")}),
    "values_04": ("04_single_head", {"Head": replace_body("    return self.value(x)  # identity weights")}),
    "uniform_05": ("05_scaled_attention", {"scaled_dot_product_attention": replace_body("""
    wei = torch.zeros(q.shape[:-1] + (k.shape[-2],), dtype=q.dtype, device=q.device)  # q and k ignored
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v""")}),
    "values_random_06": ("06_multi_head", {
        "MultiHeadAttention": replace_body("    return self.proj(torch.cat([h.value(x) for h in self.heads], dim=-1))"),
        "BatchedMultiHeadAttention": replace_body(RANDOM_CAUSAL.format(apply="self.proj(", values="self.value(x))"))}),
}


def later_submissions():
    """(student, assignment, {grade_id of a solution cell: edit}) of every table above."""
    yield from ((s, nb, edits) for s, (nb, edits, *_) in SUBMISSIONS_07_08.items())
    yield from ((s, NB09, edits) for s, (edits, *_) in SUBMISSIONS_09.items())
    yield from ((s, nb, edits) for s, (nb, edits) in SUBMISSIONS_NO_ATTENTION.items())
