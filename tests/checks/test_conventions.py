"""The conventions the checks probe, and that JupyterLab and a graded run judge them alike:
modules are called in evaluation mode (a dropout the student adds is off); the device probe on
the meta device runs wherever the student's code runs (in-process, or in its kernel through the
facts it answers) and takes CPU scalars as a GPU does; an attention output's layout does not
decide whether a view after a transpose works; new tensors follow the inputs' dtype."""
import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

from grader.checks import student_call
from grader.checks.calling import RemoteStudent
from grader.checks.core import evaluate
from grader.checks.exercises import EXERCISES
from grader.checks.inputs import load_fixed

HEAD = EXERCISES["head"]


def remote(obj, name="Head"):
    """The student's object as a graded run sees it: called, and asked for facts, as the
    kernel side of grader/grading/channel.py does (execute_watched, code_facts)."""
    def call(spec):
        out, student.changed = student_call.execute_watched(obj, spec)
        return out
    student = RemoteStudent(name, call, lambda spec: student_call.code_facts(obj, spec))
    return student


class CpuMaskHead(nn.Module):
    """Right values on the CPU; the mask made without device=, so on a GPU it fails."""

    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).mT
        if self.causal:
            wei = wei.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return wei.softmax(-1) @ self.value(x)


class ScalarFillHead(CpuMaskHead):
    """A fill value kept as a 0-dim CPU tensor (ARENA's IGNORE): a GPU takes it."""

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).mT
        if self.causal:
            hide = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            wei = wei.masked_fill(hide, torch.tensor(float("-inf")))
        return wei.softmax(-1) @ self.value(x)


class DropoutHead(ScalarFillHead):
    """A dropout on the weights, as the lecture's head has: off in evaluation mode."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).mT
        if self.causal:
            wei = wei.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        return self.dropout(wei.softmax(-1)) @ self.value(x)


@pytest.mark.parametrize("graded", [False, True], ids=["lab", "graded"])
def test_the_device_probe_judges_alike_in_the_lab_and_when_graded(graded):
    student = remote if graded else (lambda obj: obj)
    wrong = evaluate(HEAD, student(CpuMaskHead), "output", graded=graded)
    assert not wrong.passed and wrong.mistake == "follows_inputs", wrong.message
    assert "meta device" in wrong.message and "device=x.device" in wrong.message
    right = evaluate(HEAD, student(ScalarFillHead), "output", graded=graded)
    assert right.passed, right.message


def test_a_module_is_checked_in_evaluation_mode():
    for focus in HEAD.focuses:
        outcome = evaluate(HEAD, DropoutHead, focus)
        assert outcome.passed, outcome.message


def test_a_view_after_a_transpose_fails_whichever_attention_made_the_tensor():
    """F.scaled_dot_product_attention may lay its output out like its queries, where
    out.transpose(1, 2).view(...) works; under the checks it is laid out as a fresh tensor."""
    q = torch.randn(2, 5, 3, 4).transpose(1, 2)  # (B, n_heads, T, head_size), strided as (B, T, ...)
    out = F.scaled_dot_product_attention(q, q, q)
    assert out.transpose(1, 2).is_contiguous()  # the layout that lets a view through here
    merge = lambda q: F.scaled_dot_product_attention(q, q, q).transpose(1, 2).view(2, 5, 12)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        student_call.execute(merge, {"kind": "function", "args": [q]})
    with pytest.raises(RuntimeError, match="view size is not compatible"):  # a run that watches each operation
        student_call.execute(merge, {"kind": "function", "args": [q], "watch": {"row": 7}})
    reshape = lambda q: F.scaled_dot_product_attention(q, q, q).transpose(1, 2).reshape(2, 5, 12)
    torch.testing.assert_close(student_call.execute(reshape, {"kind": "function", "args": [q]}),
                               out.transpose(1, 2).reshape(2, 5, 12))


def test_the_meta_probe_is_asked_of_the_kernel_through_its_facts():
    call = HEAD.call(load_fixed(HEAD)["main"]["inputs"])
    here = student_call.execute_on_meta(CpuMaskHead, call)
    there = student_call.code_facts(CpuMaskHead, {"kind": "meta", "call": call})
    assert here == there and "device" in here.get("message", "")
    fine = student_call.execute_on_meta(ScalarFillHead, call)
    assert "error" not in fine and "mixed" not in fine and fine["device"] == "meta"


@pytest.mark.grading
def test_a_real_kernel_answers_the_device_probe_as_the_lab_does(tmp_path):
    """Through grader/grading/channel.py and a real kernel, as graded runs call the code."""
    import inspect

    from jupyter_client.manager import start_new_kernel

    from grader.checks.calling import RemoteError
    from grader.grading.channel import KernelChannel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        def run_code(code):
            errors = []
            kc.execute_interactive(code, timeout=120, output_hook=lambda msg: errors.append(msg["content"])
                                   if msg["msg_type"] == "error" else None)
            return RemoteError(errors[0]["ename"], errors[0]["evalue"]) if errors else None
        source = "import torch\nimport torch.nn as nn\n" + "\n".join(
            inspect.getsource(c).replace("(CpuMaskHead)", "(nn.Module)" if c is CpuMaskHead else "(CpuMaskHead)")
            for c in (CpuMaskHead, ScalarFillHead))
        assert run_code(source) is None
        channel = KernelChannel(run_code, tmp_path)
        wrong = evaluate(HEAD, channel.student("CpuMaskHead"), "output", graded=True)
        lab = evaluate(HEAD, CpuMaskHead, "output")
        assert not wrong.passed and (wrong.mistake, wrong.message.splitlines()[1:]) == \
            (lab.mistake, lab.message.splitlines()[1:])
        assert evaluate(HEAD, channel.student("ScalarFillHead"), "output", graded=True).passed
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.parametrize("setting", ["medium", "high"])
def test_a_notebook_that_lowers_float32_matmul_precision_still_passes(setting):
    """A notebook may lower float32 matmul precision for speed (a common tip): bf16 products on
    a CPU with AMX, TF32 on CUDA, both far beyond the float32 tolerances on larger inputs. The
    checks run the student's code at full precision (seen from inside the student's code) and
    leave the notebook's setting as it was."""
    from grader.answers.correct import CORRECT

    seen = []

    def scaled_dot_product_attention(*args):
        seen.append((torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision))
        return CORRECT["scaled_dot_product_attention"](*args)

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(setting)
    try:
        outcome = evaluate(EXERCISES["scaled_dot_product_attention"], scaled_dot_product_attention, "values")
        assert outcome.passed, outcome.message
        assert seen and set(seen) == {("ieee", "ieee")}, seen
        assert torch.get_float32_matmul_precision() == setting
    finally:
        torch.set_float32_matmul_precision(before)


def test_full_float32_restores_a_setting_made_through_either_api():
    backend = torch.backends.mkldnn.matmul
    before = backend.fp32_precision
    try:
        backend.fp32_precision = "bf16"
        with student_call.full_float32():
            assert backend.fp32_precision == "ieee"
        assert backend.fp32_precision == "bf16"
    finally:
        backend.fp32_precision = before
