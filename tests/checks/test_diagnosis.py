"""Diagnosis that generalises: inputs changed in place, trivial answers and shortcuts fail;
a failing values check carries a picture of its smallest failing case. (Students' attempts,
ours and learners', run through every check: tests/checks/test_attempts.py.)"""
import itertools
import json

import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

import grader
from grader.checks import compare, devices, diagnosis, inputs, student_call
from grader.checks.diagnosis import pictures
from grader.checks.diagnosis.variants import _factor_candidates
from grader.checks.core import CheckError, run_check
from grader.checks.exercises import EXERCISES
from grader.answers.correct import CORRECT, BatchedMultiHeadAttention, Head


# --- the two cases that used to mislead ------------------------------------------------

def inplace_loop(x):
    B, T, C = x.shape
    for b in range(B):
        for t in range(T):
            x[b, t] = x[b, : t + 1].mean(0)
    return x


@pytest.mark.parametrize("focus", ["causal", "values"])
def test_an_in_place_loop_is_called_what_it_is(focus):
    with pytest.raises(CheckError) as info:
        grader.check_bag_of_words_loop(inplace_loop, focus)
    assert info.value.finding == "input_mutation"
    assert "changed its input x" in str(info.value) and "not causal" not in str(info.value)


class MergedWithoutTranspose(BatchedMultiHeadAttention):
    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # (B, n_heads, T, head_size)
        return self.proj(out.reshape(B, T, -1))


@pytest.mark.parametrize("focus", ["causal", "values", "encoder"])
def test_heads_merged_without_transpose_are_named(focus):
    with pytest.raises(CheckError) as info:
        grader.check_batched_multi_head_attention(MergedWithoutTranspose, focus)
    assert "Likely mistake: heads merged without transposing back" in str(info.value)


def test_heads_merged_without_transpose_are_named_on_hidden_sizes():
    for seed in range(3):
        with pytest.raises(CheckError, match="heads merged without transposing back"):
            grader.check_batched_multi_head_attention(MergedWithoutTranspose, "values", hidden=True, seed=seed)


# --- input mutation -------------------------------------------------------------------------

def test_input_changed_in_place_fails_even_with_right_values():
    def sdpa_inplace(q, k, v, mask=None):
        out = CORRECT["scaled_dot_product_attention"](q, k, v, mask)
        v.zero_()
        return out
    with pytest.raises(CheckError) as info:
        grader.check_scaled_dot_product_attention(sdpa_inplace, "output")
    message = str(info.value)
    assert "changed its input v" in message and "values you return are right" in message
    assert "zero_()" in message


def test_inputs_changed_in_place_are_reported_as_plain_data():
    x = torch.randn(2, 3, 4)
    out, changed = student_call.execute_watched(lambda x: x.add_(1), {"kind": "function", "args": [x],
                                                                      "names": ["x"]})
    assert changed == [{"name": "x", "changed": 24, "total": 24}]
    _, changed = student_call.execute_watched(lambda x: x + 1, {"kind": "function", "args": [x]})
    assert changed == []


# --- trivial answers --------------------------------------------------------------------

TRIVIAL = [
    ("bag_of_words_loop", lambda x: x, ["output", "first_token", "causal", "batch_independent"]),
    ("running_average_weights", lambda T: torch.eye(T), ["output", "rows_sum_to_one", "lower_triangular"]),
    ("running_average_weights", lambda T: torch.zeros(T, T), ["output", "lower_triangular"]),
    ("masked_softmax", lambda s, m: torch.zeros_like(s), ["output", "masked_get_zero", "fully_masked_rows"]),
    ("causal_weights", lambda s: torch.eye(s.shape[-1]).expand_as(s).clone(), ["output", "rows_sum_to_one", "causal"]),
    ("scaled_dot_product_attention", lambda q, k, v, mask=None: v.clone(), ["output", "causal"]),
]


@pytest.mark.parametrize("key,answer,focuses", TRIVIAL, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(TRIVIAL)])
def test_trivial_answers_earn_no_property_point(key, answer, focuses):
    for focus in focuses + ["values"]:
        with pytest.raises(CheckError, match="no check can give it points") as info:
            run_check(EXERCISES[key], answer, focus, quiet=True)
        assert info.value.finding == "trivial"


class ValueOnly(Head):
    def forward(self, x):
        return self.value(x)


class ProjectedValues(BatchedMultiHeadAttention):
    def forward(self, x):
        return self.proj(self.value(x))


@pytest.mark.parametrize("key,cls", [("head", ValueOnly), ("batched_multi_head_attention", ProjectedValues)])
def test_merely_projected_inputs_earn_nothing(key, cls):
    for focus in EXERCISES[key].focuses:
        with pytest.raises(CheckError, match="no check can give it points"):
            run_check(EXERCISES[key], cls, focus, quiet=True)


# --- shortcuts ----------------------------------------------------------------------------

def torch_sdpa(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)


def test_shortcut_passes_with_a_note_in_the_lab_and_fails_when_graded(capsys):
    result = run_check(EXERCISES["scaled_dot_product_attention"], torch_sdpa, "values")
    out = capsys.readouterr().out
    assert out.startswith("\u26a0 ")  # not a tick: and its last line, marked as a failure, says why
    assert out.splitlines()[-1].startswith("\u2717 scores 0 when graded: F.scaled_dot_product_attention "
                                           "does the whole exercise")
    assert len(out.splitlines()) == 2 and result.notes
    with pytest.raises(CheckError, match="uses F.scaled_dot_product_attention") as info:
        run_check(EXERCISES["scaled_dot_product_attention"], torch_sdpa, "values", graded=True)
    assert info.value.finding == "shortcut"


def test_shortcut_imported_under_another_name_is_found():
    from torch.nn.functional import scaled_dot_product_attention as attend

    def sdpa(q, k, v, mask=None):
        return attend(q, k, v, attn_mask=None if mask is None else ~mask)
    with pytest.raises(CheckError, match="uses F.scaled_dot_product_attention"):
        run_check(EXERCISES["scaled_dot_product_attention"], sdpa, "values", graded=True)


def test_instructors_change_the_shortcut_list_in_the_config():
    from traitlets.config import Config

    config = Config()
    config.Shortcuts.forbidden = {"scaled_dot_product_attention": ["torch.softmax"]}
    run_check(EXERCISES["scaled_dot_product_attention"], torch_sdpa, "values", graded=True,
              config=config, quiet=True)
    with pytest.raises(CheckError, match="uses torch.softmax"):
        run_check(EXERCISES["scaled_dot_product_attention"], CORRECT["scaled_dot_product_attention"],
                  "values", graded=True, config=config)


def test_calling_the_course_reference_is_a_shortcut():
    from grader.answers.reference import bag_of_words as bag_of_words_loop

    def bag_of_words_matmul(x):
        return bag_of_words_loop(x)
    with pytest.raises(CheckError, match="from the course's grader.answers.reference"):
        run_check(EXERCISES["bag_of_words_matmul"], bag_of_words_matmul, "values", graded=True)


def test_calling_the_course_s_correct_answers_is_a_shortcut():
    """The correct answers live in the course's grader (grader/answers/correct.py): notebook
    code that calls one gets no points; the answers themselves, defined there, are their own
    code and pass."""
    notebook = {"__name__": "__main__"}
    exec("from grader.answers.correct import masked_softmax as given\n"
         "def masked_softmax(scores, mask):\n"
         "    return given(scores, mask)\n", notebook)
    with pytest.raises(CheckError, match=r"uses given \(from the course's grader.answers.correct\)"):
        run_check(EXERCISES["masked_softmax"], notebook["masked_softmax"], "values", graded=True)
    # bag_of_words_matmul calls running_average_weights, defined beside it there
    run_check(EXERCISES["bag_of_words_matmul"], CORRECT["bag_of_words_matmul"], "values", graded=True,
              quiet=True)


def test_correct_answers_use_no_shortcut():
    from grader.checks import shortcuts

    for key, answer in CORRECT.items():
        fixed = inputs.load_fixed(EXERCISES[key])
        call = EXERCISES[key].call(next(iter(fixed.values()))["inputs"])
        assert diagnosis.shortcut(EXERCISES[key], student_call.code_facts(answer, call), shortcuts.forbidden()) is None


# --- facts about the student's code ---------------------------------------------------------

def test_code_facts_are_plain_data_and_see_modules():
    class Shared(nn.Module):
        def __init__(self, C, n_heads, head_size, block_size, causal=True):
            super().__init__()
            self.heads = nn.ModuleList([Head(C, head_size, block_size, causal)] * n_heads)
            self.query = self.key = nn.Linear(C, head_size)
            self.mask = torch.ones(block_size, block_size).tril()

        def forward(self, x):
            return torch.cat([h(x) for h in self.heads], dim=-1).cumsum(1)

    call = {"kind": "module", "ctor": [12, 3, 5, 9], "ctor_kw": {"causal": True}}
    facts = student_call.code_facts(Shared, call)
    assert json.loads(json.dumps(facts)) == facts
    mod = facts["module"]
    assert ["heads.0", "heads.1", "heads.2"] in mod["shared_modules"] and ["query", "key"] in mod["shared_modules"]
    assert mod["tensor_attributes"] == [{"name": "mask", "dtype": "torch.float32", "shape": [9, 9]}]
    assert "cumsum" in facts["attributes"] and facts["globals"]["Head"]["type"] == "class"


def test_code_facts_name_globals_with_their_values():
    T = 8  # noqa: F841 (a closure here, a notebook global in a notebook)

    def causal_weights(scores):
        return torch.softmax(scores.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")), -1)
    facts = student_call.code_facts(causal_weights)
    assert facts["globals"]["T"] == {"type": "int", "value": 8}
    assert facts["globals"]["torch"] == {"type": "module", "name": "torch"}


# --- analyses from data -------------------------------------------------------------------

def test_every_scale_factor_is_named_in_the_sizes():
    inp = EXERCISES["multi_head_attention"].draw(torch.Generator().manual_seed(0), "main",
                                                 {"B": 2, "T": 6, "C": 11, "head_size": 4, "n_heads": 3,
                                                  "block_size": 8})
    sz = diagnosis.sizes(EXERCISES["multi_head_attention"], inp)
    close = lambda a, b: torch.allclose(a, b, rtol=1e-6, atol=1e-8)
    expected = diagnosis.forward("multi_head_attention", inp)
    for expr, value in _factor_candidates(sz):
        if expr == "1/sqrt(head_size)":
            continue
        actual = diagnosis.forward("multi_head_attention", inp, factor=value)
        found = diagnosis.analyse(EXERCISES["multi_head_attention"], inp, actual=actual, expected=expected, close=close)
        assert found is not None and found.key == "scale" and expr in found.name, (expr, found)


def test_an_unlisted_scale_is_found_by_fitting():
    inp = EXERCISES["scaled_dot_product_attention"].draw(torch.Generator().manual_seed(1), "no_mask",
                                                         {"B": 2, "T": 5, "head_size": 6})
    close = lambda a, b: torch.allclose(a, b, rtol=1e-6, atol=1e-8)
    actual = diagnosis.forward("scaled_dot_product_attention", inp, factor=0.3)
    found = diagnosis.analyse(EXERCISES["scaled_dot_product_attention"], inp, actual=actual,
                              expected=diagnosis.forward("scaled_dot_product_attention", inp), close=close)
    assert found.key == "scale" and "0.3" in found.name


def test_errors_are_explained_in_the_sizes():
    sz = {"B": 3, "T": 7, "C": 12, "n_heads": 2, "head_size": 5}
    found = diagnosis.error_finding("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (21x12 and 10x12)", sz)
    assert "21 = B\u00b7T" in found.name and "10 = n_heads\u00b7head_size" in found.name
    assert "transposed" in found.hint
    found = diagnosis.error_finding("RuntimeError", "The size of tensor a (8) must match the size of tensor b (7) "
                                    "at non-singleton dimension 2", sz,
                                    {"globals": {"T": {"type": "int", "value": 8}}})
    assert found.key == "global_size" and "T = 8" in found.name


def test_layout_search_finds_permutations_and_wrong_reshapes():
    close = lambda a, b: a.shape == b.shape and torch.allclose(a, b)
    expected = torch.randn(3, 7, 5)
    found = diagnosis.layout_finding(expected.transpose(1, 2), expected, close, ["B", "T", "head_size"])
    assert found.key == "transposed"
    found = diagnosis.layout_finding(expected.transpose(0, 1).reshape(3, 7, 5), expected, close, ["B", "T", "C"])
    assert found.key == "reshaped"


# --- the picture ------------------------------------------------------------------------------

def test_a_failing_values_check_carries_its_smallest_failing_case():
    def wrong_dim(scores, mask):
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-2).nan_to_num(0.0)
    with pytest.raises(CheckError) as info:
        grader.check_masked_softmax(wrong_dim, "values")
    case = info.value.case
    assert case["title"].endswith("T = 2)") and case["expected"].shape == (2, 2)
    assert info.value.picture.startswith(b"\x89PNG")
    with pytest.raises(CheckError) as info:
        grader.check_masked_softmax(wrong_dim, "rows_sum_to_one")  # not a values check
    assert info.value.case is None and info.value.picture is None


def test_a_picture_of_scores_labels_its_axes_key_and_query():
    """Online softmax works on rows of scores: its picture's axes are a query's row over keys,
    not a token's features."""
    def never_rescaled(scores):
        m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype)
        total = torch.zeros_like(m)
        for j in range(scores.shape[-1]):
            m_new = torch.maximum(m, scores[..., j])
            total = total + torch.exp(scores[..., j] - m_new)  # the running sum never rescaled
            m = m_new
        return torch.exp(scores - m.unsqueeze(-1)) / total.unsqueeze(-1)
    with pytest.raises(CheckError) as info:
        grader.check_online_softmax(never_rescaled, "plain")
    assert info.value.case["kind"] == "weights" and pictures.AXES["weights"] == ("key", "query")


def test_the_picture_is_shown_inline_in_a_kernel_before_the_error():
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        code = ("import torch\nfrom grader import check_masked_softmax\n"
                "def masked_softmax(scores, mask):\n"
                "    return torch.softmax(scores.masked_fill(mask, float('-inf')), dim=-2).nan_to_num(0.0)\n"
                "check_masked_softmax(masked_softmax, 'values')\n")
        kinds, streams = [], []
        msg_id = kc.execute(code)
        while True:
            msg = kc.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "display_data":
                kinds.append("image" if "image/png" in msg["content"]["data"] else "other")
            elif kind == "error":
                kinds.append("error")
            elif kind == "stream":
                streams.append(msg["content"]["name"])
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                break
        assert kinds == ["image", "error"] and "stderr" not in streams
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# --- graded verification, outside the kernel ----------------------------------------------

@pytest.mark.xdist_group("graded_class")
def test_grading_refuses_shortcuts_and_inputs_changed_in_place(tmp_path):
    import nbformat

    from support import synthetic
    from grader.grading.autograde import Grading
    from grader.grading.status import Status

    root = synthetic.make_course(tmp_path / "course", gradebook=True)
    a = "05_scaled_attention"
    answers = {
        "shortcut": "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                    "    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)",
        "inplace": "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                   "    q *= q.shape[-1] ** -0.5\n"
                   "    wei = q @ k.transpose(-2, -1)\n"
                   "    if mask is not None:\n"
                   "        wei = wei.masked_fill(mask, float('-inf'))\n"
                   "    return torch.softmax(wei, dim=-1) @ v",
    }
    for student, code in answers.items():
        folder = root / "submitted" / student / a
        folder.mkdir(parents=True)
        nbformat.write(synthetic.answered(root, a, a, edit=lambda gid, src, code=code: code),
                       folder / f"{a}.ipynb")
    Grading(root, jobs=1, budget=90).run(progress=False)
    for student in answers:
        outcomes = Status(root).get(student, a)["notebooks"][a]["outcomes"]
        failed = [outs[-1] for outs in outcomes.values()]
        assert failed and not any(o["passed"] for o in failed), outcomes
        want = "uses F.scaled_dot_product_attention" if student == "shortcut" else "changed its input q"
        assert all(want in o["message"] for o in failed), failed


@pytest.mark.parametrize("garbage", [float("nan"), float("inf"), "mixed"])
def test_a_tail_never_written_is_named_so_whatever_the_memory_held(garbage):
    """A loop that stops before the last, shorter tile leaves the end of a torch.empty
    buffer as the memory held it: NaN, inf or anything. The check names the entries never
    written, whatever they hold (not a division by zero); NaN at the first query alone is
    still the mask's finding."""
    from grader.checks.diagnosis.analysis import analyse

    exercise = EXERCISES["tiled_attention"]
    gen = torch.Generator().manual_seed(0)
    inp = exercise.draw(gen, "values", inputs.draw_dims(exercise, gen))
    expected = exercise.reference(*inp.values())  # (B, n_heads, T, head_size)
    close = lambda a, b: compare.close(a, b, devices.tolerance("cpu", torch.float64))
    names = list(exercise.shape(inp)[1])
    T = expected.shape[2]
    tail = expected.clone()
    tail[:, :, T - 3:] = float("nan") if garbage == "mixed" else garbage
    if garbage == "mixed":
        tail[:, 0, T - 3:] = 1e30  # one head's leftovers happen to be finite
    found = analyse(exercise, inp, actual=tail, expected=expected, close=close, names=names)
    assert found is not None and found.key == "unwritten", found
    assert f"positions t = {T - 3}..{T - 1}" in found.name and "never written" in found.hint
    first = expected.clone()
    first[:, :, 0] = float("nan")
    found = analyse(exercise, inp, actual=first, expected=expected, close=close, names=names)
    assert found is None or found.key != "unwritten", found


def test_nan_in_the_other_dtype_of_an_already_wrong_output_is_not_blamed_on_dtypes():
    """The output check runs the code with float64 inputs too. An answer whose tail is never
    written holds NaN in one run and finite leftovers in the other, as the memory happens
    to: the dtype is not the cause, so the output check does not say it is (the values
    check names what is wrong); an answer right in float32 whose float64 run gives NaN is
    still told to follow its inputs' dtype."""
    reference = CORRECT["tiled_attention"]

    def tail_left(q, k, v, tile_size):
        out = reference(q, k, v, tile_size)
        out[:, :, -3:] = float("nan") if q.dtype == torch.float64 else 123.0
        return out

    def float32_only(q, k, v, tile_size):
        out = reference(q, k, v, tile_size)
        return out if q.dtype == torch.float32 else out * float("nan")

    exercise = EXERCISES["tiled_attention"]
    run_check(exercise, tail_left, "output", quiet=True)
    with pytest.raises(CheckError) as err:
        run_check(exercise, tail_left, "values", quiet=True)
    assert err.value.finding != "follows_inputs"
    with pytest.raises(CheckError) as err:
        run_check(exercise, float32_only, "output", quiet=True)
    assert err.value.finding == "follows_inputs" and "dtype=x.dtype" in str(err.value)


def test_entries_never_written_are_named_where_the_memory_held_the_same_leftovers_twice():
    """An answer that never writes its last tile (tiles of T // tile_size only) gets, from
    torch.empty, whatever the memory held, in each call; where some of those entries held
    the same leftovers in both of the output check's calls, the entries that changed have a
    gap (t = 36, 37, 39, 40 of a tail 36..40, as in one run of the suite). That is still a
    tail never written, not random weights."""
    reference = CORRECT["tiled_attention"]
    calls, sizes = itertools.count(1), []

    def tail_as_the_memory_held(q, k, v, tile_size):
        out = reference(q, k, v, tile_size)
        T = out.shape[2]
        sizes.append(T)
        out[:, :, T - 5:] = 7.0 * next(calls)  # new leftovers every call...
        out[:, :, T - 3] = 0.5  # ...but the same at one position
        return out

    with pytest.raises(CheckError) as err:
        run_check(EXERCISES["tiled_attention"], tail_as_the_memory_held, "output", quiet=True)
    T = sizes[0]
    assert err.value.finding == "unwritten", str(err.value)
    assert f"positions t = {T - 5}..{T - 1}" in str(err.value) and "random weights" not in str(err.value)


def test_an_output_right_in_float32_and_far_off_in_float64_is_not_called_a_precision():
    """An answer that never writes its last tile gets, from torch.empty, whatever the memory
    held: in the output check's float32 run that can be the right values (a freed buffer of
    the same size, the reference's), in its float64 run finite leftovers. That is not a
    float32 computation inside (errors of 1e-7), so the output check names the entries never
    written; an answer off by float32 rounding only is still told to follow its inputs' dtype."""
    reference = CORRECT["tiled_attention"]

    def tail_right_in_float32(q, k, v, tile_size):
        out = reference(q, k, v, tile_size)
        if q.dtype == torch.float64:
            out[:, :, -5:] = 0.85
        return out

    def computed_in_float32(q, k, v, tile_size):
        return reference(q.float(), k.float(), v.float(), tile_size).to(q.dtype)

    exercise = EXERCISES["tiled_attention"]
    with pytest.raises(CheckError) as err:
        run_check(exercise, tail_right_in_float32, "output", quiet=True)
    assert err.value.finding == "unwritten" and "float32-accurate" not in str(err.value), str(err.value)
    assert "never written" in str(err.value)
    with pytest.raises(CheckError) as err:
        run_check(exercise, computed_in_float32, "output", quiet=True)
    assert err.value.finding == "follows_inputs" and "float32-accurate" in str(err.value), str(err.value)


@pytest.mark.parametrize("leftovers", ["NaN every float64 call", "NaN in the first float64 call only"])
def test_nan_in_float64_of_an_output_right_in_float32_is_named_as_entries_never_written(leftovers):
    """The float32 run of an answer that never writes its last tile can hold the right values
    (a freed buffer of the same size held the previous call's output) and its float64 run NaN
    there, in every call or in one (as in one run of the suite: "with float64 inputs, output
    has 66 NaN/inf values ... Create new tensors with dtype=x.dtype", a fix that changes
    nothing). The output check names the entries never written, not the dtype."""
    reference = CORRECT["tiled_attention"]
    float64_calls = itertools.count()

    def tail_right_in_float32(q, k, v, tile_size):
        out = reference(q, k, v, tile_size)
        if q.dtype == torch.float64 and (leftovers == "NaN every float64 call" or next(float64_calls) == 0):
            out[:, :, -5:] = float("nan")
        return out

    with pytest.raises(CheckError) as err:
        run_check(EXERCISES["tiled_attention"], tail_right_in_float32, "output", quiet=True)
    assert err.value.finding == "unwritten", str(err.value)
    assert "never written" in str(err.value) and "dtype=x.dtype" not in str(err.value), str(err.value)


def test_a_position_table_indexed_by_token_ids_is_named_where_it_raises():
    """Hidden draws where vocab_size > block_size make the position table looked up with the
    token ids raise IndexError (nn.Embedding's "index out of range in self") instead of giving
    wrong values: the message still says what to look up the table with."""
    from grader.checks.diagnosis.errors import error_finding

    found = error_finding("IndexError", "index out of range in self",
                          {"B": 4, "T": 5, "vocab_size": 10, "block_size": 9})
    assert found.key == "embedding_index"
    assert "vocab_size - 1 = 9" in found.name and "block_size = 9 rows" in found.name
    assert "torch.arange(T)" in found.hint
    plain = error_finding("IndexError", "index out of range in self", {"B": 4, "T": 5})
    assert plain.key == "embedding_index" and "token ids go up to" not in plain.name
