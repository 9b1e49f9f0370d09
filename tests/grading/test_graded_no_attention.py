"""Notebooks 01 to 06 graded end to end by the real pipeline (as `make autograde` grades)
with answers that do no attention: each earns at most a tenth of each part's points.
(07 and 08: tests/grading/test_graded_07_08.py; every exercise's baselines through the checks
themselves: tests/checks/test_no_points_without_attention.py.)"""
import nbformat
import pytest

from support import synthetic
from support.edits import replace_body
from support.gradebook import cell_points, cell_scores, stored_outcomes
from grader.grading.autograde import Grading

grouped = pytest.mark.xdist_group("graded_no_attention")

RANDOM_CAUSAL = """
    T = x.shape[1]
    w = torch.rand(T, T, dtype=x.dtype, device=x.device).tril()  # random weights on the past
    return {apply}(w / w.sum(-1, keepdim=True)) @ {values}"""

# student -> (assignment, {grade_id of a solution cell: edit})
SUBMISSIONS = {
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


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = synthetic.make_course(tmp_path_factory.mktemp("course_no_attention"))
    for student, (assignment, edits) in SUBMISSIONS.items():
        nb = synthetic.answered(root, assignment, assignment,
                                edit=lambda gid, src, edits=edits: edits.get(gid, lambda s: s)(src))
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    Grading(root, jobs=2, budget=150, call_timeout=20).run(progress=False)
    return root


@grouped
@pytest.mark.parametrize("student", list(SUBMISSIONS))
def test_answers_without_attention_earn_at_most_a_tenth_of_each_part(graded, student):
    assignment = SUBMISSIONS[student][0]
    earned = cell_scores(graded, student, assignment)
    parts = {}  # exercise -> (earned, total)
    for cell, outs in stored_outcomes(graded, student, assignment).items():
        got, total = parts.get(outs[0].exercise, (0, 0))
        parts[outs[0].exercise] = (got + earned[cell], total + cell_points(assignment, cell))
    assert parts and all(total > 0 for _, total in parts.values())
    assert {e: p for e, p in parts.items() if p[0] > p[1] / 10} == {}
