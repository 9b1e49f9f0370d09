"""The kernel channel: errors cross as data, the channel's code is sent to a kernel once,
and a reply is bounded by what it costs to read, not only by its size."""
import io
import zipfile

import pytest
import torch

from grader.checks.core import RemoteError, evaluate
from grader.checks.exercises import EXERCISES
from grader.grading.channel import (MAX_PICKLE_BYTES, MAX_PICKLE_DEPTH, MODULE, KernelChannel,
                                    MalformedReply, read_reply)
from support.paths import ROOT

HEAD_WITH_BIAS = '''
import torch
from torch import nn

class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.causal = causal
        self.query = nn.Linear(C, head_size)
        self.key = nn.Linear(C, head_size)
        self.value = nn.Linear(C, head_size)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1) * self.key.out_features ** -0.5
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A real python3 kernel and a runner for code in it: (run_code, codes sent, folder)."""
    from jupyter_client.manager import start_new_kernel

    folder = tmp_path_factory.mktemp("kernel")
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(folder))
    sent = []

    def run_code(code):
        sent.append(code)
        errors = []
        kc.execute_interactive(code, timeout=60, output_hook=lambda msg: errors.append(msg["content"])
                               if msg["msg_type"] == "error" else None)
        return RemoteError(errors[0]["ename"], errors[0]["evalue"]) if errors else None

    assert run_code(HEAD_WITH_BIAS) is None
    sent.clear()
    yield run_code, sent, folder
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def test_a_parameter_mismatch_crosses_whole_with_its_fields(kernel):
    run_code, sent, folder = kernel
    channel = KernelChannel(run_code, folder)
    head = EXERCISES["head"]
    dims = {name: fixed for name, (fixed, _) in head.dims.items()}
    call = head.call(head.draw(torch.Generator().manual_seed(0), 0, dims))
    with pytest.raises(RemoteError) as caught:
        channel.call("Head", call)
    err = caught.value
    assert err.type_name == "ParameterMismatch"
    lines = str(err).splitlines()
    assert len(lines) == 4 and lines[1].strip().startswith("expected:") and "bias=True" in lines[3]
    assert set(err.fields["yours"]) - set(err.fields["expected"]) == {"query.bias", "key.bias", "value.bias"}
    assert err.fields["expected"]["query.weight"] == list(call["params"]["query.weight"].shape)


def test_graded_feedback_names_a_biased_head_as_jupyterlab_does(kernel):
    run_code, sent, folder = kernel
    namespace = {}
    exec(HEAD_WITH_BIAS, namespace)  # the same class, as JupyterLab's check sees it
    lab = evaluate(EXERCISES["head"], namespace["Head"], "values")
    channel = KernelChannel(run_code, folder)
    graded = evaluate(EXERCISES["head"], channel.student("Head"), "values", graded=True)
    assert not lab.passed and lab.mistake == "bias"
    assert (graded.passed, graded.mistake, graded.message) == (lab.passed, lab.mistake, lab.message)
    assert len(graded.message.splitlines()) >= 4


def test_the_channel_code_is_sent_to_a_kernel_once(kernel):
    run_code, sent, folder = kernel
    sent.clear()
    run_code(f"import sys; sys.modules.pop({MODULE!r}, None)")  # a kernel that has not seen it
    sent.clear()
    channel = KernelChannel(run_code, folder)
    evaluate(EXERCISES["head"], channel.student("Head"), "values", graded=True)
    evaluate(EXERCISES["head"], channel.student("Head"), "output", graded=True)
    installs = [code for code in sent if "__grading_install" in code]
    assert len(sent) >= 2 and len(installs) == 1 and sent[0] is installs[0]
    source_size = len((ROOT / "grader" / "checks" / "student_call.py").read_text())
    assert all(len(code) < source_size // 4 for code in sent[1:])


# names the notebook may bind that the channel's code would otherwise meet: `from torch import *`
# binds compile; a student may bind any other
SHADOWED = ("compile", "exec", "open", "print", "len", "__import__", "get_ipython", "sys", "types",
            "builtins", "IPython", "isinstance", "getattr", "str", "type")


def test_the_channel_uses_no_name_of_the_notebooks(kernel):
    """The installer and every call use the builtins and the import statement, never a name
    from the notebook's globals: with `from torch import *` and globals named compile, exec,
    open, print, len (and more), the check says what it says in JupyterLab."""
    run_code, sent, folder = kernel
    assert run_code("import builtins as __b\n__before = set(__b.globals())") is None
    run_code(f"import sys; sys.modules.pop({MODULE!r}, None)")  # installed again, into that namespace
    shadow = "from torch import *\n" + "".join(f"{n} = lambda *a, **k: 1 / 0\n" for n in SHADOWED)
    assert run_code(shadow) is None
    try:
        channel = KernelChannel(run_code, folder)
        graded = evaluate(EXERCISES["head"], channel.student("Head"), "values", graded=True)
        namespace = {}
        exec(HEAD_WITH_BIAS, namespace)
        lab = evaluate(EXERCISES["head"], namespace["Head"], "values")
        assert channel.installed and graded.mistake == "bias", graded.message
        assert (graded.passed, graded.message) == (lab.passed, lab.message)
    finally:
        run_code("for __n in set(__b.globals()) - __before:\n    __b.globals().pop(__n, None)\ndel __b")
    assert run_code("assert compile is __import__('builtins').compile") is None


@pytest.mark.parametrize("focus", ["output", "values"])
def test_a_name_the_notebook_does_not_define_costs_one_call_per_check(kernel, focus):
    """Every call of a check and its facts fail at the lookup alike: the kernel is asked
    once per check, and the message is the one JupyterLab's check gives for the name."""
    run_code, sent, folder = kernel
    channel = KernelChannel(run_code, folder)
    evaluate(EXERCISES["head"], channel.student("Head"), "output", graded=True)  # installed
    sent.clear()
    graded = evaluate(EXERCISES["head"], channel.student("NoSuchHead"), focus, graded=True)
    assert len(sent) == 1 and "NoSuchHead" in sent[0]
    assert not graded.passed and "NameError" in graded.message and "NoSuchHead" in graded.message
    sent.clear()  # a name defined later is seen by the next check: nothing is kept across checks
    run_code("NoSuchHead = Head")
    again = evaluate(EXERCISES["head"], channel.student("NoSuchHead"), focus, graded=True)
    run_code("del NoSuchHead")
    assert "NameError" not in again.message and again.mistake == "bias" and len(sent) > 2


def _reply_with_pickle(path, pickle_bytes):
    """A torch.save-shaped zip whose data.pkl is the given pickle."""
    buf = io.BytesIO()
    torch.save({"out": None}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = pickle_bytes if info.filename.endswith("data.pkl") else src.read(info)
            dst.writestr(info.filename, data)


def test_a_small_reply_that_unpacks_into_millions_of_objects_is_refused_unread(tmp_path):
    deep = tmp_path / "deep.pt"  # 30 million nested lists: tens of KB compressed
    n = 30_000_000
    _reply_with_pickle(deep, b"\x80\x02}q\x00X\x05\x00\x00\x00factsq\x01" + b"]" * n + b"a" * (n - 1) + b"s.")
    assert deep.stat().st_size < 200 * 2**10
    with pytest.raises(MalformedReply, match="structure is larger than"):
        read_reply(deep, torch)

    nested = tmp_path / "nested.pt"  # under the byte bound, nested far deeper than any reply
    n = 2 * MAX_PICKLE_DEPTH
    _reply_with_pickle(nested, b"\x80\x02}q\x00X\x05\x00\x00\x00factsq\x01" + b"]" * n + b"a" * (n - 1) + b"s.")
    with pytest.raises(MalformedReply, match="nested more than"):
        read_reply(nested, torch)

    wide = tmp_path / "wide.pt"  # flat, under the byte bound, but 300,000 objects
    items = b"K\x01" * 300_000
    assert len(items) < MAX_PICKLE_BYTES
    _reply_with_pickle(wide, b"\x80\x02}q\x00X\x05\x00\x00\x00factsq\x01](" + items + b"es.")
    with pytest.raises(MalformedReply, match="more than 100000 objects"):
        read_reply(wide, torch)


def test_an_ordinary_reply_is_read(tmp_path):
    path = tmp_path / "ok.pt"
    torch.save({"out": torch.ones(2, 3), "device": "cpu", "changed": [],
                "facts_like": [[1, 2], {"a": [3]}]}, path)
    reply = read_reply(path, torch)
    assert torch.equal(reply["out"], torch.ones(2, 3))
