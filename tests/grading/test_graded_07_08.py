"""Notebooks 07 and 08 graded end to end by the real pipeline (Grading: nbgrader's
autograde with GradingExecute, the sandboxed kernel, the plans stored in the sources):
a correct submission gets full marks, and wrong ones get exactly the points of the
checks they pass, with their mistakes named in autograded/.status.json."""

import nbformat
import pytest

from support import synthetic
from support.edits import replace_body
from support.gradebook import cell_points, cell_scores, db_scores, stored_outcomes
from grader.grading import plan
from grader.grading.autograde import Grading
from grader.grading.status import Status

NB07, NB08 = "07_transformer_block", "08_attention_at_scale"
grouped = pytest.mark.xdist_group("graded_07_08")

PRE_NORM = ("        x = x + self.attn(self.ln1(x))  # (B, T, C) tokens communicate\n"
            "        x = x + self.mlp(self.ln2(x))  # (B, T, C) each token computes\n")
POST_NORM = ("        x = self.ln1(x + self.attn(x))  # (B, T, C)\n"
             "        x = self.ln2(x + self.mlp(x))  # (B, T, C)\n")
RESCALED = "l = l * torch.exp(m - shift) + torch.exp(x - shift)"
CROPPED = "self.k_cache, self.v_cache = k[:, :, -self.block_size:], v[:, :, -self.block_size:]"


def _replace(old, new):
    def edit(source):
        assert old in source, f"the solution no longer contains {old!r}"
        return source.replace(old, new)
    return edit


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
SUBMISSIONS = {
    "correct_07": (NB07, {}, None, {}),
    "post_norm_hot_after_softmax": (NB07, {
        "Block": _replace(PRE_NORM, POST_NORM),
        "generate": _replace("F.softmax(logits / temperature, dim=-1)", "F.softmax(logits, dim=-1) / temperature"),
    }, {"test_block_output": 1, "test_block_causal": 1, "test_block_values": 0, "test_block_eval": 0,
        # GPT is built from the student's Block: its values fail with it
        "test_gpt_output": 1, "test_gpt_causal": 1, "test_gpt_values": 0,
        # at temperature 1 the mistake changes nothing
        "test_generate_output": 1, "test_generate_cropped": 3, "test_generate_values": 0, "test_generate_hot": 0},
        {"test_block_values": "post_norm", "test_generate_values": "temperature_after_softmax"}),
    "correct_08": (NB08, {}, None, {}),
    "unrescaled_uncropped": (NB08, {
        "online_softmax": _replace(RESCALED, "l = l + torch.exp(x - shift)"),
        "CachedSelfAttention": _replace(CROPPED, "self.k_cache, self.v_cache = k, v"),
    }, {"test_online_softmax_output": 1, "test_online_softmax_rows": 0, "test_online_softmax_plain": 0,
        "test_online_softmax_values": 0, "test_online_softmax_one_pass": 0,
        "test_tiled_output": 1, "test_tiled_causal": 1, "test_tiled_values": 4, "test_tiled_memory": 4,
        "test_cache_output": 1, "test_cache_short": 4, "test_cache_values": 0},
        {"test_online_softmax_plain": "sum_not_rescaled", "test_cache_values": "cache_not_cropped"}),
    "no_attention_07": (NB07, NO_ATTENTION_07, None, {}),
    "no_attention_08": (NB08, NO_ATTENTION_08, None, {}),
}


@pytest.fixture(scope="module")
def graded_07_08(tmp_path_factory):
    root = synthetic.make_course(tmp_path_factory.mktemp("course_07_08"))
    for student, (assignment, edits, _, _) in SUBMISSIONS.items():
        nb = synthetic.answered(root, assignment, assignment,
                                edit=lambda gid, src, edits=edits: edits.get(gid, lambda s: s)(src))
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    summary = Grading(root, jobs=2, budget=150, call_timeout=20).run(progress=False)
    return root, summary


@grouped
@pytest.mark.parametrize("student", ["correct_07", "correct_08"])
def test_a_correct_submission_gets_full_marks(graded_07_08, student):
    root, _ = graded_07_08
    assignment = SUBMISSIONS[student][0]
    outcomes = stored_outcomes(root, student, assignment)
    failed = {cell: [o.message for o in outs if not o.passed] for cell, outs in outcomes.items()
              if not all(o.passed for o in outs)}
    assert failed == {}
    assert any(o.hidden for outs in outcomes.values() for o in outs)  # hidden checks ran too
    assert db_scores(root, assignment)[student] == 30.0


@grouped
@pytest.mark.parametrize("student", ["post_norm_hot_after_softmax", "unrescaled_uncropped"])
def test_a_wrong_submission_gets_the_points_of_the_checks_it_passes_and_its_mistakes_named(
        graded_07_08, student):
    root, _ = graded_07_08
    assignment, _, points, named = SUBMISSIONS[student]
    assert cell_scores(root, student, assignment) == points
    assert db_scores(root, assignment)[student] == sum(points.values())
    outcomes = stored_outcomes(root, student, assignment)
    for cell, key in named.items():
        failed = next(o for o in outcomes[cell] if not o.passed)
        assert failed.mistake == key, failed
        # the first failing check of an exercise names it whole, the later ones in one line (recall)
        assert failed.mistake_name and (f"Likely mistake: {failed.mistake_name}" in failed.message or
                                        f"above: {failed.mistake_name}." in failed.message), failed.message


@grouped
@pytest.mark.parametrize("student", ["no_attention_07", "no_attention_08"])
def test_answers_without_attention_earn_at_most_a_tenth_of_each_part(graded_07_08, student):
    root, _ = graded_07_08
    assignment = SUBMISSIONS[student][0]
    earned = cell_scores(root, student, assignment)
    parts = {}  # exercise -> (earned, total), from the stored plans
    for cell, outs in stored_outcomes(root, student, assignment).items():
        exercise = outs[0].exercise
        got, total = parts.get(exercise, (0, 0))
        parts[exercise] = (got + earned[cell], total + cell_points(assignment, cell))
    assert len(parts) == 3 and all(total > 0 for _, total in parts.values())
    assert {e: p for e, p in parts.items() if p[0] > p[1] / 10} == {}


@grouped
def test_outcomes_are_stored_once_in_the_status_file(graded_07_08):
    """Each graded test cell's outcomes are in autograded/.status.json and nowhere else
    (the autograded folder keeps the notebooks nbgrader shows, not a second copy)."""
    root, _ = graded_07_08
    assert sorted(p.name for p in (root / "autograded").rglob("*.grading.json")) == []
    for student, (assignment, *_) in SUBMISSIONS.items():
        record = next(r for s, a, r in Status(root).records() if (s, a) == (student, assignment))
        graded = {c.metadata["nbgrader"]["grade_id"] for c in nbformat.read(
            root / "autograded" / student / assignment / f"{assignment}.ipynb", as_version=4).cells
            if plan.is_test_cell(c)}
        assert set(record.notebooks[assignment].outcomes) == graded, student
        assert all(outs for outs in record.notebooks[assignment].outcomes.values()), student
