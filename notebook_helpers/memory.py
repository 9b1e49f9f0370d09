"""Measure the memory a computation really allocates, on the CPU as on a GPU."""
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _tensors(objs):
    """The tensors among objs and the lists, tuples and dict values inside them."""
    for obj in objs:
        if isinstance(obj, torch.Tensor):
            yield obj
        elif isinstance(obj, (list, tuple)):
            yield from _tensors(obj)
        elif isinstance(obj, dict):
            yield from _tensors(obj.values())


class _LiveTensors(TorchDispatchMode):
    """Follows every tensor the operations inside it create, until it is freed, and
    keeps the largest total of bytes alive at any moment. Views and in-place results
    share their input's memory and add nothing."""

    @classmethod
    def _should_skip_dynamo(cls):
        # torch wraps a mode's __torch_dispatch__ so that torch.compile never traces it,
        # and that wrapper imports torch._dynamo on first use (1.5 s of CPU). The code
        # measured here is never compiled, so the plain method is kept.
        return False

    def __init__(self):
        super().__init__()
        self.live = {}  # storage address -> [bytes, number of tensors still using it]
        self.current = self.peak = 0

    def _release(self, key):
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs or {}))}
        for t in _tensors((out,)):
            if t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in self.live:
                self.live[key][1] += 1  # one more tensor on memory we already count
            elif key in inputs or storage.nbytes() == 0:
                continue  # a view of an input (or of memory made before we started)
            else:
                self.live[key] = [storage.nbytes(), 1]
                self.current += storage.nbytes()
                self.peak = max(self.peak, self.current)
            weakref.finalize(t, self._release, key)
        return out


def peak_memory(fn, *args, **kwargs):
    """(result, bytes): the largest amount of memory held at once by tensors that
    fn(*args, **kwargs) allocates (its inputs not counted). On a GPU this is CUDA's
    own allocator statistic; on the CPU every new tensor is followed until it is freed."""
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        return result, torch.cuda.max_memory_allocated(device) - before
    with torch.no_grad(), _LiveTensors() as tracker:
        result = fn(*args, **kwargs)
    return result, tracker.peak
