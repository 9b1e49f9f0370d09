"""notebook_helpers.memory.peak_memory: the bytes a computation's new tensors hold at once."""
import subprocess
import sys

import torch

from notebook_helpers.memory import peak_memory


def test_peak_counts_what_is_alive_at_once():
    a = torch.randn(64, 32)  # (64, 32) float32

    def two_products(a):
        big = a @ a.T  # (64, 64): 16 KiB
        small = big.sum(0)  # (64,): 256 bytes, while big is alive
        del big
        return small * 2  # (64,): another 256 bytes, after big is freed

    out, peak = peak_memory(two_products, a)
    assert out.shape == (64,)
    assert peak == 64 * 64 * 4 + 64 * 4


def test_views_and_inputs_add_nothing():
    a = torch.randn(128, 16)
    _, peak = peak_memory(lambda a: a.T.reshape(16, 128)[:, :4], a)  # views of the input only
    assert peak == 0


def test_measuring_does_not_import_the_compiler():
    code = ("import sys, torch\nfrom notebook_helpers.memory import peak_memory\n"
            "peak_memory(lambda a: a @ a.T, torch.randn(4, 8))\n"
            "print('torch._dynamo' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
