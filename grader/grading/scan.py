"""The submission's source, read by the trusted grading process: what the kernel could hide.

The in-kernel watch (grader.checks.student_call) sees what the student's code does when it runs,
so the student's own code can switch it off or go around it: a forbidden function reached
through ``getattr`` with a built name, through ``importlib``, or run with torch's dispatch
modes disabled. Here the same rules are judged from the code itself, after IPython's
transforms (magics and ``!`` commands become Python), with ``ast``:

- ``uses(exercise_key, student_name)``: a forbidden function (grader.checks.shortcuts) that the
  exercise's object or anything it reaches in the student's cells names: an attribute, a
  global, an import, a string (literal or built from literals) given to ``getattr`` and
  friends, a global that a pickle written into the code loads. Such a check fails as a
  shortcut, as the in-kernel watch would fail it.
- ``flags``, for the instructor to look at (a flag changes no grade):
  - anywhere in the student's cells, ways of hiding: dynamic attribute access on modules
    (``getattr`` with a computed name, ``__dict__``, ``vars``), ``getattr``, ``exec`` and
    friends used as values (``g = getattr``), ``importlib``, ``__import__`` and
    ``sys.modules``, ``exec``/``eval``/``compile``, a function's code and its parts
    (``__code__``, ``__defaults__``, ...), ``__class__`` assignment, metaclasses,
    serialisation that builds objects (``pickle``, ``marshal``, ``copyreg``, ``dill``),
    ``ctypes``, ``torch.ops`` and ``torch._C``, switching off torch's dispatch or function
    modes or hooks, tracing hooks, and edits to the course's modules;
  - in the code an exercise's answer reaches (its definition and every top-level
    definition it uses, and theirs), anything outside the plain subset an answer needs:
    modules other than torch's public API and a few of Python's own (math, functools, ...),
    torch's private or operator-level internals, reflection and introspection in any form
    (``getattr`` with a name computed at run time on anything but ``self``, ``vars``,
    ``globals``, ``inspect``, ``__dict__`` and Python's other internals), and decorators
    other than the usual ones (``staticmethod``, ``torch.no_grad``, ...), which may replace
    the function they decorate.
  Each flag names the cell and line and quotes the student's line.

Reading is bounded: a cell longer than MAX_CELL_CHARS, more than MAX_SOURCE_CHARS of the
student's cells in all, a syntax tree nested more than MAX_TREE_DEPTH deep (which Python's
own parser may answer with RecursionError or MemoryError), or more than SCAN_SECONDS of CPU
for the whole notebook: what is not read is flagged, and its checks are judged by the
kernel-side rules alone, never an error of the run.

The student's cells are the code cells a student wrote: solution cells, and cells without
nbgrader metadata that are not a given cell as it was given. Locked cells and test cells
come from the source when graded. Importing the course's modules is ordinary (the given
cells do); changing them is flagged.
"""
import ast
import pickletools
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

from grader.checks.parsing import parse

MAX_CELL_CHARS = 64 * 1024  # a cell longer than this is not read (flagged)
MAX_SOURCE_CHARS = 1024 * 1024  # the student's cells read in all
MAX_TREE_DEPTH = 100  # nesting of one cell's syntax tree
SCAN_SECONDS = 10.0  # CPU seconds the scan may spend on one notebook
MAX_TEXT = 10_000  # the longest string (or list) folded from literals
MAX_PICKLE_BYTES = 64 * 1024  # a pickle written into the code, read for the globals it loads
MAX_PICKLE_OPS = 10_000
MAX_FLAGS = 40  # flags listed for one notebook (the rest are counted)

# Names that reach into torch's dispatch and function-override machinery, or Python's
# tracing: code that uses them can switch off what watches it.
HIDING_NAMES = {
    "_disable_current_modes": "switches off torch's dispatch modes",
    "_DisableTorchDispatch": "switches off torch's dispatch modes",
    "DisableTorchFunction": "switches off torch's function modes",
    "DisableTorchFunctionSubclass": "switches off torch's function modes",
    "_pop_mode": "removes one of torch's dispatch modes",
    "_pop_mode_temporarily": "removes one of torch's dispatch modes",
    "_pop_torch_function_stack": "removes one of torch's function modes",
    "_pop_torch_dispatch_stack": "removes one of torch's dispatch modes",
    "_set_dispatch_mode": "changes torch's dispatch modes",
    "_unset_dispatch_mode": "changes torch's dispatch modes",
    "_python_dispatch": "reaches into torch's dispatch modes",
    "TorchDispatchMode": "defines a torch dispatch mode",
    "TorchFunctionMode": "defines a torch function mode",
    "__torch_dispatch__": "defines a torch dispatch hook",
    "__torch_function__": "defines a torch function hook",
    "_disabled_torch_function_impl": "switches off torch's function hooks",
    "_disabled_torch_dispatch_impl": "switches off torch's dispatch hooks",
    "no_dispatch": "switches off torch's dispatch modes",
    "settrace": "changes Python's tracing hook",
    "setprofile": "changes Python's profiling hook",
    "_getframe": "reads the interpreter's frames",
    "get_referrers": "finds objects through the garbage collector",
    "get_referents": "finds objects through the garbage collector",
    "get_objects": "finds objects through the garbage collector",
}
DYNAMIC_ACCESS = {"getattr", "attrgetter", "methodcaller", "__getattribute__", "vars"}
CODE_FROM_TEXT = {"exec", "eval", "compile", "__import__"}
# Builtins that, held as a value (``g = getattr``, ``[getattr][0]``, ``reduce(getattr, ...)``),
# reach objects by names or run code the grader cannot follow.
REFLECTION_BUILTINS = {"getattr", "setattr", "delattr", "vars", "globals", "locals", "__import__",
                       "eval", "exec", "compile", "breakpoint"}
# A function's code and its parts: changing them swaps what a function does for what
# another does, out of sight of its definition.
CODE_PARTS = {"__code__", "__defaults__", "__kwdefaults__", "__globals__", "__closure__",
              "__builtins__", "__func__"}
# Reflection no answer needs, flagged wherever it is written.
REFLECTIVE_ANYWHERE = {"__getattribute__", "__subclasses__", "__reduce__", "__reduce_ex__",
                       "__loader__", "__spec__", "__import__"}
# Modules whose use is flagged wherever it is written: serialisation that builds objects,
# native code, code from text, import machinery.
_SERIAL = ("serialisation", "serialisation that builds objects")
FLAGGED_MODULES = {
    **{m: _SERIAL for m in ("pickle", "_pickle", "cPickle", "copyreg", "copy_reg", "dill", "cloudpickle",
                            "shelve", "jsonpickle")},
    "marshal": ("serialisation", "serialisation that builds code objects"),
    **{m: ("native_code", "native code") for m in ("ctypes", "_ctypes", "cffi")},
    **{m: ("import_machinery", "import machinery") for m in ("importlib", "imp", "pkgutil", "zipimport")},
    **{m: ("code_from_text", "code the grader cannot read") for m in ("runpy", "code", "codeop")},
    **{m: ("dynamic_access", "Python's builtins, reached by name") for m in ("builtins", "__builtin__")},
    **{m: _SERIAL for m in ("joblib",)},
}
# What an answer may use (modules by their top-level package); anything else it reaches is
# flagged. torch is allowed less its private and operator-level parts (TORCH_INTERNALS).
ALLOWED_MODULES = {"torch", "math", "cmath", "numpy", "functools", "itertools", "typing", "collections",
                   "dataclasses", "einops", "random", "time", "warnings", "string", "statistics",
                   "operator", "abc", "enum", "numbers", "fractions", "decimal", "__future__", "copy",
                   "re", "pprint", "logging", "IPython", "matplotlib", "tqdm"}  # (the last: printing, plotting)
TORCH_INTERNALS = ("torch.ops", "torch.library", "torch.utils.cpp_extension", "torch.fx",
                   "torch.overrides", "torch.jit._", "torch.jit.load", "torch.package", "torch.hub",
                   "torch.export.load")
# Decorators that leave the function what its definition says (by dotted name; a call's
# result, ``@torch.no_grad()``, counts as its function).
PLAIN_DECORATORS = {
    "staticmethod", "classmethod", "property", "abstractmethod", "abc.abstractmethod",
    "functools.wraps", "functools.lru_cache", "functools.cache", "functools.cached_property",
    "functools.total_ordering", "dataclasses.dataclass", "typing.overload",
    "torch.no_grad", "torch.inference_mode", "torch.enable_grad", "torch.set_grad_enabled",
    "torch.jit.script", "torch.jit.ignore", "torch.jit.unused", "torch.jit.export",
    "torch.jit.script_method", "torch.compile", "torch.autocast", "torch.amp.autocast",
    "torch.compiler.disable",
}
PLAIN_DECORATOR_SUFFIXES = (".setter", ".getter", ".deleter")
# Dunder attributes an answer may use: construction, names, containers, operators.
PLAIN_DUNDERS = {"__init__", "__name__", "__qualname__", "__doc__", "__class__", "__module__",
                 "__version__", "__len__", "__call__", "__iter__", "__next__", "__enter__",
                 "__exit__", "__repr__", "__str__", "__format__", "__getitem__", "__setitem__",
                 "__delitem__", "__contains__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
                 "__ge__", "__hash__", "__bool__", "__annotations__", "__post_init__",
                 "__array__", "__index__", "__int__", "__float__", "__neg__", "__pos__", "__abs__",
                 "__invert__"}
_OPERATORS = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow",
              "lshift", "rshift", "and", "xor", "or")
PLAIN_DUNDERS |= {f"__{p}{op}__" for op in _OPERATORS for p in ("", "r", "i")}
# Special methods whose definition changes how names or classes are looked up.
LOOKUP_METHODS = {"__getattr__", "__getattribute__", "__setattr__", "__delattr__", "__get__",
                  "__set__", "__delete__", "__set_name__", "__init_subclass__",
                  "__class_getitem__", "__prepare__", "__instancecheck__", "__subclasscheck__",
                  "__reduce__", "__reduce_ex__", "__setstate__", "__new__"}
COURSE_MODULES = ("grader", "notebook_helpers")
# IPython's machinery that makes the kernel run code other than the cells' text, or binds
# the notebook's names out of sight of their definitions.
IPYTHON_HOOKS = {
    "input_transformers_cleanup": ("code_from_text", "rewrites the text of the cells after it"),
    "input_transformers_post": ("code_from_text", "rewrites the text of the cells after it"),
    "input_transformer_manager": ("code_from_text", "rewrites the text of the cells after it"),
    "ast_transformers": ("code_from_text", "rewrites the code of the cells after it"),
    "prefilter_manager": ("code_from_text", "rewrites the text of the cells after it"),
    "define_macro": ("code_from_text", "runs text as code (a macro)"),
    "register_magics": ("code_from_text", "adds magics, code that runs out of sight"),
    "magics_manager": ("code_from_text", "changes the magics, code that runs out of sight"),
    "set_hook": ("code_from_text", "changes IPython's hooks"),
    "set_custom_exc": ("code_from_text", "changes how IPython handles errors"),
    "user_ns": ("dynamic_access", "writes or reads the notebook's names as a table"),
    "user_global_ns": ("dynamic_access", "writes or reads the notebook's names as a table"),
    "user_ns_hidden": ("dynamic_access", "writes or reads the notebook's names as a table"),
    "user_module": ("dynamic_access", "reaches the notebook's module"),
}
# ... and on get_ipython() (or a name bound to it) only: ordinary words elsewhere
IPYTHON_ROOTED = {"events": ("code_from_text", "registers code that runs around every cell and every check")}
# Magics whose argument names a module they import
IMPORTING_MAGICS = {"load_ext", "reload_ext", "aimport"}
# Functions that run Python given as text (their first argument, or `stmt`/`cmd`), by dotted path
RUNS_TEXT = {"timeit.timeit", "timeit.repeat", "timeit.Timer", "pdb.run", "pdb.runeval", "pdb.runctx",
             "bdb.Bdb.run", "cProfile.run", "cProfile.runctx", "profile.run", "profile.runctx",
             "doctest.run_docstring_examples", "doctest.testmod", "doctest.testfile",
             "doctest.debug_src", "doctest.script_from_examples", "typing.get_type_hints",
             "IPython.core.macro.Macro", "trace.Trace.run", "trace.Trace.runctx"}

# Names a notebook has bound to modules before any import of the student's (the given cells').
DEFAULT_MODULES = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy",
                   "math": "math", "builtins": "builtins", "sys": "sys", "os": "os",
                   "operator": "operator"}


def shown(text, limit=60):
    """Student text as a flag may quote it: letters, digits and ``_.-`` only (flags end up
    in pages that render Markdown and HTML), at most `limit` characters."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "_.- ") else "?" for c in str(text))
    return safe if len(safe) <= limit else safe[:limit] + "..."


def quoted(text, limit=100):
    """A line of the student's as a flag quotes it: printable ASCII less what could start
    markup where the flag is shown (``<>&`` for HTML, backticks and ``|\\`` for Markdown;
    the quote is shown as Markdown code), spaces collapsed, at most `limit` characters."""
    safe = "".join(c if c.isascii() and c.isprintable() and c not in "<>&`|\\" else "?"
                   for c in " ".join(str(text).split()))
    return safe if len(safe) <= limit else safe[:limit] + "..."


@dataclass(frozen=True)
class Flag:
    """A way of hiding found in the student's code, for the instructor to look at."""
    kind: str  # "dynamic_access", "import_machinery", "code_from_text", "dispatch", "course_module",
    # "code_object", "serialisation", "native_code", "torch_internals", "outside_plain", "decorator",
    # "metaclass", "unreadable" (and grader.grading.tamper's kinds)
    cell: int  # index of the cell in the notebook
    line: int  # line in the cell, after IPython's transforms
    detail: str  # what was found, in a few words
    quote: str = ""  # the student's line (grader.grading.scan.quoted)

    def text(self):
        where = (f"cell {self.cell + 1}" if self.cell >= 0 else "") + (f", line {self.line}" if self.line else "")
        text = f"{where}: {self.detail}" if where else self.detail
        return f"{text}: `{self.quote}`" if self.quote else text


class Unreadable(Exception):
    """A cell the grader does not read, with the reason."""


@dataclass
class Scan:
    definitions: dict = field(default_factory=dict)  # top-level name -> [(cell, ast node)]
    flags: list = field(default_factory=list)  # [Flag]
    unreadable: list = field(default_factory=list)  # cells that are not Python: [cell index]
    own: set = field(default_factory=set)  # functions and classes the student defines
    attribute_definitions: dict = field(default_factory=dict)  # attr set at top level -> [(cell, node)]
    deadline: float = float("inf")  # thread CPU time after which nothing more is read
    # name -> [(cell, statement, node, how)] in the order the notebook runs them; how: "sure"
    # (a plain def or class that nothing before it in its cell can stop: every binding before
    # it is gone once it ran), "binds", or "global" (a function's global: bound whenever it runs)
    bindings: dict = field(default_factory=dict)

    def uses(self, forbidden_names, student_name, before=None):
        """The first forbidden function (as listed) that student_name's code, or anything
        it reaches through the student's top-level names, uses; or None. A name matches
        its in-place form (``cumsum_``) and torch's private variants of it
        (``_scaled_dot_product_attention_math``) too. before: the index of the test cell
        whose check asks (only the cells before it have run, and a plain definition of a
        name replaces the ones before it: a student who first tried torch's own function
        under the answer's name and then wrote their own is judged on their own)."""
        lasts = {}
        for full in forbidden_names:  # torch.softmax and F.softmax: the first listed names it
            lasts.setdefault(full.split(".")[-1], full)
        if not lasts:
            return None
        fallback = None
        for node in self._reach(student_name, before):  # (the answer's own name is not a use of anything)
            for name in _names_used(node, self.own | {student_name}):
                if name in forbidden_names:  # as written: F.softmax
                    return name
                fallback = fallback or next((full for last, full in lasts.items()
                                             if names_match(name, last)), None)
        return fallback

    def _reach(self, start, before=None):
        return [node for _, node in self.reached(start, before)]

    def live(self, name, before=None):
        """(cell, node) of the top-level bindings of name that can hold when the cells before
        `before` have run (all cells: None): the last sure one and those after it, and every
        function's global binding of it."""
        entries = [e for e in self.bindings.get(name, ()) if before is None or e[0] < before]
        last = max((i for i, e in enumerate(entries) if e[3] == "sure"), default=0)
        return [(e[0], e[2]) for i, e in enumerate(entries) if i >= last or e[3] == "global"]

    def reached(self, start, before=None):
        """(cell, node) of the definitions start's code reaches: the top-level definitions of
        the names it reads (not its own locals) that can hold when the check runs (live), and
        of attributes that top-level code sets (``torch.Tensor.attend = ...``) and it uses;
        and theirs, and so on."""
        todo, seen, found, nodes = [start], set(), [], set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            defined = self.live(name, before) if name in self.bindings else self.definitions.get(name, ())
            for cell, node in [*defined, *self.attribute_definitions.get(name, ())]:
                if id(node) in nodes:
                    continue
                nodes.add(id(node))
                found.append((cell, node))
                todo.extend(free_names(node))
                todo.extend(n.attr for n in ast.walk(node)
                            if isinstance(n, ast.Attribute) and n.attr in self.attribute_definitions)
        return found

    def to_json(self):
        return [asdict(f) for f in self.flags]


def cell_text(source):
    """A cell's source as one string (nbformat allows a list of lines)."""
    return source if isinstance(source, str) else "".join(source)


def normal_source(source):
    """A cell's source with the whitespace an editor may change taken away, for comparing."""
    return "\n".join(line.rstrip() for line in cell_text(source).strip().splitlines())


def student_cells(nb, course=None):
    """(index, source) of every code cell the student wrote: not locked, not a test cell,
    and (given the course's source notebook) not a given cell handed in as it was given."""
    given = {normal_source(c.source) for c in course.cells if c.cell_type == "code"} if course else set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("locked") or (meta.get("grade") and not meta.get("solution")):
            continue
        if not meta.get("solution") and normal_source(cell.source) in given:
            continue
        yield index, cell_text(cell.source)


def python_source(source):
    """The cell as the kernel runs it: IPython's transforms applied (magics, ``!``)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


# Magics whose text is Python that runs in the kernel (the rest of a timing line, a cell's
# body); and magics that run or write code kept elsewhere.
RUNS_PYTHON = {"time", "timeit", "capture", "prun", "debug", "python", "python3"}
RUNS_HIDDEN = {"run", "load", "writefile", "script", "bash", "sh", "system", "sx", "file"}
# IPython's own ways of running text as code (get_ipython().run_cell(...), ...)
IPYTHON_RUNS = {"run_cell", "run_cell_async", "run_code", "runcode", "ex", "ev", "safe_execfile",
                "safe_execfile_ipy", "safe_run_module", "run_ast_nodes", "transform_cell", "push",
                "magic", "find_magic", "register_magic_function"}


def _parse(text):
    """ast.parse, bounded: Unreadable where the text is too long or nests too deep for the
    grader to read (Python's parser answers the deepest with RecursionError or MemoryError)."""
    if len(text) > MAX_CELL_CHARS:
        raise Unreadable(f"it is {len(text) // 1024} KiB long; the grader reads cells of at most "
                         f"{MAX_CELL_CHARS // 1024} KiB")
    try:
        tree = parse(text)
    except (RecursionError, MemoryError, OverflowError) as err:
        raise Unreadable(f"Python's parser gave up on it ({type(err).__name__}): it nests too deep") from None
    if _too_deep(tree, MAX_TREE_DEPTH):
        raise Unreadable(f"its code nests more than {MAX_TREE_DEPTH} deep")
    lines = text.splitlines()
    for node in ast.walk(tree):
        node._grading_lines = lines  # what a flag on this node quotes
    return tree


def _too_deep(tree, limit):
    todo = [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        if depth > limit:
            return True
        todo.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return False


def parse_cell(source, depth=0):
    """The cell as a Python module, with the Python inside code-running magics (``%%time``,
    ``%timeit ...``) parsed in place of the magic's call; raises SyntaxError (or ValueError)
    where it is not Python, Unreadable where it is too large or too deep to read."""
    if len(source) > MAX_CELL_CHARS:
        raise Unreadable(f"it is {len(source) // 1024} KiB long; the grader reads cells of at most "
                         f"{MAX_CELL_CHARS // 1024} KiB")
    tree = _parse(python_source(source))
    if depth > 4:
        return tree
    body = []
    for node in tree.body:
        body.append(node)
        magic = _magic(node)
        if magic and magic[0] in RUNS_PYTHON:
            for text in magic[1:]:
                try:
                    body.extend(parse_cell(text, depth + 1).body)
                except (SyntaxError, ValueError):
                    pass  # a magic's own options (`-n 10`): not Python
    for call in [n for n in ast.walk(tree) if isinstance(n, ast.Call)]:
        # the Python a magic's argument runs ({...} expanded, %config's value), read in place
        for expr in magic_expressions(call):
            body.append(ast.copy_location(ast.Expr(expr), call))
    tree.body = body
    return tree


def magic_expressions(call):
    """The Python that IPython runs for a magic's argument, parsed: every ``{...}`` of a line
    magic's argument (and of a cell magic's first line), which IPython evaluates before the
    magic sees its text (``%pwd {anything}``), and the value of ``%config Class.trait =
    value``, which it executes; [] for another call. The timing magics are read as code
    already (parse_cell), and their text is not expanded."""
    magic = _magic(ast.Expr(call)) if _callee(call) in ("run_line_magic", "run_cell_magic") else None
    if not magic or magic[0] in RUNS_PYTHON or len(magic) < 2:
        return []
    found = []
    for text in _expanded(magic[1]):
        try:
            found.append(parse(text, mode="eval").body)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # IPython cannot evaluate it either: the text stays as it is
    if magic[0] == "config" and "=" in magic[1]:
        try:  # IPython: exec("cfg." + line)
            found += [n.value for n in parse("cfg." + magic[1].strip()).body if isinstance(n, ast.Assign)]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    for expr in found:
        for node in ast.walk(expr):  # flags quote the magic's line
            node._grading_magic = magic[0]
            node.lineno, node._grading_lines = getattr(call, "lineno", 0), getattr(call, "_grading_lines", None)
    return found


def _expanded(line):
    """The expressions IPython's var_expand evaluates in a magic's argument (``{expr}``, with a
    ``:spec`` read as part of the expression, as IPython's FullEvalFormatter reads it)."""
    import string

    if len(line) > MAX_CELL_CHARS:
        return []
    try:
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(line) if name is not None]
    except ValueError:  # IPython leaves a line it cannot format as it is
        return []
    return [f"{name}:{spec}" if spec else name for name, spec in fields if name.strip()]


def _magic(node):
    """(name, text...) of a statement ``get_ipython().run_line_magic(...)`` or
    ``run_cell_magic(...)`` with literal arguments, else None."""
    call = node.value if isinstance(node, ast.Expr) else node.value if isinstance(node, ast.Assign) else None
    if not isinstance(call, ast.Call) or _callee(call) not in ("run_line_magic", "run_cell_magic"):
        return None
    texts = [constant_text(a) for a in call.args]
    if not texts or None in texts:
        return None
    return tuple(texts)


def answer_names(course):
    """The names the checks call in the student's notebook (the plans of the course's test
    cells), or None without a course."""
    if course is None:
        return None
    from grader.grading import plan

    try:
        return sorted({check.student for checks in plan.read(course).values() for check in checks})
    except Exception:  # a source without plans (not released by make release): every definition
        return None


def scan(nb, course=None, answers=None):
    """Read the student's cells of a notebook (nbformat NotebookNode); course: the
    assignment's source notebook, whose given cells are not the student's and whose plans
    name the answers; answers: the names of the answers (default: from the course's plans,
    else every function and class the student defines)."""
    result = Scan(deadline=time.thread_time() + SCAN_SECONDS)
    trees, read = [], 0
    for index, source in student_cells(nb, course):
        if time.thread_time() > result.deadline:
            result.flags.append(Flag("unreadable", index, 0, f"the grader stopped reading here, after "
                                     f"{SCAN_SECONDS:g} s of CPU; the cells from here on are judged by the "
                                     "kernel-side rules only"))
            break
        if read + len(source) > MAX_SOURCE_CHARS:
            result.flags.append(Flag("unreadable", index, 0, f"the student's cells hold more than "
                                     f"{MAX_SOURCE_CHARS // 2**20} MiB of code; the cells from here on are not "
                                     "read by the grader and are judged by the kernel-side rules only"))
            break
        read += len(source)
        try:
            tree = parse_cell(source)
        except Unreadable as err:
            result.unreadable.append(index)
            result.flags.append(Flag("unreadable", index, 0, f"the grader could not read this cell: {err}; "
                                     "its code is judged by the kernel-side rules only"))
            continue
        except (SyntaxError, ValueError):
            result.unreadable.append(index)  # not Python: it cannot run in the kernel either
            continue
        trees.append((index, tree))
    context = _Context.of(nb, trees, result.deadline)
    for index, tree in trees:
        clear = True  # nothing before this statement in its cell can stop the cell
        for position, node in enumerate(tree.body):
            declared = {n for sub in ast.walk(node) if isinstance(sub, ast.Global) for n in sub.names} \
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
            for name in _defined(node):
                result.definitions.setdefault(name, []).append((index, node))
                how = "global" if name in declared and name != node.name else \
                    "sure" if clear and _sure_definition(node, name, context) else "binds"
                result.bindings.setdefault(name, []).append((index, position, node, how))
            clear = clear and _cannot_stop(node, context)
            for attr in _attributes_set(node):
                result.attribute_definitions.setdefault(attr, []).append((index, node))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                result.own.add(node.name)
        result.flags.extend(_hiding(tree, index, context))
    if answers is None:
        answers = answer_names(course)
    if answers is None:
        answers = sorted(result.own)
    seen, plain = set(), []
    for name in answers:
        for index, node in result.reached(name):
            if id(node) not in seen:
                seen.add(id(node))
                plain.extend(_outside_plain(node, index, context))
    said = set()  # a module the answer uses is named once, where it is first seen
    for f in sorted(plain, key=lambda f: (f.cell, f.line)):
        if f.kind != "outside_plain" or f.detail not in said:
            said.add(f.detail)
            result.flags.append(f)
    flags = sorted(_unique(result.flags), key=lambda f: (f.cell, f.line))
    if len(flags) > MAX_FLAGS:  # a person reads them: the first ones, and how many more
        more = Flag("many", -1, 0, f"and {len(flags) - MAX_FLAGS} more flags of the same kinds "
                                   f"({', '.join(sorted({f.kind for f in flags[MAX_FLAGS:]}))})")
        flags = flags[:MAX_FLAGS] + [more]
    result.flags = flags
    return result


def _sure_definition(node, name, context):
    """Whether a statement certainly binds name when it runs: a plain def (no decorator, its
    defaults constants) or class (no decorator or keywords, its bases names of modules' classes)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        defaults = [*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]
        return node.name == name and not node.decorator_list and all(isinstance(d, ast.Constant) for d in defaults)
    if isinstance(node, ast.ClassDef):
        return node.name == name and not node.decorator_list and not node.keywords and \
            all(context.path(b) is not None for b in node.bases)
    return False


def _cannot_stop(node, context):
    """Whether a top-level statement can never stop its cell (raise): an import of an
    installed module, a sure definition, a docstring, pass."""
    if isinstance(node, ast.Import):
        return all(installed(a.name.split(".")[0]) for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return not node.level and installed((node.module or "").split(".")[0]) and \
            all(a.name != "*" for a in node.names)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return _sure_definition(node, node.name, context)
    magic = _magic(node)
    if magic and magic[0] in ("time", "capture") and _callee(node.value) == "run_cell_magic":
        return True  # runs the cell's body (read in place after it) in the notebook's names
    return isinstance(node, ast.Pass) or isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


class _Context:
    """What the flags of one notebook are judged with: the dotted module path each name is
    bound to by an import or an alias of one (``F`` -> torch.nn.functional), and the names
    the student binds (a student's own ``compile`` is not the builtin)."""

    def __init__(self, aliases, bound, functions=()):
        self.aliases, self.bound = aliases, bound
        self.functions = set(functions)  # names the student's def and class statements bind

    @classmethod
    def of(cls, nb, trees, deadline=float("inf")):
        aliases = dict(DEFAULT_MODULES)
        every = [tree for _, tree in trees]
        read = {index for index, _ in trees}
        for index, cell in enumerate(nb.cells):  # the imports of the given cells too
            if cell.cell_type != "code" or index in read or time.thread_time() > deadline:
                continue
            try:
                every.append(parse_cell(cell_text(cell.source)))
            except (SyntaxError, ValueError, Unreadable):
                continue
        bound = set()
        for tree in every:
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        if a.asname:
                            aliases[a.asname] = a.name
                        else:
                            aliases.setdefault(a.name.split(".")[0], a.name.split(".")[0])
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    for a in node.names:
                        if a.name != "*":
                            aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for _, tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    bound.add(node.id)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.add(node.name)
                elif isinstance(node, ast.arg):
                    bound.add(node.arg)
        functions = {node.name for _, tree in trees for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        context = cls(aliases, bound, functions)
        for _ in range(4):  # names bound to a module's value: m = F; fn = torch.nn.functional
            changed = False
            for _, tree in trees:
                for node in ast.walk(tree):
                    for target, value in _bindings(node):
                        path = context.path(value)
                        if path and path.startswith("<ipython>."):
                            continue  # (get_ipython() itself is a name to follow; what it holds is not a module)
                        if path and target not in context.aliases:
                            context.aliases[target] = path
                            changed = True
            if not changed:
                break
        return context

    def path(self, node):
        """The dotted path an expression names, from a name bound to a module: ``F.softmax``
        -> "torch.nn.functional.softmax"; None where it is not rooted at one. What import
        machinery returns (``importlib.import_module("x")``, ``__import__``) is "<import>"."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if isinstance(node, ast.Call) and _callee(node) in ("import_module", "__import__"):
            root = "<import>"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "get_ipython":
            root = "<ipython>"  # the notebook's shell: a module of names, as far as reaching goes
        elif isinstance(node, ast.Subscript) and self.path(node.value) in ("sys.modules",):
            root = "<import>"
        elif isinstance(node, ast.Name) and node.id in self.aliases:
            root = self.aliases[node.id]
        else:
            return None
        return ".".join([root, *reversed(attrs)])

    def builtin(self, name):
        """Whether a name in the student's code is the builtin of that name."""
        return name not in self.bound and name not in self.aliases


def _bindings(node):
    """(name, value) pairs a statement or expression binds: ``a = value``, ``a := value``,
    a parameter's default, ``for a in [value]``."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            yield target.id, node.value
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)):
            for t, v in zip(target.elts, node.value.elts):
                if isinstance(t, ast.Name):
                    yield t.id, v
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        yield node.target.id, node.value
    elif isinstance(node, ast.NamedExpr):
        yield node.target.id, node.value
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            yield arg.arg, default
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            if default is not None:
                yield arg.arg, default
    elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name) and \
            isinstance(node.iter, (ast.List, ast.Tuple)):
        for value in node.iter.elts:
            yield node.target.id, value


def _defined(node):
    """Top-level names a statement binds: definitions, imports, assignment targets, names
    bound by ``:=`` or a ``match`` pattern outside functions, names a function declares
    ``global`` (its code is where they get their value), and the object a top-level
    ``setattr(obj, ...)`` or ``obj.attr = ...`` changes."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        declared = [name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names]
        return [node.name, *declared]
    if isinstance(node, ast.ClassDef):  # its body runs at once: a global there is bound then
        return [node.name, *[name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names]]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
            _callee(node.value) in ("setattr", "delattr") and node.value.args:
        targets = [node.value.args[0]]
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    names += [n.target.id for n in _outside_functions(node) if isinstance(n, ast.NamedExpr)]
    names += [n.name for n in _outside_functions(node)
              if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name]
    names += [n.rest for n in _outside_functions(node) if isinstance(n, ast.MatchMapping) and n.rest]
    names += [n.name for n in _outside_functions(node) if isinstance(n, ast.ExceptHandler) and n.name]
    if isinstance(node, (ast.If, ast.Try, ast.For, ast.While, ast.With, ast.Match)):
        for child in ast.walk(node):  # definitions inside a top-level block
            if child is not node and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                        ast.ClassDef, ast.Import, ast.ImportFrom, ast.Assign)):
                names.extend(_defined(child))
    return names


def _outside_functions(node):
    """The nodes of a statement, not descending into functions and lambdas."""
    todo = [node]
    while todo:
        item = todo.pop()
        yield item
        todo.extend(c for c in ast.iter_child_nodes(item)
                    if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def _attributes_set(node):
    """Attribute names a top-level statement sets (``torch.Tensor.attend = ...``)."""
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
    return [t.attr for t in targets if isinstance(t, ast.Attribute)]


def free_names(node):
    """The names a piece of code reads from outside: name loads, less the parameters and
    local variables of the functions (and lambdas) they appear in."""
    out = []
    todo = [(node, frozenset())]
    while todo:  # (iterative: a tree is at most MAX_TREE_DEPTH deep, but its lists are long)
        n, bound = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner = bound | _locals(n)
            todo.extend((child, inner) for child in reversed(n.body if isinstance(n.body, list) else [n.body]))
            todo.extend((outer, bound) for outer in reversed([
                *getattr(n, "decorator_list", []), *n.args.defaults,
                *[d for d in n.args.kw_defaults if d is not None]]))
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound:
            out.append(n.id)
        todo.extend((child, bound) for child in reversed(list(ast.iter_child_nodes(n))))
    return out


def _locals(fn):
    """A function's parameters and the names it binds, less those it declares global."""
    args = fn.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    declared = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
            names.add(n.name)
        elif isinstance(n, ast.alias):
            names.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
    return names - declared


def names_match(used, last):
    """Whether a name the code uses is the forbidden function `last`: itself, its in-place
    form (``cumsum_``), or one of torch's private variants (``_scaled_dot_product_attention_math``)."""
    return used == last or used == f"{last}_" or (used.startswith("_") and last in used)


def _names_used(node, own=()):
    """Every name a piece of code uses: attributes, globals (not the student's own functions
    and classes, whose code is followed instead), imported names, strings (literal or
    built from literals) that spell a name, and the globals a pickle written into the code
    loads."""
    yield from (name for name in free_names(node) if name not in own)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            yield sub.attr
            if isinstance(sub.value, ast.Name):
                yield f"{sub.value.id}.{sub.attr}"
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, bytes):
            for name in pickled_globals(sub.value):
                yield name
                yield name.split(".")[-1]
        elif isinstance(sub, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call)) and \
                not (isinstance(sub, ast.Constant) and not isinstance(sub.value, str)):
            text = constant_text(sub)
            if text and len(text) < 200:
                yield text
                yield text.split(".")[-1]
            elif isinstance(sub, ast.Call) and _callee(sub) == "encode":
                data = _constant_bytes(sub)
                for name in pickled_globals(data) if data else ():
                    yield name
                    yield name.split(".")[-1]
        if isinstance(sub, ast.Call) and _callee(sub) == "getattr" and len(sub.args) > 1 \
                and isinstance(sub.args[0], ast.Name) and constant_text(sub.args[1]):
            yield f"{sub.args[0].id}.{constant_text(sub.args[1])}"
        if isinstance(sub, ast.alias):
            yield sub.name.split(".")[-1]
            if sub.asname:
                yield sub.asname
        elif isinstance(sub, ast.ImportFrom) and sub.module:
            yield sub.module.split(".")[-1]


def pickled_globals(data):
    """The globals ("module.name") a pickle loads, read from its opcodes without loading it
    (at most MAX_PICKLE_BYTES and MAX_PICKLE_OPS); [] for bytes that are no pickle."""
    return _pickle_read(data)[0]


def _pickle_read(data):
    """(globals, strings) of a pickle, as pickled_globals reads them."""
    if not isinstance(data, bytes) or len(data) > MAX_PICKLE_BYTES:
        return [], []
    found, strings = [], []
    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(data)):
            if count > MAX_PICKLE_OPS:
                break
            if op.name in ("GLOBAL", "INST") and isinstance(arg, str):
                found.append(arg.replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.append(f"{strings[-2]}.{strings[-1]}")
            if isinstance(arg, str) and ("UNICODE" in op.name or op.name.endswith("STRING")):
                strings.append(str(arg))
    except Exception:  # not a pickle (or a broken one): what was read so far
        pass
    return found, strings


def _callee(call):
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def constant_text(node) -> Optional[str]:
    """The string an expression always evaluates to when it is built only from literals
    (concatenation, repetition, f-strings of literals, ``"".join`` of literals, slices,
    ``.lower()``/``.upper()``/``.replace(...)``/``.strip()``), else None. Nothing longer than
    MAX_TEXT characters is built."""
    try:
        value = _fold(node, [MAX_TREE_DEPTH * 4])
    except (ValueError, TypeError, IndexError, KeyError, RecursionError, MemoryError, OverflowError):
        return None
    return value if isinstance(value, str) else None


def _constant_bytes(node):
    """The bytes of ``"literal".encode(...)`` (bounded like constant_text), else None."""
    try:
        owner = _fold(node.func.value, [MAX_TREE_DEPTH * 4])
        args = [_fold(a, [MAX_TREE_DEPTH]) for a in node.args]
        return owner.encode(*args) if isinstance(owner, str) and all(isinstance(a, str) for a in args) else None
    except (ValueError, TypeError, IndexError, KeyError, LookupError, RecursionError, MemoryError):
        return None


def _small(value):
    if isinstance(value, (str, list)) and len(value) > MAX_TEXT:
        raise ValueError("too long")
    if isinstance(value, int) and abs(value) > 10**9:
        raise ValueError("too large")
    return value


def _fold(node, budget):
    """The value of a literal-built expression; budget: [nodes left to fold]."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("too much to fold")
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool):
        return _small(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _fold(node.left, budget), _fold(node.right, budget)
        if isinstance(node.op, ast.Mult):
            if isinstance(left, str) and isinstance(right, int) or isinstance(left, int) and isinstance(right, str):
                text, times = (left, right) if isinstance(left, str) else (right, left)
                if len(text) * max(times, 0) > MAX_TEXT:
                    raise ValueError("too long")
                return text * times
            if isinstance(left, int) and isinstance(right, int):
                return _small(left * right)
            raise ValueError("not text")
        if type(left) is type(right) and isinstance(left, (str, int, list)):
            if isinstance(left, (str, list)) and len(left) + len(right) > MAX_TEXT:
                raise ValueError("too long")
            return _small(left + right)
        raise ValueError("not text")
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            part = _fold(v.value if isinstance(v, ast.FormattedValue) else v, budget)
            parts.append(part if isinstance(part, str) else str(part))
            if sum(map(len, parts)) > MAX_TEXT:
                raise ValueError("too long")
        return "".join(parts)
    if isinstance(node, ast.Subscript):
        base = _fold(node.value, budget)
        if not isinstance(base, (str, list)):
            raise ValueError("not text")
        if isinstance(node.slice, ast.Slice):
            parts = [None if p is None else _fold(p, budget) for p in
                     (node.slice.lower, node.slice.upper, node.slice.step)]
            return base[slice(*parts)]
        return base[_fold(node.slice, budget)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_fold(node.operand, budget)
    if isinstance(node, (ast.List, ast.Tuple)):
        if len(node.elts) > MAX_TEXT:
            raise ValueError("too long")
        return [_fold(e, budget) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        owner, method = _fold(node.func.value, budget), node.func.attr
        args = [_fold(a, budget) for a in node.args]
        if isinstance(owner, str) and method in ("join", "lower", "upper", "replace", "strip",
                                                 "removeprefix", "removesuffix", "format"):
            if method == "join" and (not isinstance(args[0], list) or
                                     sum(len(str(a)) + len(owner) for a in args[0]) > MAX_TEXT):
                raise ValueError("too long")
            if method == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str) \
                    and (owner.count(args[0]) + 1) * len(args[1]) + len(owner) > MAX_TEXT:
                raise ValueError("too long")
            if method == "format" and len(owner) + sum(len(str(a)) for a in args) * owner.count("{") > MAX_TEXT:
                raise ValueError("too long")
            return _small(getattr(owner, method)(*args))
    raise ValueError("not built from literals")


# --- flags ---------------------------------------------------------------------------------

def _quote(node):
    """The student's line the node is on (or the node itself, unparsed), as a flag quotes it."""
    lines, line = getattr(node, "_grading_lines", None), getattr(node, "lineno", 0)
    if lines and 0 < line <= len(lines):
        return quoted(lines[line - 1])
    try:
        return quoted(ast.unparse(node))
    except Exception:
        return ""


def _flagger(flags, cell):
    def flag(kind, node, detail):
        flags.append(Flag(kind, cell, getattr(node, "lineno", 0), detail, _quote(node)))
    return flag


def _module_of(path):
    return path.split(".")[0] if path else None


def _hiding(tree, cell, context):
    """Flags for the ways of hiding in one cell, wherever they are written. Dynamic
    attribute access counts on modules (names bound by an import) and on what import
    machinery returns; an object's own attributes (``getattr(self, name)``) are ordinary
    code."""
    flags = []
    flag = _flagger(flags, cell)

    def on_module(node):
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            if context.path(node):
                return True
            node = node.value
        if isinstance(node, ast.Call):
            return _callee(node) in CODE_FROM_TEXT | {"import_module", "globals", "vars"} or \
                context.path(node) is not None  # get_ipython(): the notebook's shell
        return context.path(node) is not None

    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _callee(node)
            if callee in DYNAMIC_ACCESS and callee != "vars":
                owner, name_arg = _access(node, callee)
                if name_arg is None or (owner is not None and not on_module(owner)):
                    continue
                if constant_text(name_arg) is None:
                    flag("dynamic_access", node, f"{callee} with a name computed at run time")
                elif name_arg is not None and not isinstance(name_arg, ast.Constant):
                    flag("dynamic_access", node,
                         f"{callee} with a name built from pieces ({shown(constant_text(name_arg))})")
            elif callee in ("vars", "globals") and isinstance(node.func, ast.Name) and \
                    (callee != "vars" or node.args and on_module(node.args[0])) and context.builtin(callee):
                flag("dynamic_access", node, f"{callee}() read as a table of names")
            elif callee == "setattr" and node.args and (_course_module(node.args[0]) or on_module(node.args[0])):
                flag("course_module" if _course_module(node.args[0]) else "dynamic_access", node,
                     "setattr on the course's code" if _course_module(node.args[0]) else "setattr on a module")
            elif callee in CODE_FROM_TEXT and (isinstance(node.func, ast.Name) and context.builtin(callee)
                                               or _module_of(context.path(node.func)) in ("builtins", "<import>")):
                flag("code_from_text", node, f"{callee}(): code built from text")
            elif callee == "import_module":
                flag("import_machinery", node, "importlib.import_module")
            elif callee in ("system", "getoutput") and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Call) and _callee(node.func.value) == "get_ipython":
                flag("code_from_text", node, "a shell command (!...): code the grader cannot read")
            elif callee in IPYTHON_RUNS and isinstance(node.func, ast.Attribute) and \
                    "get_ipython" in {_callee(n) for n in ast.walk(node.func.value) if isinstance(n, ast.Call)}:
                flag("code_from_text", node, f"IPython's {callee}(): code the grader cannot read")
            elif callee in ("run_line_magic", "run_cell_magic") and node.args and \
                    constant_text(node.args[0]) is None:
                flag("code_from_text", node, "a magic chosen at run time: code the grader cannot read")
            elif callee in ("run_line_magic", "run_cell_magic") and node.args and \
                    constant_text(node.args[0]) in RUNS_HIDDEN:
                flag("code_from_text", node, f"the %{constant_text(node.args[0])} magic runs or writes "
                                             "code the grader cannot read")
            elif callee in ("FunctionType", "CodeType", "LambdaType", "MethodType") and \
                    _module_of(context.path(node.func)) == "types":
                flag("code_object", node, f"types.{callee}(): builds a function from a code object")
            elif callee == "load" and context.path(node.func) == "torch.load" and any(
                    k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in node.keywords):
                flag("serialisation", node, "torch.load(weights_only=False): unpickles objects")
            elif callee == "type" and isinstance(node.func, ast.Name) and context.builtin("type") \
                    and len(node.args) == 3:
                flag("metaclass", node, "type() with three arguments: a class built at run time")
            for data in [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, bytes)]:
                names, strings = _pickle_read(data)
                if names:
                    native = [t for t in [*names, *strings] if t.split(".")[0] in ("ctypes", "_ctypes", "cffi")]
                    flag("native_code" if native else "serialisation", node,
                         f"unpickles {shown(', '.join(names[:3]), 80)}" + (f" (with {shown(native[0])})" if native else ""))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in REFLECTION_BUILTINS \
                and id(node) not in called and context.builtin(node.id):
            flag("dynamic_access", node, f"{node.id} used as a value (kept, passed or aliased), so what it "
                                         "reaches cannot be read")
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            flag("dynamic_access", node, "__builtins__: Python's builtins, reached by name")
        elif isinstance(node, ast.Attribute):
            path = context.path(node)
            if node.attr == "__dict__" and on_module(node.value):
                flag("dynamic_access", node, "a module's __dict__ read")
            elif node.attr == "modules" and context.path(node.value) == "sys":
                flag("import_machinery", node, "sys.modules")
            elif node.attr in CODE_PARTS:
                what = "changes" if isinstance(node.ctx, (ast.Store, ast.Del)) else "reads"
                flag("code_object", node, f"{what} a function's {node.attr}")
            elif node.attr in REFLECTIVE_ANYWHERE:
                flag("dynamic_access", node, f"{node.attr}: reflection")
            elif node.attr == "__class__" and isinstance(node.ctx, ast.Store):
                flag("code_object", node, "assigns an object's __class__")
            elif path and _torch_internal(path) == path:
                flag("torch_internals", node, f"{shown(_torch_internal(path), 40)}: torch's operator-level "
                                              "or private internals")
            elif node.attr in REFLECTION_BUILTINS and _module_of(context.path(node.value)) == "builtins" \
                    and id(node) not in called:
                flag("dynamic_access", node, f"builtins.{node.attr} used as a value")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for module in imported:
                top = module.split(".")[0]
                if top in FLAGGED_MODULES:
                    kind, why = FLAGGED_MODULES[top]
                    flag(kind, node, f"imports {shown(module)}: {why}")
                elif _torch_internal(module):
                    flag("torch_internals", node, f"imports {shown(module)}: torch's operator-level or "
                                                  "private internals")
            for alias in node.names:
                if alias.name in HIDING_NAMES:
                    flag("dispatch", node, f"{alias.name}: {HIDING_NAMES[alias.name]}")
                elif isinstance(node, ast.ImportFrom) and node.module == "torch" and alias.name.startswith("_"):
                    flag("torch_internals", node, f"imports torch.{shown(alias.name)}: torch's private internals")
        elif isinstance(node, ast.ClassDef):
            for keyword in node.keywords:
                if keyword.arg == "metaclass":
                    flag("metaclass", node, f"class {shown(node.name)} has a metaclass, whose code runs when "
                                            "the class is called")
            if any(isinstance(b, ast.Name) and b.id == "type" and context.builtin("type") for b in node.bases):
                flag("metaclass", node, f"class {shown(node.name)} is a metaclass (derives from type)")
        if isinstance(node, (ast.Attribute, ast.Name, ast.FunctionDef)):
            name = node.attr if isinstance(node, ast.Attribute) else \
                node.id if isinstance(node, ast.Name) else node.name
            if name in HIDING_NAMES:
                flag("dispatch", node, f"{name}: {HIDING_NAMES[name]}")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and _course_module(target.value):
                    flag("course_module", node, "changes the course's code")
                elif isinstance(target, ast.Attribute) and on_module(target.value):
                    flag("dispatch", node, f"changes torch's own objects (sets .{shown(target.attr)})")
        _more_hiding(node, flag, context, on_module)
    return _unique(flags)


def _plain_expression(expr):
    """Whether an expression only reads names (``n``, ``x.shape[0]``): no call, no binding."""
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Constant, ast.Subscript, ast.Slice,
                              ast.Load, ast.Tuple, ast.UnaryOp, ast.USub)) for n in ast.walk(expr))


_INSTALLED = {}


def installed(module):
    """Whether a top-level module name is Python's own, the course's, or installed in this
    environment (the one the graded kernel runs in): not a file handed in with the notebook
    or written by it, which the kernel would import from its folder."""
    import importlib.machinery
    import sys
    import sysconfig

    if module in _INSTALLED:
        return _INSTALLED[module]
    if not module or module in sys.builtin_module_names or module in sys.stdlib_module_names \
            or module in COURSE_MODULES:
        found = bool(module)
    else:
        paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
        try:
            found = importlib.machinery.PathFinder.find_spec(module, sorted(paths)) is not None
        except (ImportError, ValueError, OSError):
            found = False
    if len(_INSTALLED) > 4096:
        _INSTALLED.clear()
    _INSTALLED[module] = found
    return found


def _locals_call(node, context):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "locals" \
        and context.builtin("locals")


def _ipython_extensions():
    """The extensions IPython ships (%load_ext autoreload finds IPython.extensions.autoreload)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("IPython")
    folder = Path(spec.origin).parent / "extensions" if spec and spec.origin else None
    return {p.stem for p in folder.glob("*.py")} if folder and folder.is_dir() else set()


def _more_hiding(node, flag, context, on_module):
    """The ways of hiding found by trying to get round the scan: code the kernel runs that
    the cells' text does not show (a magic's expanded argument, IPython's transformers and
    macros, a module the submission brought or the notebook wrote, text run by the standard
    library, pickles), the notebook's names bound out of sight (IPython's user_ns, a
    module's names read through inspect), and code posing as a library's (__module__)."""
    if isinstance(node, ast.Call):
        callee = _callee(node)
        path = context.path(node.func) or ""
        magic = _magic(ast.Expr(node)) if callee in ("run_line_magic", "run_cell_magic") else None
        if magic and any(not _plain_expression(e) for e in magic_expressions(node)):
            flag("code_from_text", node, f"the %{shown(magic[0], 20)} magic runs the Python in its argument "
                                         "({...}), out of a reader's sight")
        if magic and magic[0] in IMPORTING_MAGICS and len(magic) > 1:
            for name in magic[1].replace(",", " ").split():
                if not name.startswith("-") and not installed(name.split(".")[0]) and name not in _ipython_extensions():
                    flag("code_from_text", node, f"%{magic[0]} {shown(name)}: not an installed module, "
                                                 "code the grader does not read")
        if magic and magic[0] in ("macro", "alias"):
            flag("code_from_text", node, f"the %{magic[0]} magic: code the grader cannot read")
        last = path.split(".")[-1] if path else callee
        runner = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call) and \
            f"{context.path(node.func.value.func)}.{node.func.attr}" in RUNS_TEXT  # trace.Trace().run(...)
        if path in RUNS_TEXT or runner:
            path = path or f"{context.path(node.func.value.func)}.{node.func.attr}"
            text = node.args[0] if node.args else next((k.value for k in node.keywords
                                                        if k.arg in ("stmt", "cmd", "statement", "src", "obj")), None)
            callable_ = isinstance(text, (ast.Lambda, ast.Attribute)) or \
                isinstance(text, ast.Name) and text.id in context.functions
            if text is not None and not callable_:
                flag("code_from_text", node, f"{shown(path, 40)} runs Python given as text")
        if last == "load" and _module_of(path) == "torch" and "jit" not in path:
            weights = next((k.value for k in node.keywords if k.arg == "weights_only"), None)
            if weights is not None and not (isinstance(weights, ast.Constant) and weights.value is True):
                flag("serialisation", node, "torch.load without weights_only=True: unpickles objects")
        if last == "load" and _module_of(path) == "numpy":
            allow = next((k.value for k in node.keywords if k.arg == "allow_pickle"), None)
            if allow is not None and not (isinstance(allow, ast.Constant) and allow.value is False):
                flag("serialisation", node, "numpy.load(allow_pickle=...): unpickles objects")
        if last in ("read_pickle", "add_safe_globals", "safe_globals") and path:
            flag("serialisation", node, f"{shown(path, 40)}: unpickles objects")
        if last in ("getmembers", "getmembers_static", "getattr_static") and _module_of(path) == "inspect" \
                and node.args and on_module(node.args[0]):
            flag("dynamic_access", node, f"inspect.{last} reads a module's names")
        if callee in ("update", "setdefault", "__setitem__") and isinstance(node.func, ast.Attribute) and \
                _locals_call(node.func.value, context):
            flag("dynamic_access", node, "locals() written as a table of names (at the top level: globals)")
        if callee == "setattr" and len(node.args) >= 2 and constant_text(node.args[1]) in ("__module__", "__qualname__"):
            flag("code_object", node, f"sets {constant_text(node.args[1])}: the code passes for a library's")
    elif isinstance(node, ast.Attribute):
        hook = IPYTHON_HOOKS.get(node.attr) or (IPYTHON_ROOTED.get(node.attr)
                                                if (context.path(node.value) or "").startswith("<ipython>") else None)
        if hook:
            flag(hook[0], node, f"IPython's {node.attr}: {hook[1]}")
        elif node.attr in ("meta_path", "path_hooks", "path_importer_cache") and context.path(node.value) == "sys":
            flag("import_machinery", node, f"sys.{node.attr}")
        elif node.attr in ("__module__", "__qualname__") and isinstance(node.ctx, ast.Store):
            flag("code_object", node, f"sets {node.attr}: the code passes for a library's")
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.level:
            flag("code_from_text", node, "a relative import: code of a file the grader does not read")
        for module in modules if not (isinstance(node, ast.ImportFrom) and node.level) else ():
            if not installed(module.split(".")[0]):
                flag("code_from_text", node, f"imports {shown(module)}, which is not installed here: where it "
                                             "imports, it is a file handed in with the notebook or written by it, "
                                             "code the grader does not read")
            elif module.startswith("IPython.core.macro"):
                flag("code_from_text", node, "IPython's macros: text run as code")
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ("__module__", "__qualname__"):
                flag("code_object", node, f"sets {target.id}: the code passes for a library's")
            elif isinstance(target, ast.Subscript) and _locals_call(target.value, context):
                flag("dynamic_access", node, "locals() written as a table of names (at the top level: globals)")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" in node.value:
        flag("serialisation", node, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD: torch.load unpickles objects")


def _torch_internal(path):
    """The part of a dotted torch path that is operator-level or private (torch.ops,
    torch._C, torch.nn.functional._in_projection), else None."""
    if not path or path.split(".")[0] != "torch":
        return None
    parts = path.split(".")
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i + 1])
        if prefix in TORCH_INTERNALS or any(prefix.startswith(p) for p in TORCH_INTERNALS if p.endswith("_")):
            return prefix
        if parts[i].startswith("_") and not (parts[i].startswith("__") and parts[i].endswith("__")):
            return prefix
    return None


def _outside_plain(node, cell, context):
    """Flags for what one definition that an answer reaches uses beyond the plain subset an
    answer needs (see the module's docstring)."""
    flags = []
    flag = _flagger(flags, cell)
    loops = _literal_loops(node)
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            modules = [sub.module or ""] if isinstance(sub, ast.ImportFrom) else [a.name for a in sub.names]
            for module in modules:
                if module.split(".")[0] not in ALLOWED_MODULES and module.split(".")[0] not in FLAGGED_MODULES:
                    flag("outside_plain", sub, f"the answer uses the {shown(module)} module, which no answer needs")
        elif isinstance(sub, ast.Attribute):
            if sub.attr.startswith("__") and sub.attr.endswith("__") and sub.attr not in PLAIN_DUNDERS \
                    and sub.attr not in CODE_PARTS | REFLECTIVE_ANYWHERE:
                flag("outside_plain", sub, f"the answer reaches Python's internals ({shown(sub.attr)})")
            elif isinstance(sub.value, ast.Name):
                path = context.path(sub)
                top = _module_of(path)
                if top and top not in ALLOWED_MODULES and top not in FLAGGED_MODULES and top not in ("<import>", "<ipython>") \
                        and sub.value.id in context.aliases and "." not in context.aliases[sub.value.id]:
                    flag("outside_plain", sub, f"the answer uses the {shown(top)} module, which no answer needs")
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            path = context.aliases.get(sub.id)
            top = _module_of(path)
            if top and top not in ALLOWED_MODULES and top not in FLAGGED_MODULES and "." in path \
                    and sub.id not in DEFAULT_MODULES and top != "<ipython>":
                flag("outside_plain", sub, f"the answer uses {shown(path)}, from a module no answer needs")
        elif isinstance(sub, ast.Call):
            callee = _callee(sub)
            if isinstance(sub.func, ast.Name) and callee in ("getattr", "setattr", "delattr", "hasattr") \
                    and context.builtin(callee) and len(sub.args) >= 2:
                owner, name_arg = sub.args[0], sub.args[1]
                if constant_text(name_arg) is None and not _on_self(owner) and \
                        not (isinstance(name_arg, ast.Name) and name_arg.id in loops):
                    flag("dynamic_access", sub, f"{callee} with a name computed at run time")
            elif isinstance(sub.func, ast.Name) and callee in ("vars", "globals", "locals", "dir") \
                    and context.builtin(callee):
                flag("dynamic_access", sub, f"{callee}(): reflection, which no answer needs")
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in sub.decorator_list:
                name = _decorator_name(decorator, context)
                if name not in PLAIN_DECORATORS and not (name or "").endswith(PLAIN_DECORATOR_SUFFIXES):
                    flag("decorator", decorator, f"{shown(sub.name)} is decorated by "
                                                 f"{shown(name or 'an expression', 40)}, which may replace it")
            if isinstance(sub, ast.ClassDef):
                for item in sub.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in LOOKUP_METHODS:
                        flag("dynamic_access", item, f"class {shown(sub.name)} defines {item.name}, which "
                                                     "changes how it is built or looked up")
    return _unique(flags)


def _on_self(node):
    """Whether an expression is rooted at the instance or class of a method (self, cls)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _literal_loops(node):
    """Names that loops inside node bind to literal strings only (``for name in ("query", "key")``):
    a getattr with one of them reads a name the grader can read."""
    names = {}
    for sub in ast.walk(node):
        if isinstance(sub, (ast.For, ast.comprehension)) and isinstance(sub.target, ast.Name):
            literal = isinstance(sub.iter, (ast.Tuple, ast.List)) and all(
                constant_text(e) is not None for e in sub.iter.elts)
            names[sub.target.id] = names.get(sub.target.id, True) and literal
    return {name for name, literal in names.items() if literal}


def _decorator_name(node, context):
    """A decorator's dotted name, resolved through the notebook's imports (``@t.no_grad()``
    -> torch.no_grad); None for an expression that is no name."""
    if isinstance(node, ast.Call):
        node = node.func
    path = context.path(node)
    if path:
        return path
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _access(call, callee):
    """(object, name expression) of a getattr-like call; object None where the call names
    no object (attrgetter, methodcaller)."""
    args = call.args
    if callee == "getattr" and len(args) >= 2:
        return args[0], args[1]
    if callee == "__getattribute__" and args:
        owner = call.func.value if isinstance(call.func, ast.Attribute) else None
        return (args[0], args[1]) if len(args) >= 2 else (owner, args[0])
    if callee in ("attrgetter", "methodcaller") and args:
        return None, args[0]
    return None, None


def _course_module(node):
    """Whether an expression names one of the course's modules (grader.x, notebook_helpers)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in COURSE_MODULES


def _unique(flags):
    seen, out = set(), []
    for f in flags:
        if (f.kind, f.cell, f.line, f.detail) not in seen:
            seen.add((f.kind, f.cell, f.line, f.detail))
            out.append(f)
    return out
