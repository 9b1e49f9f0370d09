"""ast.parse from several threads of one process (a Dask worker's task thread scanning a
submission while its event loop unpickles the next task, importing modules that read their
own source): CPython 3.11's AST builder keeps its depth counter per interpreter, so a
garbage collection that runs Python code in the middle of one thread's parse lets the other
thread reset that counter, and the first fails with "AST constructor recursion depth
mismatch" (python/cpython#106905; a student once got "needs attention" for it)."""
import ast
import gc
import sys
import threading
from pathlib import Path

import pytest

from grader.checks import parsing

ROOT = Path(__file__).resolve().parents[2]


class _Finalised:
    """Cyclic garbage whose finalizer runs Python code, so that a collection inside a parse
    can hand the interpreter to the other thread."""
    def __del__(self):
        pass


def _race(parse, rounds):
    errors = []
    sources = [(ROOT / "grader" / "grading" / "scan.py").read_text(),
               "\n".join(f"def f{i}(x):\n    return [[[[x]]]]" for i in range(300))]

    def work(source):
        for _ in range(rounds):
            try:
                parse(source)
            except SystemError as err:
                errors.append(str(err))
            for _ in range(20):
                junk = _Finalised()
                junk.me = junk

    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(50, 2, 2)
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in sources]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)
    return errors


def test_the_course_parses_from_two_threads_without_the_interpreters_spurious_error():
    assert _race(parsing.parse, 30) == []  # plain ast.parse: dozens of the 60 parses fail here


def test_a_clash_with_a_parse_outside_the_lock_is_retried(monkeypatch):
    calls = []

    def clashing(source, filename="<unknown>", mode="exec"):
        calls.append(source)
        if len(calls) < 3:
            raise SystemError("AST constructor recursion depth mismatch (before=144, after=69)")
        return ast.Module(body=[], type_ignores=[])

    monkeypatch.setattr(ast, "parse", clashing)
    assert isinstance(parsing.parse("x = 1"), ast.Module) and len(calls) == 3
    monkeypatch.setattr(ast, "parse", lambda *a: (_ for _ in ()).throw(SystemError("something else")))
    with pytest.raises(SystemError, match="something else"):
        parsing.parse("x = 1")


def test_the_grading_side_parses_only_through_the_lock():
    """Every ast.parse of grader/ goes through grader.checks.parsing: all of them can run in a
    grading process, the sandbox's stub too (grader/isolation/stub.py reads the given functions'
    source each time a sandbox is built, in the thread that grades; its direct parse once made
    a student's submission "need attention" in a Dask worker that was starting up)."""
    direct = [str(p.relative_to(ROOT)) for p in (ROOT / "grader").rglob("*.py")
              if "ast.parse(" in p.read_text() and p.name != "parsing.py"]
    assert direct == []
