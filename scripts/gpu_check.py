"""The checks on a GPU, compared with the same checks on the CPU.

    PYTHONPATH=. python3 scripts/gpu_check.py                        # on a CUDA machine (make gpu-check)
    PYTHONPATH=. python3 scripts/gpu_check.py --device cpu --quick   # CPU against CPU (the suite runs it)

Made for a bare machine with torch: it needs torch and the standard library, and numpy and
matplotlib only where the checks draw a picture. What it runs, every exercise and every
catalogued mistake read from the registry (grader.EXERCISE_KEYS, each exercise's catalogue in
grader/answers/mistakes.py), none named here:

- every focus of every exercise, visible and hidden (fixed seeds), on the correct answer
  (grader/answers/correct.py) and on every catalogued mistake, once on the CPU and once on the
  device, on the same inputs (the visible checks' stored ones; the hidden ones drawn on the CPU
  from the seed, then moved): the verdicts and the named mistakes compared, each check at its
  own device's and dtype's tolerance;
- the correct answers in float64, and in float16 and bfloat16 where the checks accept them (where
  a check called with that dtype runs instead of refusing it);
- on CUDA, the correct answers with TF32 matmuls switched on (torch leaves them off), against
  the CPU's verdicts: a count of its own, outside the last line;
- answers that are right on the CPU and wrong on a GPU, which only the device can judge: the
  correct answer returning its output on the CPU (named "device" wherever the check hands the
  answer a tensor on the device), and the catalogued mistakes whose visible values check passes
  on the CPU (a mask made on the CPU), which the device must name;
- 08's tiled attention and key/value cache (the correct answers) timed against
  F.scaled_dot_product_attention: a table, not a verdict;
- the solution notebooks executed with GRADER_DEVICE set to the device, their test cells'
  outputs compared with the committed ones (the CPU run: `make execute`), where the notebooks
  can run: in this python if it has nbclient, ipykernel and ipywidgets, otherwise in a throwaway
  venv (--system-site-packages) filled from the wheelhouse (`make gpu-wheelhouse`, for a machine
  without a package index). --quick leaves them out unless --notebooks yes.

It prints the table, and ends with one line: "cuda verdicts equal cpu: A/B; named equal: C/D"
(B: the checks run on both, A: those whose verdict is the same; D: those that failed on the CPU,
C: those where the device failed naming the same mistake). With --json PATH, or $OUT set, it
writes every check's result there (gpu_check.json). Exit status 0 when everything agrees.

CUDA facts it follows: inputs are drawn on the CPU and then moved (random streams differ between
devices); the checks' workers are started with "spawn" (a CUDA context does not survive a fork);
TF32 stays at torch's default except in the TF32 rows, set through one API.
"""
import argparse
import configparser
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python3 scripts/gpu_check.py` from the checkout works without PYTHONPATH too
    sys.path.insert(0, str(ROOT))

SEEDS = (101, 202)  # the hidden checks' seeds; --quick uses the first
HALF = ("float16", "bfloat16")
NOTEBOOK_PACKAGES = ("nbclient", "ipykernel", "ipywidgets")  # what executing the notebooks needs beyond torch
WHEELHOUSE = ROOT / "gpu-wheelhouse"
CHUNK = 24  # checks per task handed to a worker
RENEW = 6  # tasks a worker runs on CUDA before it is replaced (one whose CUDA broke hands them back)


# --- what runs ----------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One check: an exercise's focus, on one answer, visible or hidden (seed), in one dtype.
    group: "compare" (run on the CPU and on the device, which must agree), "tf32" (the device
    only, with TF32 on, against the CPU's float32 verdict) or "device" (the device only: an
    answer right on the CPU)."""
    key: str
    answer: str  # "correct", "mistake:<key>" or "left_on_cpu"
    focus: str
    hidden: bool = False
    seed: Optional[int] = None
    dtype: str = "float32"
    group: str = "compare"

    def on_cpu(self):
        """The same check as the CPU runs it (the CPU's verdict a tf32 row is compared with)."""
        return Row(self.key, self.answer, self.focus, self.hidden, self.seed, self.dtype, "compare")

    def text(self):
        where = f"hidden seed {self.seed}" if self.hidden else "visible"
        extra = " TF32" if self.group == "tf32" else ""
        return f"{self.key} {self.answer} {self.focus} {where} {self.dtype}{extra}"


def values_focus(exercise):
    """The focus that checks the values (the one that names most mistakes)."""
    if "values" in exercise.focuses:
        return "values"
    return next((name for name, f in exercise.focuses.items() if f.values), list(exercise.focuses)[-1])


def mistake_answers(exercise):
    """"mistake:<key>" for each catalogued mistake of the exercise, in the catalogue's order."""
    return [f"mistake:{m.key}" for m in exercise.mistakes]


def plan(exercises, *, quick, device_type, accepted):
    """The checks to run: a list of Rows. accepted: exercise key -> the extra dtypes its checks
    accept (float64, and float16/bfloat16 where they do)."""
    seeds = SEEDS[:1] if quick else SEEDS
    rows = []
    for key, ex in exercises.items():
        values, focuses = values_focus(ex), list(ex.focuses)
        for focus in focuses:
            rows.append(Row(key, "correct", focus))
            for seed in seeds if (not quick or focus == values) else ():
                rows.append(Row(key, "correct", focus, True, seed))
        for dtype in accepted[key]:
            for focus in [values] if quick else focuses:
                rows.append(Row(key, "correct", focus, dtype=dtype))
                if not quick:
                    rows.append(Row(key, "correct", focus, True, seeds[0], dtype))
        if device_type == "cuda":
            for focus in [values] if quick else focuses:
                rows.append(Row(key, "correct", focus, group="tf32"))
                if not quick:
                    rows.append(Row(key, "correct", focus, True, seeds[0], group="tf32"))
        for answer in mistake_answers(ex):
            for focus in [values] if quick else focuses:
                rows.append(Row(key, answer, focus))
                if not quick:
                    rows.append(Row(key, answer, focus, True, seeds[0]))
        if device_type != "cpu":
            rows.append(Row(key, "left_on_cpu", focuses[0], group="device"))
    return rows


# --- running one check --------------------------------------------------------------

def _mistake(key, answer):
    from grader.checks.exercises import EXERCISES

    wanted = answer.split(":", 1)[1]
    return next(m for m in EXERCISES[key].mistakes if m.key == wanted)


def _left_on_cpu(answer, module, handed):
    """The correct answer with its output moved to the CPU; handed collects the devices of the
    tensors the check hands it."""
    import torch

    def note(args):
        handed.update(str(a.device) for a in args if isinstance(a, torch.Tensor))

    if module:
        class LeftOnCPU(answer):
            def forward(self, *args, **kwargs):
                note(args)
                return super().forward(*args, **kwargs).cpu()
        LeftOnCPU.__name__ = LeftOnCPU.__qualname__ = answer.__name__
        return LeftOnCPU

    def left_on_cpu(*args, **kwargs):
        note(args)
        return answer(*args, **kwargs).cpu()
    left_on_cpu.__name__ = left_on_cpu.__qualname__ = answer.__name__
    return left_on_cpu


def student(row, handed):
    from grader.answers.correct import CORRECT, student_from
    from grader.checks.exercises import EXERCISES

    if row.answer == "correct":
        return CORRECT[row.key]
    if row.answer == "left_on_cpu":
        return _left_on_cpu(CORRECT[row.key], EXERCISES[row.key].module, handed)
    return student_from(row.key, _mistake(row.key, row.answer).fn)


@contextlib.contextmanager
def tf32(on):
    """TF32 matmuls on CUDA for the block, through one API (torch 2.9+'s fp32_precision where
    torch has it, else allow_tf32: the two are not to be mixed)."""
    if not on:
        yield
        return
    import torch

    matmul = torch.backends.cuda.matmul
    name, value = ("fp32_precision", "tf32") if hasattr(matmul, "fp32_precision") else ("allow_tf32", True)
    before = getattr(matmul, name)
    setattr(matmul, name, value)
    try:
        yield
    finally:
        setattr(matmul, name, before)


def run_one(row, device):
    """The check's result as plain data: verdict ("pass", "fail", or "error" where the check
    itself raised something else than CheckError), the named mistake's key and name, the first
    lines of the message, the seconds it took and the devices of the tensors the answer got."""
    import torch

    import grader

    handed = set()
    check = getattr(grader, f"check_{row.key}")
    answer = student(row, handed)
    verdict, named, name, message = "pass", None, None, ""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), tf32(row.group == "tf32"):
        try:
            check(answer, row.focus, hidden=row.hidden, seed=row.seed, device=device,
                  dtype=getattr(torch, row.dtype))
        except grader.CheckError as err:
            verdict, message = "fail", str(err)
            named, name = getattr(err, "finding", None), getattr(err, "finding_name", None)
        except Exception as err:  # the check itself broke (or refused the dtype): said as such
            verdict, message = "error", f"{type(err).__name__}: {err}"
    fault = None
    if device.startswith("cuda"):
        try:
            torch.cuda.synchronize(device)
        except Exception as err:  # a device-side assert: this process's CUDA runs nothing more
            fault = str(err).splitlines()[0][:200]
    lines = message.splitlines()
    return {"verdict": verdict, "named": named, "name": name, "message": "\n".join(lines[:4])[:600],
            "seconds": round(time.perf_counter() - start, 4), "handed": sorted(handed), "cuda_fault": fault}


@dataclass
class Task:
    side: str  # "cpu" (the reference) or "device" (the compared one, which may be the CPU too)
    device: str
    rows: list


_CUDA_BROKEN = []  # in a worker: a CUDA fault happened here, and CUDA runs nothing more in it


def run_task(task):
    """(the task's rows that ran, their results, the rows left): a row that ends in a CUDA
    fault ends the task, its process's CUDA being unusable; the rows after it, and every task
    the process gets until it is replaced, go back to be run by another."""
    if _CUDA_BROKEN and task.device.startswith("cuda"):
        return Task(task.side, task.device, []), [], task.rows
    out = []
    for i, row in enumerate(task.rows):
        out.append(run_one(row, task.device))
        if out[-1]["cuda_fault"]:
            _CUDA_BROKEN.append(row)
            return Task(task.side, task.device, task.rows[:i + 1]), out, task.rows[i + 1:]
    return task, out, []


def _init_worker(threads):
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)


def tasks_for(rows, device):
    """The rows as tasks of at most CHUNK checks of one exercise, the largest first: the CPU
    runs the compare rows, the device every row (with --device cpu, the CPU a second time)."""
    tasks = []
    for side, device_of_side, mine in (("cpu", "cpu", [r for r in rows if r.group == "compare"]),
                                       ("device", device, rows)):
        by_key = {}
        for row in mine:
            by_key.setdefault(row.key, []).append(row)
        for key_rows in by_key.values():
            tasks += [Task(side, device_of_side, key_rows[i:i + CHUNK]) for i in range(0, len(key_rows), CHUNK)]
    return sorted(tasks, key=lambda t: -len(t.rows))


def execute(tasks, *, jobs, threads, budget, progress):
    """{(side, row): result} for every task that finished within budget seconds; in worker
    processes started with spawn when jobs > 1 or the device is CUDA. A device-side assert (an
    answer indexing past a table) ends CUDA in its process: the rows after it go back to the
    queue, as does every task that process gets until it is replaced (on CUDA, a worker is
    replaced after RENEW tasks)."""
    results, done, start = {}, 0, time.perf_counter()
    cuda = any(task.device.startswith("cuda") for task in tasks)

    def keep(task, out):
        nonlocal done
        for row, res in zip(task.rows, out):
            results[(task.side, row)] = res
        done += 1
        if progress and (done == len(tasks) or done % max(1, len(tasks) // 10) == 0):
            print(f"  {done}/{len(tasks)} tasks, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)

    if jobs <= 1 and not cuda:
        import torch

        torch.set_num_threads(threads)
        for task in tasks:
            if time.perf_counter() - start > budget:
                break
            keep(*run_task(task)[:2])
        return results
    import multiprocessing
    import queue

    pool = multiprocessing.get_context("spawn").Pool(max(jobs, 1), initializer=_init_worker, initargs=(threads,),
                                                     maxtasksperchild=RENEW if cuda else None)
    finished, pending = queue.SimpleQueue(), 0

    def submit(task):
        nonlocal pending
        pending += 1
        pool.apply_async(run_task, (task,), callback=finished.put, error_callback=finished.put)

    try:
        for task in tasks:
            submit(task)
        while pending:
            left = budget - (time.perf_counter() - start)
            try:
                item = finished.get(timeout=max(left, 0.1) if left != float("inf") else None)
            except queue.Empty:
                print(f"  the budget of {budget:.0f} s is spent: {len(tasks) - done} tasks left out",
                      file=sys.stderr, flush=True)
                break
            pending -= 1
            if isinstance(item, BaseException):
                raise item
            task, out, rest = item
            keep(task, out)
            if rest:
                tasks.append(Task(task.side, task.device, rest))
                submit(tasks[-1])
    finally:
        pool.terminate()
        pool.join()
    return results


# --- what the results say -----------------------------------------------------------

@dataclass
class Summary:
    """Per exercise: the compared checks and how many agree, and the device's own rows."""
    compared: int = 0
    equal: int = 0
    failed_on_cpu: int = 0
    named_equal: int = 0
    correct_cpu: list = field(default_factory=lambda: [0, 0])  # correct answers' checks passed, run
    correct_dev: list = field(default_factory=lambda: [0, 0])
    dtypes: dict = field(default_factory=dict)  # dtype -> [passed on both sides, run] or why it is not run
    tf32: list = field(default_factory=lambda: [0, 0])  # passed with TF32 where the CPU passed, compared
    device_only: list = field(default_factory=lambda: [0, 0])  # named as expected, run
    errors: int = 0
    cpu_seconds: float = 0.0
    dev_seconds: float = 0.0
    missing: int = 0


def device_only_mistakes(rows, results):
    """The catalogued mistakes whose visible values check passes on the CPU: right answers as far
    as the CPU can tell (a mask made on the CPU), judged on the device alone."""
    from grader.checks.exercises import EXERCISES

    found = set()
    for row in rows:
        if row.answer.startswith("mistake:") and row.group == "compare" and not row.hidden \
                and row.dtype == "float32" and row.focus == values_focus(EXERCISES[row.key]):
            res = results.get(("cpu", row))
            if res is not None and res["verdict"] == "pass":
                found.add((row.key, row.answer))
    return found


def judge(rows, results, device_type, accepted_reasons):
    """(summaries by exercise key, per-row records, mismatches as lines)."""
    from grader.checks.exercises import EXERCISES

    summaries, records, mismatches = {}, [], []
    only = device_only_mistakes(rows, results)
    for row in rows:
        s = summaries.setdefault(row.key, Summary())
        cpu, dev = results.get(("cpu", row.on_cpu())), results.get(("device", row))
        record = {**asdict(row), "cpu": cpu if row.group == "compare" else None, "device": dev}
        records.append(record)
        if dev is None or (row.group != "device" and cpu is None):
            s.missing += 1
            record["judged"] = "not run (budget)"
            continue
        s.dev_seconds += dev["seconds"]
        s.errors += dev["verdict"] == "error" or (row.group == "compare" and cpu["verdict"] == "error")
        if row.group == "compare":
            s.cpu_seconds += cpu["seconds"]
        if (row.key, row.answer) in only:
            expected = _mistake(row.key, row.answer)
            ok = dev["verdict"] == "fail" and (dev["named"] == expected.key or dev["name"] == expected.name)
            if device_type == "cpu":
                record["judged"] = "device only: not judged on the CPU"
                continue
            # a focus other than the values one may not reach what the mistake gets wrong (a
            # check without a mask never meets a mask made on the CPU): a pass there is right; a
            # failure must still name it, and the values focus must
            unused = dev["verdict"] == "pass" and row.focus != values_focus(EXERCISES[row.key])
            ok = ok or unused
            s.device_only[0] += ok
            s.device_only[1] += 1
            record["judged"] = ("passes: this focus does not reach the mistake" if unused else "named") if ok \
                else "not named"
            if not ok:
                mismatches.append(f"{row.text()}: the device should name {expected.key}; got "
                                  f"{dev['verdict']} ({dev['named']}): {_first(dev)}")
            continue
        if row.group == "device":  # the answer left its output on the CPU
            on_device = any(d.split(":")[0] == device_type for d in dev["handed"])
            ok = dev["verdict"] == "fail" and dev["named"] == "device" if on_device else dev["verdict"] == "pass"
            s.device_only[0] += ok
            s.device_only[1] += 1
            record["judged"] = ("named device" if on_device else "passes: the check hands it no tensor "
                                "on the device") if ok else "wrong"
            if not ok:
                mismatches.append(f"{row.text()}: expected {'a failure named device' if on_device else 'a pass'}; "
                                  f"got {dev['verdict']} ({dev['named']}): {_first(dev)}")
            continue
        if row.group == "tf32":
            if cpu["verdict"] == "pass":
                s.tf32[0] += dev["verdict"] == "pass"
                s.tf32[1] += 1
                if dev["verdict"] != "pass":
                    mismatches.append(f"{row.text()}: passes on the CPU, {dev['verdict']} with TF32: {_first(dev)}")
            record["judged"] = "same" if cpu["verdict"] == dev["verdict"] else "differs"
            continue
        same = cpu["verdict"] == dev["verdict"]
        named = None
        s.compared += 1
        s.equal += same
        if cpu["verdict"] == "fail":
            s.failed_on_cpu += 1
            named = dev["verdict"] == "fail" and dev["named"] == cpu["named"]
            s.named_equal += named
        if row.answer == "correct" and row.dtype == "float32":
            for count, res in ((s.correct_cpu, cpu), (s.correct_dev, dev)):
                count[0] += res["verdict"] == "pass"
                count[1] += 1
        if row.dtype != "float32":  # the correct answers in another dtype: passing on both sides
            pair = s.dtypes.setdefault(row.dtype, [0, 0])
            pair[0] += cpu["verdict"] == dev["verdict"] == "pass"
            pair[1] += 1
        record["judged"] = "same" if same and named is not False else "differs"
        if not same or named is False:
            mismatches.append(f"{row.text()}: cpu {cpu['verdict']} ({cpu['named']}), device "
                              f"{dev['verdict']} ({dev['named']}): {_first(dev if dev['verdict'] != 'pass' else cpu)}")
    for key, reasons in accepted_reasons.items():
        for dtype, reason in reasons.items():
            summaries.setdefault(key, Summary()).dtypes.setdefault(dtype, reason)
    return summaries, records, mismatches


def _first(res):
    lines = [line.strip() for line in res["message"].splitlines() if line.strip()]
    return " / ".join(lines[1:3] or lines[:1])[:240]


def accepted_dtypes(exercises):
    """key -> the extra dtypes its checks run in, and key -> {dtype: why not} for the others: a
    dtype is accepted where the correct answer's values check, on the CPU, runs in it (passes or
    fails) instead of the check refusing it."""
    accepted, reasons = {}, {}
    for key, ex in exercises.items():
        accepted[key] = ["float64"]
        for dtype in HALF:
            res = run_one(Row(key, "correct", values_focus(ex), dtype=dtype), "cpu")
            if res["verdict"] == "error":
                reasons.setdefault(key, {})[dtype] = f"refused: {_first(res)[:100]}"
            else:
                accepted[key].append(dtype)
    return accepted, reasons


def mistake_coverage(rows):
    """{exercise key: [mistake keys with a row]}."""
    cover = {}
    for row in rows:
        if row.answer.startswith("mistake:"):
            keys = cover.setdefault(row.key, [])
            if row.answer[len("mistake:"):] not in keys:
                keys.append(row.answer[len("mistake:"):])
    return cover


# --- 08 timed -----------------------------------------------------------------------

def _timed(fn, device, repeat=3, before=None):
    """The fastest of repeat runs of fn() in milliseconds of wall-clock time, after one warm-up,
    until the device's kernels finish; before() runs ahead of each, off the clock."""
    import torch

    sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)
    best = float("inf")
    with torch.no_grad():
        for i in range(repeat + 1):
            if before is not None:
                before()
            sync()
            start = time.perf_counter()
            fn()
            sync()
            if i:  # the first run warms up
                best = min(best, time.perf_counter() - start)
    return 1000 * best


def attention_timings(device, quick):
    """08's tiled attention and key/value cache (the correct answers) against
    F.scaled_dot_product_attention: milliseconds, as data."""
    import torch
    from torch.nn import functional as F

    from grader.answers.correct import CachedSelfAttention, tiled_attention

    cuda = device.startswith("cuda")
    dtypes = ["float32", "float16"] if cuda else ["float32"]
    if quick:
        B, nh, hs, tile, Ts = 1, 4, 16, 32, [64, 128]
    elif cuda:
        B, nh, hs, tile, Ts = 1, 8, 64, 128, [1024, 4096, 8192]
    else:
        B, nh, hs, tile, Ts = 1, 4, 16, 64, [256, 1024]
    variants = {f"tiled_attention (course answer, tiles of {tile})": lambda q, k, v: tiled_attention(q, k, v, tile),
                "F.scaled_dot_product_attention (torch's choice)":
                    lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        for name in ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION") if cuda else ("MATH",):
            backend = getattr(SDPBackend, name, None)
            if backend is not None:
                variants[f"F.sdpa, {name.lower()} backend"] = (
                    lambda b: lambda q, k, v: _with_backend(sdpa_kernel, b, q, k, v))(backend)
    except ImportError:
        pass
    gen = torch.Generator().manual_seed(0)
    attention = []
    for dtype in dtypes:
        rows = {name: {"variant": name, "dtype": dtype, "ms": {}, "max_diff": {}} for name in variants}
        for T in Ts:
            q, k, v = (torch.randn(B, nh, T, hs, generator=gen).to(device, getattr(torch, dtype))
                       for _ in range(3))  # (B, n_heads, T, head_size), drawn on the CPU, then moved
            want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
            for name, fn in variants.items():
                row = rows[name]
                try:
                    with torch.no_grad():
                        row["max_diff"][T] = float((fn(q, k, v).double() - want).abs().max())
                    row["ms"][T] = _timed(lambda: fn(q, k, v), device)
                except Exception as err:  # a backend this device or dtype does not have
                    row["ms"][T] = None
                    row["error"] = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:120]}"
            del q, k, v, want
        attention += rows.values()
    if quick:
        C, nh_c, hs_c, block, prompt, new = 24, 3, 8, 32, 16, 24
    elif cuda:
        C, nh_c, hs_c, block, prompt, new = 512, 8, 64, 1024, 512, 256
    else:
        C, nh_c, hs_c, block, prompt, new = 64, 4, 16, 64, 32, 64
    decoding = []
    for dtype in dtypes:
        torch.manual_seed(0)
        attn = CachedSelfAttention(C, nh_c, hs_c, block).to(device, getattr(torch, dtype)).eval()
        x = torch.randn(1, prompt + new, C, generator=gen).to(device, getattr(torch, dtype))  # (1, T, C)
        outs = {}

        def prefill():
            attn.reset_cache()
            attn(x[:, :prompt])

        def cached():
            outs["cached"] = [attn(x[:, t:t + 1]) for t in range(prompt, prompt + new)]

        def without_cache():
            split = lambda t: t.view(1, t.shape[1], nh_c, hs_c).transpose(1, 2)  # (1, n_heads, L, head_size)
            steps = []
            for t in range(prompt, prompt + new):
                window = x[:, max(0, t + 1 - block):t + 1]  # (1, L, C): the last block_size tokens
                q, k, v = split(attn.query(window)), split(attn.key(window)), split(attn.value(window))
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, -1:]  # (1, n_heads, 1, head_size)
                steps.append(attn.proj(out.transpose(1, 2).reshape(1, 1, nh_c * hs_c)))
            outs["plain"] = steps

        ms_cached, ms_plain = _timed(cached, device, before=prefill), _timed(without_cache, device)
        diff = max(float((a.double() - b.double()).abs().max()) for a, b in zip(outs["cached"], outs["plain"]))
        decoding.append({"dtype": dtype, "cached_ms_per_token": ms_cached / new,
                         "sdpa_window_ms_per_token": ms_plain / new, "max_diff": diff})
    return {"attention": {"B": B, "n_heads": nh, "head_size": hs, "tile_size": tile, "T": Ts, "rows": attention},
            "decoding": {"C": C, "n_heads": nh_c, "head_size": hs_c, "block_size": block, "prompt": prompt,
                         "new_tokens": new, "rows": decoding}}


def _with_backend(sdpa_kernel, backend, q, k, v):
    from torch.nn import functional as F

    # a backend that cannot take these inputs warns why before it raises; the table says "n/a"
    with sdpa_kernel(backend), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(kernel not used because|has been runtime disabled|Expected query, key)",
                                category=UserWarning)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


# --- the notebooks --------------------------------------------------------------------

def notebooks_can_run_here():
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in NOTEBOOK_PACKAGES)


def _site_dirs():
    """This python's package folders, in its order: a throwaway venv sees them through a .pth
    file (so it sees this python's torch even where this python is itself a venv)."""
    import site

    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        dirs.append(site.getusersitepackages())
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and p not in dirs]
    return [d for d in dirs if os.path.isdir(d)]


def make_venv(folder, wheelhouse, installer="auto", packages=NOTEBOOK_PACKAGES):
    """A throwaway venv in folder that sees this python's packages (--system-site-packages, and a
    .pth for a python that is a venv itself), with the notebooks' packages installed from the
    wheelhouse, without a package index: by pip where this python has it, else by unpacking the
    wheels. Returns (its python, how they were installed)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)],
                   check=True, capture_output=True, text=True)
    python = folder / "bin" / "python"
    site_dir = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in _site_dirs())
    (site_dir / "zz_gpu_check_base.pth").write_text(lines)
    has_pip = subprocess.run([str(python), "-c", "import pip"], capture_output=True).returncode == 0
    if installer == "pip" or (installer == "auto" and has_pip):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-cache-dir",
                               "--find-links", str(wheelhouse), *packages],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {', '.join(packages)} from {wheelhouse}:\n"
                               + (done.stderr or done.stdout)[-2000:])
        return python, "pip"
    unpack_wheels(wheelhouse, site_dir, folder)
    return python, "unpacked"


def _dist_name(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def unpack_wheels(wheelhouse, site_dir, prefix):
    """Install the wheelhouse's wheels by unpacking them (a wheel is a zip of what goes into
    site-packages, with its .data/ folder's parts going elsewhere), leaving out the
    distributions this python has already."""
    import importlib.metadata
    import zipfile

    have = {_dist_name(d.metadata["Name"] or "") for d in importlib.metadata.distributions()}
    for wheel in sorted(Path(wheelhouse).glob("*.whl")):
        if _dist_name(wheel.name.split("-")[0]) in have:
            continue
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                parts = info.filename.split("/")
                if info.is_dir() or ".." in parts:
                    continue
                if parts[0].endswith(".data"):
                    kind, rest = parts[1], parts[2:]
                    if kind in ("purelib", "platlib"):
                        target = Path(site_dir, *rest)
                    elif kind == "data":
                        target = Path(prefix, *rest)
                    else:  # scripts, headers: not needed to run a kernel
                        continue
                else:
                    target = Path(site_dir, *parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(info))


def _sanitizers():
    """The nbval sanitisers the suite compares executed notebooks with (a hidden check's seed,
    timings, addresses): (regex, replacement) pairs."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests" / "notebooks" / "nbval_sanitize.cfg")
    pairs = [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]
    return pairs or [(re.compile(r"seed \d+"), "seed SEED")]


def check_outputs(notebook, sanitizers):
    """[(grade id, the test cell's outputs as text)] of a notebook read as JSON: its nbgrader
    test cells, whose outputs are the checks' lines."""
    cells = []
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta.get("grade"):
            continue
        parts = {"stdout": "", "stderr": "", "error": "", "result": ""}  # streams come in pieces
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                parts[out["name"]] += "".join(out["text"])
            elif out["output_type"] == "error":
                parts["error"] += f"{out['ename']}: {out['evalue']}\n"
            elif "text/plain" in out.get("data", {}):
                parts["result"] += "".join(out["data"]["text/plain"]) + "\n"
        joined = "".join(f"[{name}] {text}" for name, text in parts.items() if text)
        for regex, replace in sanitizers:
            joined = regex.sub(replace, joined)
        cells.append((meta.get("grade_id", "?"), joined))
    return cells


def compare_cells(committed, executed, sanitizers):
    """[{grade_id, same, cpu, device}] for each test cell of the committed notebook (the CPU
    run), against the executed one (None where it did not run)."""
    ran = dict(check_outputs(executed, sanitizers)) if executed is not None else {}
    return [{"grade_id": gid, "same": ran.get(gid) == text, "cpu": text, "device": ran.get(gid)}
            for gid, text in check_outputs(committed, sanitizers)]


def execute_notebook(path, executed, timeout):
    """Run in the python that has nbclient (the throwaway venv): execute the notebook in its own
    folder with a kernel of this python and write it, with its outputs, to executed."""
    import nbformat
    from nbclient import NotebookClient

    spec = Path(tempfile.mkdtemp(prefix="gpu-check-kernel-"))
    (spec / "kernels" / "gpu-check").mkdir(parents=True)
    (spec / "kernels" / "gpu-check" / "kernel.json").write_text(json.dumps(
        {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
         "display_name": "gpu check", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(spec)
    nb = nbformat.read(path, as_version=4)
    error = None
    try:
        NotebookClient(nb, timeout=timeout, startup_timeout=timeout, kernel_name="gpu-check", record_timing=False,
                       resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    except Exception as err:  # a cell that failed: the notebook is kept as far as it ran
        error = f"{type(err).__name__}: " + (str(err).strip().splitlines() or [""])[-1][:300]
    nbformat.write(nb, executed)
    shutil.rmtree(spec, ignore_errors=True)
    return error


def run_notebooks(device, *, only, installer, wheelhouse, timeout, jobs, progress):
    """Every solution notebook (or those whose name contains one of only) executed with
    GRADER_DEVICE=device, its test cells' outputs compared with the committed ones."""
    found = sorted((ROOT / "solutions").glob("*/*.ipynb"))
    notebooks = [p for p in found if not only or any(o in p.stem for o in only)]
    info = {"device": device, "notebooks": [], "how": None}
    scratch = Path(tempfile.mkdtemp(prefix="gpu-check-notebooks-"))
    extra = []  # folders put ahead on the executors' PYTHONPATH
    try:
        if installer == "here":
            if not notebooks_can_run_here():
                raise RuntimeError(f"this python lacks one of {', '.join(NOTEBOOK_PACKAGES)}")
            python, info["how"] = Path(sys.executable), "this python"
        else:
            if not any(Path(wheelhouse).glob("*.whl")):
                raise RuntimeError(f"no wheels in {wheelhouse}: run `make gpu-wheelhouse` where a package "
                                   "index is reachable, and bring the folder along")
            started = time.perf_counter()
            try:
                python, how = make_venv(scratch / "venv", wheelhouse, installer)
                where = "a throwaway venv"
            except subprocess.CalledProcessError:  # no venv module: this python, the wheels unpacked beside it
                python, how, where = Path(sys.executable), "unpacking", "this python (no venv could be made)"
                unpack_wheels(wheelhouse, scratch / "site", scratch / "prefix")
                extra.append(str(scratch / "site"))
            info["how"] = f"{where}, wheels installed by {how} in {time.perf_counter() - started:.0f} s"
        env = dict(os.environ, GRADER_DEVICE=device, JUPYTER_PLATFORM_DIRS="1",
                   IPYTHONDIR=str(scratch / "ipython"), JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
                   PYDEVD_DISABLE_FILE_VALIDATION="1",
                   PYTHONPATH=os.pathsep.join([*extra, str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        running, waiting, sanitizers = [], list(notebooks), _sanitizers()
        while waiting or running:
            while waiting and len(running) < jobs:
                path = waiting.pop(0)
                executed = scratch / f"{path.stem}.executed.ipynb"
                proc = subprocess.Popen([str(python), str(Path(__file__).resolve()), "--execute-notebook", str(path),
                                         "--executed", str(executed), "--cell-timeout", str(timeout)],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                running.append((path, executed, proc, time.perf_counter()))
            path, executed, proc, started = running.pop(0)
            out, err = proc.communicate()
            record = {"notebook": path.stem, "seconds": round(time.perf_counter() - started, 1),
                      "error": (out.strip().splitlines() or [""])[-1] if proc.returncode else None}
            if proc.returncode and not executed.exists():
                record["error"] = (err.strip().splitlines() or ["the executor failed"])[-1][:300]
            record["cells"] = compare_cells(json.loads(path.read_text(encoding="utf-8")),
                                            json.loads(executed.read_text(encoding="utf-8")) if executed.exists() else None,
                                            sanitizers)
            info["notebooks"].append(record)
            if progress:
                same = sum(c["same"] for c in record["cells"])
                print(f"  {path.stem}: {same}/{len(record['cells'])} test cells as on the CPU, "
                      f"{record['seconds']:.0f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return info


# --- printing -----------------------------------------------------------------------

def _pair(p):
    return f"{p[0]}/{p[1]}" if p[1] else "-"


def table(summaries, device_type, cover):
    dev = device_type
    head = (f"{'exercise':30} {'checks':>6} {'verdicts =':>10} {'named =':>8} {'correct cpu/' + dev:>18} "
            f"{'float64':>8} {'float16':>8} {'bfloat16':>8} {'TF32':>7} {'device-only':>11} {'mistakes':>8} "
            f"{'cpu s':>6} {dev + ' s':>6}")
    lines = [head, "-" * len(head)]

    def dtype_cell(s, name):
        value = s.dtypes.get(name)
        return _pair(value) if isinstance(value, list) else ("-" if value is None else "refused")

    for key, s in summaries.items():
        lines.append(f"{key:30} {s.compared:>6} {_pair([s.equal, s.compared]):>10} "
                     f"{_pair([s.named_equal, s.failed_on_cpu]):>8} "
                     f"{_pair(s.correct_cpu) + ' ' + _pair(s.correct_dev):>18} {dtype_cell(s, 'float64'):>8} "
                     f"{dtype_cell(s, 'float16'):>8} {dtype_cell(s, 'bfloat16'):>8} {_pair(s.tf32):>7} "
                     f"{_pair(s.device_only):>11} {len(cover.get(key, ())):>8} {s.cpu_seconds:>6.1f} "
                     f"{s.dev_seconds:>6.1f}")
    return lines


def timing_table(timings, device_label):
    a, d = timings["attention"], timings["decoding"]
    lines = [f"08 timed on {device_label}, milliseconds (the fastest of 3 after a warm-up; a table, not a verdict)",
             f"causal attention, B={a['B']}, n_heads={a['n_heads']}, head_size={a['head_size']}:"]
    head = f"  {'':52} {'dtype':9}" + "".join(f"{'T=' + str(T):>10}" for T in a["T"])
    lines.append(head)
    for row in a["rows"]:
        cells = "".join(f"{row['ms'][T]:>10.3f}" if row["ms"].get(T) is not None else f"{'n/a':>10}" for T in a["T"])
        lines.append(f"  {row['variant']:52} {row['dtype']:9}{cells}")
    lines.append(f"decoding {d['new_tokens']} tokens after a prompt of {d['prompt']} (C={d['C']}, n_heads={d['n_heads']}, "
                 f"head_size={d['head_size']}, block_size={d['block_size']}), ms per token:")
    for row in d["rows"]:
        lines.append(f"  {'CachedSelfAttention (course answer)':52} {row['dtype']:9}{row['cached_ms_per_token']:>10.3f}")
        lines.append(f"  {'no cache: F.sdpa over the last block_size tokens':52} {row['dtype']:9}"
                     f"{row['sdpa_window_ms_per_token']:>10.3f}")
    return lines


def environment(device):
    import platform

    import torch

    info = {"torch": torch.__version__, "python": platform.python_version(), "device": device,
            "cuda": torch.version.cuda, "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "threads": torch.get_num_threads()}
    if device.startswith("cuda"):
        matmul = torch.backends.cuda.matmul
        info.update(name=torch.cuda.get_device_name(device), capability=list(torch.cuda.get_device_capability(device)),
                    matmul_fp32_precision=getattr(matmul, "fp32_precision", None),
                    sdpa={name: getattr(torch.backends.cuda, f"{name}_sdp_enabled")()
                          for name in ("flash", "mem_efficient", "math", "cudnn")
                          if hasattr(torch.backends.cuda, f"{name}_sdp_enabled")})
    return info


# --- main ---------------------------------------------------------------------------

def _write_json(path, data):
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=1, default=str))


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="the device compared with the CPU (default cuda; "
                   "cpu runs the same checks CPU against CPU)")
    p.add_argument("--quick", action="store_true", help="every exercise and every catalogued mistake, "
                   "fewer focuses and seeds; leaves the notebooks out unless --notebooks yes")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core, at "
                   "most 12; --quick: 1, in this process)")
    p.add_argument("--budget", type=float, default=None, help="seconds for the checks: those not done "
                   "by then are left out and said so (default 240; none with --quick)")
    p.add_argument("--json", default=None, help="write the results there (default: $OUT/gpu_check.json "
                   "when OUT is set)")
    p.add_argument("--no-checks", action="store_true", help="skip the checks and the timings")
    p.add_argument("--no-timings", action="store_true", help="skip 08's timings")
    p.add_argument("--notebooks", choices=("auto", "yes", "no"), default="auto",
                   help="execute the solution notebooks on the device (auto: where they can run, not with --quick)")
    p.add_argument("--only", nargs="*", default=[], help="only the notebooks whose name contains one of these")
    p.add_argument("--installer", choices=("auto", "pip", "unpack", "here"), default="auto",
                   help="how the notebooks get nbclient/ipykernel: here (this python has them), or a throwaway "
                        "venv filled from the wheelhouse by pip or by unpacking the wheels (auto: this python "
                        "where it can, else pip where there is pip)")
    p.add_argument("--wheelhouse", default=str(WHEELHOUSE), help="the wheels for the notebooks (make gpu-wheelhouse)")
    p.add_argument("--cell-timeout", type=int, default=300)
    p.add_argument("--execute-notebook", help=argparse.SUPPRESS)
    p.add_argument("--executed", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.execute_notebook:  # the inner step of --notebooks, in the python that has nbclient
        error = execute_notebook(args.execute_notebook, args.executed, args.cell_timeout)
        if error:
            print(error)
            return 1
        return 0
    started = time.perf_counter()
    device = args.device
    device_type = device.split(":")[0]
    json_path = args.json or (os.path.join(os.environ["OUT"], "gpu_check.json") if os.environ.get("OUT") else None)
    data = {"argv": sys.argv[1:], "quick": args.quick}
    lines, ok = [], True
    last = None

    if not args.no_checks:
        import torch

        import grader
        from grader.checks.exercises import EXERCISES

        if device_type == "cuda" and not torch.cuda.is_available():
            print("torch sees no CUDA device here: run with --device cpu to compare the CPU with itself",
                  file=sys.stderr)
            return 2
        assert tuple(EXERCISES) == tuple(grader.EXERCISE_KEYS)
        data["environment"] = environment(device)
        accepted, reasons = accepted_dtypes(EXERCISES)
        rows = plan(EXERCISES, quick=args.quick, device_type=device_type, accepted=accepted)
        cover = mistake_coverage(rows)
        cores = os.cpu_count() or 1
        jobs = args.jobs if args.jobs is not None else (1 if args.quick else min(cores, 12))
        threads = int(os.environ.get("OMP_NUM_THREADS") or max(1, cores // max(jobs, 1)))
        tasks = tasks_for(rows, device)
        print(f"{len(rows)} checks on {device} (and the compared ones on the CPU), {len(tasks)} tasks, "
              f"{jobs} worker(s)", file=sys.stderr, flush=True)
        budget = args.budget if args.budget is not None else (float("inf") if args.quick else 240.0)
        results = execute(tasks, jobs=jobs, threads=threads, budget=budget, progress=True)
        summaries, records, mismatches = judge(rows, results, device_type, reasons)
        total = Summary()
        for s in summaries.values():
            for name in ("compared", "equal", "failed_on_cpu", "named_equal", "errors", "missing"):
                setattr(total, name, getattr(total, name) + getattr(s, name))
            total.device_only = [total.device_only[0] + s.device_only[0], total.device_only[1] + s.device_only[1]]
            total.tf32 = [total.tf32[0] + s.tf32[0], total.tf32[1] + s.tf32[1]]
        env = data["environment"]
        label = f"{device} ({env['name']})" if env.get("name") else device
        lines.append(f"checks on {label} against the CPU; torch {env['torch']}, python {env['python']}"
                     + (f", CUDA {env['cuda']}, float32 matmuls: {env.get('matmul_fp32_precision') or 'default'} "
                        f"({env['float32_matmul_precision']})" if device_type == "cuda" else ""))
        lines += table(summaries, device_type, cover)
        refused = {}
        for key, why in reasons.items():
            for dtype, text in why.items():
                refused.setdefault((dtype, text), []).append(key)
        for (dtype, text), keys in refused.items():
            who = "every exercise" if len(keys) == len(EXERCISES) else ", ".join(keys)
            lines.append(f"{dtype}: the checks of {who} do not run in it ({text})")
        if device_type == "cpu":
            lines.append("device-only answers (right on the CPU, wrong on a GPU): not judged on the CPU")
        else:
            lines.append(f"device-only answers named on {device_type}: {_pair(total.device_only)} "
                         "(an output left on the CPU; catalogued mistakes the CPU passes)")
            lines.append(f"correct answers with TF32 matmuls on {device_type}: {_pair(total.tf32)} pass "
                         "where the CPU passes (not in the last line)")
        faults = sorted({f"{row.key} {row.answer}" for (side, row), res in results.items()
                         if side == "device" and res.get("cuda_fault")})
        if faults:
            lines.append(f"answers whose checks ended in a CUDA device-side assert (named from the CPU; the "
                         f"rows after them run by another process): {len(faults)}: {', '.join(faults)[:300]}")
        if total.errors:
            lines.append(f"checks that raised something else than CheckError: {total.errors}")
        if total.missing:
            lines.append(f"checks not run within the budget of {budget:.0f} s: {total.missing}")
        if mismatches:
            lines.append(f"differences ({len(mismatches)}):")
            lines += [f"  {m}" for m in mismatches[:30]]
            if len(mismatches) > 30:
                lines.append(f"  ... {len(mismatches) - 30} more in the JSON file")
        data.update(rows=records, coverage={"exercises": list(summaries), "mistakes": cover},
                    summaries={k: asdict(s) for k, s in summaries.items()},
                    totals=asdict(total), mismatches=mismatches, checks_seconds=round(time.perf_counter() - started, 1))
        ok = total.equal == total.compared and total.named_equal == total.failed_on_cpu and not total.errors \
            and not total.missing and total.device_only[0] == total.device_only[1]
        last = (f"{device_type} verdicts equal cpu: {total.equal}/{total.compared}; "
                f"named equal: {total.named_equal}/{total.failed_on_cpu}")
        _write_json(json_path, data)
        if not args.no_timings:
            data["timings"] = timings = attention_timings(device, args.quick)
            lines += timing_table(timings, label)
            _write_json(json_path, data)

    run_nb = args.notebooks == "yes" or (args.notebooks == "auto" and not args.quick and (
        notebooks_can_run_here() or any(Path(args.wheelhouse).glob("*.whl"))))
    if run_nb:
        installer = args.installer
        if installer == "auto":
            installer = "here" if notebooks_can_run_here() else "auto"
        cores = os.cpu_count() or 1
        try:
            nb = run_notebooks(device, only=args.only, installer=installer, wheelhouse=args.wheelhouse,
                               timeout=args.cell_timeout, jobs=max(1, min(4, cores // 2)), progress=True)
        except Exception as err:
            nb = {"error": f"{type(err).__name__}: {err}", "notebooks": []}
            lines.append(f"notebooks: not run: {nb['error']}")
            ok = False
        data["notebooks"] = nb
        cells = [c for n in nb["notebooks"] for c in n["cells"]]
        same = sum(c["same"] for c in cells)
        if nb["notebooks"]:
            lines.append(f"notebooks executed with GRADER_DEVICE={device} ({nb.get('how')}):")
            for n in nb["notebooks"]:
                n_same = sum(c["same"] for c in n["cells"])
                lines.append(f"  {n['notebook']:28} {n_same}/{len(n['cells'])} test cells as on the CPU, "
                             f"{n['seconds']:.0f} s" + (f"; {n['error']}" if n["error"] else ""))
                for c in n["cells"]:
                    if not c["same"]:
                        lines.append(f"    {c['grade_id']}: cpu {c['cpu'][:150]!r} | {device_type} {str(c['device'])[:150]!r}")
            lines.append(f"{device_type} notebook checks equal cpu: {same}/{len(cells)}")
            ok = ok and same == len(cells) and not any(n["error"] for n in nb["notebooks"])
        _write_json(json_path, data)
    elif args.notebooks == "auto" and not args.quick:
        lines.append(f"notebooks: not run (this python lacks {', '.join(NOTEBOOK_PACKAGES)} and {args.wheelhouse} "
                     "has no wheels: make gpu-wheelhouse)")

    data["seconds"] = round(time.perf_counter() - started, 1)
    _write_json(json_path, data)
    lines.append(f"{data['seconds']:.0f} s in all" + (f"; results in {json_path}" if json_path else ""))
    if last:
        lines.append(last)
    print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
