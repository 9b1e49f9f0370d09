"""Timing for the notebooks: the fastest of a few runs, and a plot of times against T."""
import time

import torch


def best_time(fn, *args, repeat=3):
    """The fastest of `repeat` runs of fn(*args) in milliseconds: the CPU time of this
    process on the CPU (other programs on the machine do not inflate it), the wall-clock
    time until the kernels finish when the first argument is on a GPU."""
    cuda = isinstance(args[0], torch.Tensor) and args[0].is_cuda
    clock = time.perf_counter if cuda else time.process_time
    times = []
    for _ in range(repeat):
        if cuda:
            torch.cuda.synchronize()
        start = clock()
        fn(*args)
        if cuda:
            torch.cuda.synchronize()
        times.append(clock() - start)
    return 1000 * min(times)


def time_variants(variants, Ts, make_inputs, yours=()):
    """{name: [milliseconds for each T]} of fn(*make_inputs(T)) for every variant, after one
    run to warm up. A variant that raises gets no line and one printed sentence: one of
    yours (named in `yours`) that is not written yet, or fails, says so; another one is a
    backend this machine does not have."""
    timings = {}
    for name, fn in variants.items():
        try:
            row = []
            for T in Ts:
                args = make_inputs(T)
                with torch.no_grad():
                    fn(*args)  # warm up
                    row.append(best_time(fn, *args))
            timings[name] = row
        except NotImplementedError:
            print(f"{name}: not written yet, so it is left out")
        except Exception as err:
            first = (str(err).splitlines() or [""])[0][:80]
            if name in yours:
                print(f"{name}: your code raised {type(err).__name__} ({first}), so it is left out")
            else:
                print(f"{name}: not available here ({first})")
    return timings


def plot_timings(timings, Ts, title, ylabel):
    """Log-log lines of time against T, one per variant, one labelled tick per T."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(Ts, [str(T) for T in Ts])
    ax.minorticks_off()
    for name, row in timings.items():
        ax.plot(Ts, row, "o-", label=name)
    ax.set(xlabel="sequence length T", ylabel=ylabel, title=title)
    if timings:
        ax.legend(fontsize=8)
    plt.show()


def timed_generation(model, idx, max_new_tokens, block_size=None):
    """Greedy generation from a model with a key/value cache (notebook 08's CachedLM: its
    `attn` has `reset_cache()`, and it returns the logits of the token after the last one).
    With block_size, the cache is emptied at every step and the last block_size tokens are
    run again (no cache); without it, the prompt is run once and then each new token alone.
    Returns the ids (B, T + max_new_tokens), the CPU seconds of every step, and the logits
    each step chose from, (max_new_tokens, B, vocab_size)."""
    times, chosen = [], []
    model.attn.reset_cache()
    logits = None if block_size else model(idx)  # (B, vocab_size): the prompt, once
    for _ in range(max_new_tokens):
        start = time.process_time()
        if block_size:  # no cache: forget everything and run the whole context again
            model.attn.reset_cache()
            logits = model(idx[:, max(0, idx.shape[1] - block_size):])  # (B, vocab_size)
        chosen.append(logits)
        idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)  # (B, T + 1): the most likely token
        if not block_size:
            logits = model(idx[:, -1:])  # only the newest token
        times.append(time.process_time() - start)
    return idx, times, torch.stack(chosen)
