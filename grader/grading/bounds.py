"""Bounds on a submitted notebook, and on what a graded notebook keeps of its outputs.

A submitted notebook is read only within NotebookLimits: its JSON nested at most
`depth` deep and at most `values` values, at most `cells` cells, at most `source`
characters of cell sources in all and `cell_source` in one cell. Over a bound, the
notebook is that student's "needs attention" with the reason (too_large), before anything
else reads or runs it: every trusted-side step (the scan, the tamper comparison, the
sanitiser, rendering) then works on a notebook of bounded size, and the kernel runs a
bounded number of cells.

Outputs:

nbgrader's LimitOutput counts lines, so one long line (a student printing 300 MB) would
pass whole into the autograded notebook, the gradebook's view of it and the feedback
page. Here each output, each cell and the whole notebook are bounded in bytes as the
outputs arrive from the kernel: an output over a bound keeps its first bytes and ends
with a note saying what was cut (a few hundred bytes beyond the bound); once a cell or
the notebook is full, later outputs are left out (the note of the first cut one says so). A bound changes no grade: test cells
are graded outside the kernel.
"""
from dataclasses import dataclass, field

from nbformat.notebooknode import NotebookNode

MiB = 2**20
KiB = 2**10
FRAME = 128  # bytes of an output besides its text (keys, type, stream name)


@dataclass(frozen=True)
class NotebookLimits:
    """What a submitted notebook may hold (the course's largest has 45 cells and 33,000
    characters of source: each bound is ten times and more what a student needs)."""
    cells: int = 500
    source: int = 2 * MiB  # characters of all the cells' sources
    cell_source: int = 512 * KiB  # characters of one cell's source
    depth: int = 64  # nesting of its JSON
    values: int = 2_000_000  # JSON values (every string, number, list and dict)


LIMITS = NotebookLimits()


def json_problem(data, limits=LIMITS):
    """Why parsed JSON is over the bounds (nesting, number of values), or None."""
    todo, count = [(data, 0)], 0
    while todo:
        value, depth = todo.pop()
        count += 1
        if depth > limits.depth:
            return f"its JSON is nested more than {limits.depth} deep"
        if count > limits.values:
            return f"its JSON holds more than {limits.values:,} values"
        if isinstance(value, dict):
            todo.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            todo.extend((v, depth + 1) for v in value)
    return None


def cells_problem(nb, limits=LIMITS):
    """Why a notebook (nbformat NotebookNode or dict) holds more than a student's notebook
    may (cells, characters of source), or None."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return None
    if len(cells) > limits.cells:
        return f"it has {len(cells):,} cells; a notebook may have at most {limits.cells:,}"
    total = 0
    for index, cell in enumerate(cells):
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        size = len(source) if isinstance(source, str) else sum(len(s) for s in source if isinstance(s, str))
        if size > limits.cell_source:
            return (f"cell {index + 1} holds {_human(size)} of text; a cell may hold at most "
                    f"{_human(limits.cell_source)}")
        total += size
    if total > limits.source:
        return f"its cells hold {_human(total)} of text; a notebook may hold at most {_human(limits.source)}"
    return None


def too_large(text, limits=LIMITS):
    """Why a submitted notebook's text is over the bounds, or None (json.loads itself
    refuses nesting deeper than Python's recursion allows)."""
    import json

    try:
        data = json.loads(text)
    except RecursionError:
        return f"its JSON is nested more than {limits.depth} deep"
    except ValueError:
        return None  # not JSON: the reader says so
    return json_problem(data, limits) or cells_problem(data, limits)


@dataclass
class OutputBounds:
    output: int = 1 * MiB  # bytes of one output
    cell: int = 4 * MiB  # of all the outputs of one cell
    notebook: int = 16 * MiB  # of all the outputs of the notebook
    used: dict = field(default_factory=dict)  # cell index -> bytes kept
    total: int = 0

    def admit(self, out, cell_index):
        """What to keep of an output that just arrived for a cell: out itself, a cut copy
        (with a note), or None (leave it out: the cell or the notebook is full)."""
        used = self.used.get(cell_index, 0)
        room = min(self.output, self.cell - used, self.notebook - self.total)
        if room <= 0:
            return None
        size = output_size(out)
        if size > room:
            full = room < self.output  # the cell or the notebook, not this one output, is full
            why = ("one output" if not full else
                   "this cell's outputs" if room == self.cell - used else "the notebook's outputs")
            rest = ("" if not full else "; later outputs of this cell are not kept"
                    if why == "this cell's outputs" else "; later outputs of the notebook are not kept")
            out = cut(out, room, f"{_human(size)} of output, more than {why} may keep when "
                                 f"graded ({_limits(self)}){rest}")
            size = output_size(out)
            if full:
                self.used[cell_index] = self.cell
                self.total += size
                return out
        self.used[cell_index] = used + size
        self.total += size
        return out


def _human(n):
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / 2**10:.0f} KiB"


def _limits(bounds):
    return (f"{_human(bounds.output)} an output, {_human(bounds.cell)} a cell, "
            f"{_human(bounds.notebook)} a notebook")


def _text_size(text, limit=None):
    """Bytes of text in UTF-8, counted exactly only where it might matter."""
    if not isinstance(text, str):
        return 0
    if limit is not None and 4 * len(text) <= limit:
        return len(text)  # at most 4 bytes a character: certainly under the limit
    return len(text.encode("utf-8", "surrogatepass"))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def output_size(out):
    """The bytes of text one output holds (its JSON, give or take the punctuation)."""
    return sum(_text_size(s) for s in _strings(dict(out)))


def _head(text, limit):
    """The first limit bytes of text, cut between characters."""
    if _text_size(text, limit) <= limit:
        return text
    return text.encode("utf-8", "surrogatepass")[:max(0, limit)].decode("utf-8", "ignore")


def cut(out, limit, reason):
    """A copy of the output that holds at most about limit bytes, ending with a note."""
    note = f"\n[output cut: {reason}]\n"
    keep = max(0, limit - _text_size(note) - FRAME)
    kind = out.get("output_type")
    if kind == "stream":
        return NotebookNode(output_type="stream", name=out.get("name", "stdout"),
                            text=_head(out.get("text", ""), keep) + note)
    if kind == "error":
        return NotebookNode(output_type="error", ename=_head(out.get("ename", ""), 200),
                            evalue=_head(out.get("evalue", ""), keep // 2) + note,
                            traceback=[_head("\n".join(out.get("traceback", [])), keep // 2), note])
    # display_data / execute_result: the plain text survives, the rest is dropped
    plain = (out.get("data") or {}).get("text/plain", "")
    plain = "\n".join(plain) if isinstance(plain, list) else plain
    new = NotebookNode(output_type=kind, data={"text/plain": _head(plain, keep) + note}, metadata={})
    if kind == "execute_result":
        new["execution_count"] = out.get("execution_count")
    return new


# --- the same bounds, kept by the graded kernel itself ---------------------------------------
# An output is cut where it is made, in the kernel, before it is serialised and sent: a
# 300 MB print then costs the kernel the string and no more, and the grading process never
# receives it. The student's code can undo this (it runs in the same kernel); what it then
# sends is refused by the grading process's sockets (grader.grading.kernel_client), unread.
KERNEL_SIDE = r'''
def __grading_bound_outputs(output, cell, limits):
    import json, sys
    from IPython import get_ipython

    shell = get_ipython()
    if getattr(shell, "_grading_bounds", None) is not None:  # kept already (a client that connects again)
        return
    shell._grading_bounds = (output, cell)
    kernel = getattr(shell, "kernel", None)
    used = [0, False]  # bytes of this cell's outputs so far; whether the cell's note was written

    def reset(*args, **kwargs):
        used[0], used[1] = 0, False
    shell.events.register("pre_execute", reset)

    def size(value):
        if isinstance(value, str):
            return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        try:
            return len(json.dumps(value, default=str))
        except Exception:
            return 0

    def human(n):
        return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"

    def note(n, why, rest=""):
        return (f"\n[output cut: {human(n)} of output, more than {why} may keep when graded "
                f"({limits}){rest}]\n")

    def room():
        return min(output, cell - used[0])

    def cut(text, n):
        """text (n bytes) as the bounds keep it: whole, or its head and a note."""
        left = room()
        if n <= left:
            used[0] += n
            return text
        head = text[:max(0, left - 2048)]
        head = head if head.isascii() else head[:len(head) // 4]
        if left < output:  # the cell is full
            if used[1]:
                return ""
            used[1] = True
            text = head + note(n, "this cell's outputs", "; later outputs of this cell are not kept")
        else:
            text = head + note(n, "one output")
        used[0] += size(text)
        return text

    def bound_stream(kind):
        """On the class, as a property: IPython's run_cell sets each stream's write for the
        cell and puts back the one it found (an instance attribute, which a plain method of
        the class would not win against); assignments to it are let go."""
        write = kind.write

        def bounded(self, text, *args, **kwargs):
            if isinstance(text, str) and text:
                kept = cut(text, size(text))
                if kept:
                    write(self, kept, *args, **kwargs)
                return len(text)
            return write(self, text, *args, **kwargs)
        kind.write = property(lambda self: bounded.__get__(self), lambda self, value: None)

    for kind in {type(sys.stdout), type(sys.stderr)}:
        if kind.__module__.startswith("ipykernel"):
            bound_stream(kind)

    def bounded_data(data):
        if not isinstance(data, dict):
            return data
        n = sum(size(v) for v in data.values())
        if n <= room():
            used[0] += n
            return data
        plain = data.get("text/plain", "")
        return {"text/plain": cut(plain if isinstance(plain, str) else "", n) or note(n, "one output")}

    publish = shell.display_pub.publish

    def bounded_publish(data, *args, **kwargs):
        return publish(bounded_data(data), *args, **kwargs)
    shell.display_pub.publish = bounded_publish

    write_format_data = shell.displayhook.write_format_data

    def bounded_format_data(format_dict, *args, **kwargs):
        return write_format_data(bounded_data(format_dict), *args, **kwargs)
    shell.displayhook.write_format_data = bounded_format_data

    def short(text, limit=output // 4):
        """An error's text, its message and each traceback line (an error output holds them all)."""
        text = str(text)
        return text if len(text) <= limit else text[:limit] + note(size(text), "one output")

    showtraceback = shell._showtraceback

    def bounded_traceback(etype, evalue, stb):
        lines, total = [], 0
        for line in stb:
            line = short(line, output // 8)
            total += len(line)
            if total > output // 2:
                lines.append(note(total, "one output"))
                break
            lines.append(line)
        return showtraceback(etype, short(evalue), lines)
    shell._showtraceback = bounded_traceback

    if kernel is not None:
        do_execute = kernel.do_execute

        async def bounded_execute(*args, **kwargs):
            try:
                reply = do_execute(*args, **kwargs)
                if hasattr(reply, "__await__"):
                    reply = await reply
            except Exception as err:  # ipykernel sends no reply at all (a cell its compile()
                # gives up on with RecursionError): an error reply, so the next cell runs
                shell.showtraceback((type(err), err, err.__traceback__))
                reply = {"status": "error", "ename": type(err).__name__, "evalue": str(err), "traceback": [],
                         "execution_count": shell.execution_count, "user_expressions": {}, "payload": []}
            if isinstance(reply, dict):
                if "evalue" in reply:
                    reply["evalue"] = short(reply["evalue"])
                if isinstance(reply.get("traceback"), list):
                    reply["traceback"] = [short(t) for t in reply["traceback"][:200]]
            return reply
        kernel.do_execute = bounded_execute


__grading_bound_outputs(%(output)d, %(cell)d, %(limits)r)
'''
# Run in a namespace of its own, as the channel's module is (grader.grading.channel): what it
# defines looks up builtins, never the notebook's globals (a student's len or str).
_INSTALL = r'''
def __grading_install(source):
    import builtins
    builtins.exec(builtins.compile(source, "<grading_bounds>", "exec"), {"__name__": "_grading_bounds"})
__grading_install(%r)
del __grading_install
'''


def kernel_code(bounds):
    """The code that makes a graded kernel keep `bounds` (an OutputBounds) itself."""
    return _INSTALL % (KERNEL_SIDE % {"output": bounds.output, "cell": bounds.cell, "limits": _limits(bounds)})
