"""The submission's source, read by the trusted grading process: what the kernel could hide.

The in-kernel watch (grader.checks.student_call) sees what the student's code does when it runs,
so the student's own code can switch it off or go around it: a forbidden function reached
through ``getattr`` with a built name, through ``importlib``, or run with torch's dispatch
modes disabled. Here the same rules are judged from the code itself, after IPython's
transforms (magics and ``!`` commands become Python), with ``ast``:

- ``uses(exercise_key, student_name)``: a forbidden function (grader.checks.shortcuts) that the
  exercise's object or anything it reaches in the student's cells names: an attribute, a
  global, an import, a string (literal or built from literals) given to ``getattr`` and
  friends. Such a check fails as a shortcut, as the in-kernel watch would fail it.
- ``flags``: ways of hiding, anywhere in the student's cells, for the instructor to look
  at: dynamic attribute access (``getattr`` with a computed name, ``__dict__``, ``vars``),
  ``importlib`` and ``__import__``, ``exec``/``eval``/``compile``, switching off torch's
  dispatch or function modes or hooks, tracing hooks, and edits to the course's modules.

The student's cells are the code cells a student wrote: solution cells, and cells without
nbgrader metadata that are not a given cell as it was given. Locked cells and test cells
come from the source when graded. Importing the course's modules is ordinary (the given
cells do); changing them is flagged.
"""
import ast
from dataclasses import asdict, dataclass, field
from typing import Optional

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
COURSE_MODULES = ("grader", "notebook_helpers")


def shown(text, limit=60):
    """Student text as a flag may quote it: letters, digits and ``_.-`` only (flags end up
    in pages that render Markdown and HTML), at most `limit` characters."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "_.- ") else "?" for c in str(text))
    return safe if len(safe) <= limit else safe[:limit] + "..."


@dataclass(frozen=True)
class Flag:
    """A way of hiding found in the student's code, for the instructor to look at."""
    kind: str  # "dynamic_access", "import_machinery", "code_from_text", "dispatch", "course_module"
    cell: int  # index of the cell in the notebook
    line: int  # line in the cell, after IPython's transforms
    detail: str  # what was found, in a few words

    def text(self):
        where = (f"cell {self.cell + 1}" if self.cell >= 0 else "") + (f", line {self.line}" if self.line else "")
        return f"{where}: {self.detail}" if where else self.detail


@dataclass
class Scan:
    definitions: dict = field(default_factory=dict)  # top-level name -> [(cell, ast node)]
    flags: list = field(default_factory=list)  # [Flag]
    unreadable: list = field(default_factory=list)  # cells that are not Python: [cell index]
    own: set = field(default_factory=set)  # functions and classes the student defines
    attribute_definitions: dict = field(default_factory=dict)  # attr set at top level -> [(cell, node)]

    def uses(self, forbidden_names, student_name):
        """The first forbidden function (as listed) that student_name's code, or anything
        it reaches through the student's top-level names, uses; or None. A name matches
        its in-place form (``cumsum_``) and torch's private variants of it
        (``_scaled_dot_product_attention_math``) too."""
        lasts = {}
        for full in forbidden_names:  # torch.softmax and F.softmax: the first listed names it
            lasts.setdefault(full.split(".")[-1], full)
        if not lasts:
            return None
        fallback = None
        for node in self._reach(student_name):
            for name in _names_used(node, self.own):
                if name in forbidden_names:  # as written: F.softmax
                    return name
                fallback = fallback or next((full for last, full in lasts.items()
                                             if names_match(name, last)), None)
        return fallback

    def _reach(self, start):
        """The definitions start's code reaches: the top-level definitions of the names it
        reads (not its own locals), and of attributes that top-level code sets
        (``torch.Tensor.attend = ...``) and it uses; and theirs, and so on."""
        todo, seen, nodes = [start], set(), []
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for _, node in [*self.definitions.get(name, ()), *self.attribute_definitions.get(name, ())]:
                nodes.append(node)
                todo.extend(free_names(node))
                todo.extend(n.attr for n in ast.walk(node)
                            if isinstance(n, ast.Attribute) and n.attr in self.attribute_definitions)
        return nodes

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


def parse_cell(source, depth=0):
    """The cell as a Python module, with the Python inside code-running magics (``%%time``,
    ``%timeit ...``) parsed in place of the magic's call; raises SyntaxError."""
    tree = ast.parse(python_source(source))
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
    tree.body = body
    return tree


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


def scan(nb, course=None):
    """Read the student's cells of a notebook (nbformat NotebookNode); course: the
    assignment's source notebook, whose given cells are not the student's."""
    result = Scan()
    modules = imported_names(nb)
    for index, source in student_cells(nb, course):
        try:
            tree = parse_cell(source)
        except (SyntaxError, ValueError):
            result.unreadable.append(index)
            continue
        for node in tree.body:
            for name in _defined(node):
                result.definitions.setdefault(name, []).append((index, node))
            for attr in _attributes_set(node):
                result.attribute_definitions.setdefault(attr, []).append((index, node))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                result.own.add(node.name)
        result.flags.extend(_hiding(tree, index, modules))
    return result


def imported_names(nb):
    """Names bound to modules anywhere in the notebook: by an import (``torch``, ``F``, ...)
    or by import machinery (``m = importlib.import_module(...)``)."""
    names = {"torch", "F", "nn", "np", "math", "builtins", "sys", "os", "operator"}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = parse_cell(cell_text(cell.source))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                names.update(a.asname or a.name for a in node.names if a.name[:1].islower())
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    _callee(node.value) in ("import_module", "__import__"):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _defined(node):
    """Top-level names a statement binds: definitions, imports, assignment targets, names
    bound by ``:=`` or a ``match`` pattern outside functions, and names a function declares
    ``global`` (its code is where they get their value)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        declared = [name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names]
        return [node.name, *declared]
    if isinstance(node, ast.ClassDef):
        return [node.name]
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
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    names += [n.target.id for n in _outside_functions(node) if isinstance(n, ast.NamedExpr)]
    names += [n.name for n in _outside_functions(node)
              if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name]
    names += [n.rest for n in _outside_functions(node) if isinstance(n, ast.MatchMapping) and n.rest]
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

    def visit(n, bound):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for outer in [*getattr(n, "decorator_list", []), *n.args.defaults,
                          *[d for d in n.args.kw_defaults if d is not None]]:
                visit(outer, bound)
            inner = bound | _locals(n)
            for child in (n.body if isinstance(n.body, list) else [n.body]):
                visit(child, inner)
            return
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound:
            out.append(n.id)
        for child in ast.iter_child_nodes(n):
            visit(child, bound)

    visit(node, frozenset())
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
    and classes, whose code is followed instead), imported names, and strings (literal or
    built from literals) that spell a name."""
    yield from (name for name in free_names(node) if name not in own)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            yield sub.attr
            if isinstance(sub.value, ast.Name):
                yield f"{sub.value.id}.{sub.attr}"
        elif isinstance(sub, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call)) and \
                not (isinstance(sub, ast.Constant) and not isinstance(sub.value, str)):
            text = constant_text(sub)
            if text and len(text) < 200:
                yield text
                yield text.split(".")[-1]
        if isinstance(sub, ast.Call) and _callee(sub) == "getattr" and len(sub.args) > 1 \
                and isinstance(sub.args[0], ast.Name) and constant_text(sub.args[1]):
            yield f"{sub.args[0].id}.{constant_text(sub.args[1])}"
        if isinstance(sub, ast.alias):
            yield sub.name.split(".")[-1]
            if sub.asname:
                yield sub.asname
        elif isinstance(sub, ast.ImportFrom) and sub.module:
            yield sub.module.split(".")[-1]


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
    ``.lower()``/``.upper()``/``.replace(...)``/``.strip()``), else None."""
    try:
        value = _fold(node)
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    return value if isinstance(value, str) else None


def _fold(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _fold(node.left), _fold(node.right)
        if isinstance(node.op, ast.Mult) and max(len(str(left)), len(str(right))) * 64 < 10_000:
            return left * right
        if isinstance(node.op, ast.Add):
            return left + right
    if isinstance(node, ast.JoinedStr):
        return "".join(str(_fold(v.value if isinstance(v, ast.FormattedValue) else v))
                       for v in node.values)
    if isinstance(node, ast.Subscript):
        base = _fold(node.value)
        if isinstance(node.slice, ast.Slice):
            parts = [None if p is None else _fold(p) for p in
                     (node.slice.lower, node.slice.upper, node.slice.step)]
            return base[slice(*parts)]
        return base[_fold(node.slice)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_fold(node.operand)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_fold(e) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner, method = _fold(node.func.value), node.func.attr
        args = [_fold(a) for a in node.args]
        if isinstance(owner, str) and method in ("join", "lower", "upper", "replace", "strip",
                                                 "format", "removeprefix", "removesuffix"):
            return getattr(owner, method)(*args)
    raise ValueError("not built from literals")


def _hiding(tree, cell, modules=()):
    """Flags for the ways of hiding in one cell. Dynamic attribute access counts on modules
    (names bound by an import) and on what import machinery returns; an object's own
    attributes (``getattr(self, name)``) are ordinary code."""
    flags = []

    def on_module(node):
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        if isinstance(node, ast.Call):
            return _callee(node) in CODE_FROM_TEXT | {"import_module", "globals", "vars"}
        return isinstance(node, ast.Name) and node.id in modules

    def flag(kind, node, detail):
        flags.append(Flag(kind, cell, getattr(node, "lineno", 0), detail))

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
            elif callee in ("vars", "globals") and (callee == "globals" or node.args and on_module(node.args[0])):
                flag("dynamic_access", node, f"{callee}() read as a table of names")
            elif callee == "setattr" and node.args and (_course_module(node.args[0]) or on_module(node.args[0])):
                flag("course_module" if _course_module(node.args[0]) else "dynamic_access", node,
                     "setattr on the course's code" if _course_module(node.args[0]) else "setattr on a module")
            elif callee in CODE_FROM_TEXT:
                flag("code_from_text", node, f"{callee}(): code built from text")
            elif callee == "import_module":
                flag("import_machinery", node, "importlib.import_module")
            elif callee in ("system", "getoutput") and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Call) and _callee(node.func.value) == "get_ipython":
                flag("code_from_text", node, "a shell command (!...): code the grader cannot read")
            elif callee in ("run_line_magic", "run_cell_magic") and node.args and \
                    constant_text(node.args[0]) in RUNS_HIDDEN:
                flag("code_from_text", node, f"the %{constant_text(node.args[0])} magic runs or writes "
                                             "code the grader cannot read")
        elif isinstance(node, ast.Attribute) and node.attr == "__dict__" and on_module(node.value):
            flag("dynamic_access", node, "a module's __dict__ read")
        elif isinstance(node, ast.Attribute) and node.attr == "modules" and \
                isinstance(node.value, ast.Name) and node.value.id == "sys":
            flag("import_machinery", node, "sys.modules")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for module in imported:
                if module.split(".")[0] in ("importlib", "ctypes"):
                    flag("import_machinery", node, f"imports {module}")
            for alias in node.names:
                if alias.name in HIDING_NAMES:
                    flag("dispatch", node, f"{alias.name}: {HIDING_NAMES[alias.name]}")
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
    return _unique(flags)


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
        if (f.kind, f.line, f.detail) not in seen:
            seen.add((f.kind, f.line, f.detail))
            out.append(f)
    return out
