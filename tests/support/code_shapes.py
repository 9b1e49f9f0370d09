"""What a piece of code computes, as trees with the names taken out.

Each statement's value becomes a tree of operations (`softmax(masked_fill(?, ?, -inf),
dim=-1)`): variables are followed back to what was assigned to them (in the same cell,
function or class, and across the cells of a notebook), local helpers and lambdas are
inlined, methods and functions that do the same are one operation (`x.softmax(-1)`,
`torch.softmax(x, dim=-1)`, `F.softmax(x, -1)`; `.mT`, `.transpose(-2, -1)`,
`.swapaxes(-1, -2)`; `@` and `torch.matmul`; `/ sqrt(d)` and `* d ** -0.5`), and what
is left unknown (an input, a size, a module of the student's) is a wildcard `?`. An
answer's trees, with their wildcards, are patterns: a demonstration holds the answer when
one of its trees contains one of them, however its variables are named, its lines split
or its transposes written.

tests/notebooks/test_no_answers_handed_out.py uses it on the notebooks and notebook_helpers/.
"""
import ast
import math
import textwrap

ANY = ("?",)
DEPTH = 14  # deeper trees (a running sum updated in a loop, inlined again and again) are cut to ?

# `torch.x`, `F.x`, `nn.x`, `math.x`, ... are functions, not methods of a tensor
NAMESPACES = {"torch", "F", "nn", "functional", "math", "np", "linalg", "special", "fft"}
# module constructors: declarations of an interface, not a computation
CONSTRUCTORS = {"Linear", "Embedding", "LayerNorm", "ModuleList", "Sequential", "Dropout", "GELU",
                "ReLU", "Parameter", "MultiheadAttention", "Module", "Identity", "Generator",
                "ParameterList", "ModuleDict", "Transformer"}
# calls that leave their tensor as it is, for what is computed: dtype, device, copies
TRANSPARENT = {"to", "float", "double", "half", "cpu", "cuda", "contiguous", "detach", "clone",
               "requires_grad_", "type_as", "numpy", "item", "tolist", "squeeze_", "cpu"}
ALIASES = {
    "bmm": "matmul", "true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub",
    "masked_fill_": "masked_fill", "nan_to_num_": "nan_to_num", "swapaxes": "transpose",
    "swapdims": "transpose", "view": "reshape", "exp_": "exp", "add_": "add", "mul_": "mul",
    "div_": "div", "sub_": "sub", "tril_": "tril", "triu_": "triu", "copy_": "copy",
    "greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le", "logical_not": "not",
    "bitwise_not": "not", "logical_and": "and", "logical_or": "or", "concat": "cat", "concatenate": "cat",
    "unsqueeze_": "unsqueeze", "fill_": "fill", "zero_": "zero", "einsum": "einsum",
}
# argument names by position, after the tensor, so `softmax(x, -1)` is `softmax(x, dim=-1)`
POSITIONAL = {
    "softmax": ["dim"], "log_softmax": ["dim"], "masked_fill": ["mask", "value"], "triu": ["diagonal"],
    "tril": ["diagonal"], "sum": ["dim", "keepdim"], "mean": ["dim", "keepdim"], "amax": ["dim", "keepdim"],
    "amin": ["dim", "keepdim"], "max": ["dim", "keepdim"], "min": ["dim", "keepdim"],
    "argmax": ["dim", "keepdim"], "logsumexp": ["dim", "keepdim"], "nan_to_num": ["nan"],
    "multinomial": ["num_samples"], "cat": ["dim"], "stack": ["dim"], "cumsum": ["dim"],
    "unsqueeze": ["dim"], "squeeze": ["dim"], "topk": ["k", "dim"], "chunk": ["chunks", "dim"],
    "split": ["split_size", "dim"], "unbind": ["dim"], "flatten": ["start_dim", "end_dim"],
    "dropout": ["p", "training"], "where": ["input", "other"],
}
DEFAULTS = {("masked_fill", "value"): None, ("triu", "diagonal"): 0, ("tril", "diagonal"): 0,
            ("nan_to_num", "nan"): 0, ("cat", "dim"): 0, ("stack", "dim"): 0}
DROPPED_KEYWORDS = {"device", "dtype", "layout", "requires_grad", "pin_memory", "out", "memory_format"}
# numbers kept as themselves; any other number is a size of the demonstration: ?
KEPT_NUMBERS = {0, 1, 2, 0.5, -1, -2, -0.5, math.inf, -math.inf}
# builtins whose result is a size or a loop, not a tensor operation
SIZE_BUILTINS = {"len", "range", "int", "min", "max", "abs", "round", "enumerate", "zip", "sum",
                 "sorted", "reversed", "isinstance", "print", "repr", "str", "list", "tuple", "dict",
                 "set", "iter", "next", "getattr", "hasattr", "setattr", "super", "type", "id"}
OPAQUE = {"?", "c", "call", "register_buffer", "list", "tuple", "slice", "comp", "kw", "unpack", "ellipsis", "fn"}
COMMUTATIVE = {"add", "mul", "and", "or", "eq", "ne", "maximum", "minimum"}
BINOPS = {ast.MatMult: "matmul", ast.Mult: "mul", ast.Div: "div", ast.Add: "add", ast.Sub: "sub",
          ast.Pow: "pow", ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or",
          ast.BitXor: "xor"}
COMPARE = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.Gt: "gt", ast.LtE: "le", ast.GtE: "ge"}


def const(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return ("c", value)
    if isinstance(value, (int, float)):
        if value in KEPT_NUMBERS:
            return ("c", float(value))
        return ANY
    return ANY


def ops(tree):
    """How many operations a tree holds (wildcards, constants and opaque calls are none)."""
    if not isinstance(tree, tuple) or not tree:
        return 0
    own = 0 if tree[0] in OPAQUE else 1
    return own + sum(ops(child) for child in tree[1:] if isinstance(child, tuple))


def subtrees(tree):
    if isinstance(tree, tuple) and tree and tree[0] not in ("c", "?"):
        yield tree
        for child in tree[1:]:
            yield from subtrees(child)


def matches(pattern, tree):
    """Whether tree is pattern with its wildcards filled in."""
    if pattern == ANY:
        return True
    if not isinstance(tree, tuple) or not isinstance(pattern, tuple):
        return pattern == tree
    if len(pattern) != len(tree) or pattern[0] != tree[0]:
        return False
    return all(matches(p, t) for p, t in zip(pattern[1:], tree[1:]))


def contains(pattern, tree):
    return any(matches(pattern, sub) for sub in subtrees(tree))


def show(tree):
    """A tree as readable text: softmax(masked_fill(?, ?, value=-inf), dim=-1)."""
    if tree == ANY:
        return "?"
    if not isinstance(tree, tuple):
        return repr(tree)
    head, *rest = tree
    if head == "c":
        value = rest[0]
        return str(int(value)) if isinstance(value, float) and value.is_integer() else repr(value)
    if head == "kw":
        return f"{rest[0]}={show(rest[1])}"
    return f"{head}({', '.join(show(r) for r in rest)})"


class Shapes:
    """Walks code and collects the tree of every statement's value. `env` maps variable
    names (and `self.x` attributes) to trees; it carries over from one call of add() to
    the next, as a notebook's cells share their variables."""

    def __init__(self):
        self.env = {}
        self.trees = []  # (tree, line, tag) of every statement value, in order
        self.tag = None

    # --- statements ---------------------------------------------------------------------

    def add(self, source, tag=None, lines=None):
        """Add the code's trees (only those of statements starting on `lines`, 1-based,
        when given); returns the trees added. Code that does not parse adds nothing."""
        try:
            tree = ast.parse(textwrap.dedent(source))
        except SyntaxError:
            return []
        start = len(self.trees)
        self.tag, self.lines = tag, lines
        self.block(tree.body, self.env)
        return [t for t, _, _ in self.trees[start:]]

    def emit(self, tree, node):
        if self.lines is None or node.lineno in self.lines:
            self.trees.append((tree, node.lineno, self.tag))

    def block(self, statements, env):
        for node in statements:
            self.statement(node, env)

    def statement(self, node, env):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    env[target.id] = ("fn", [a.arg for a in node.value.args.args], node.value.body, dict(env))
        elif isinstance(node, ast.Assign):
            value = self.expr(node.value, env)
            for target in node.targets:
                self.bind(target, node.value, value, env, node)
            self.emit(value, node)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            value = self.expr(node.value, env)
            self.bind(node.target, node.value, value, env, node)
            self.emit(value, node)
        elif isinstance(node, ast.AugAssign):
            op = BINOPS.get(type(node.op), "op")
            value = self.binop(op, self.expr(node.target, env), self.expr(node.value, env))
            self.bind(node.target, None, value, env, node)
            self.emit(value, node)
        elif isinstance(node, (ast.Expr, ast.Return)) and node.value is not None:
            self.emit(self.expr(node.value, env), node)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.emit(self.expr(node.iter, env), node)
            self.bind(node.target, None, ANY, env, node)
            self.loop_carried(node.body, env)
            self.block(node.body, env)
            self.block(node.orelse, env)
        elif isinstance(node, ast.While):
            self.loop_carried(node.body, env)
            self.block(node.body, env)
        elif isinstance(node, ast.If):
            self.emit(self.expr(node.test, env), node)
            self.block(node.body, env)
            self.block(node.orelse, env)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.emit(self.expr(item.context_expr, env), node)
            self.block(node.body, env)
        elif isinstance(node, ast.Try):
            self.block(node.body, env)
            for handler in node.handlers:
                self.block(handler.body, env)
            self.block(node.orelse, env)
            self.block(node.finalbody, env)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(node, env)
        elif isinstance(node, ast.ClassDef):
            self.klass(node, env)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    env.pop(target.id, None)

    def loop_carried(self, body, env):
        """Names a loop body assigns are, where it reads them before assigning them, what
        the last pass left: unknown."""
        for statement in body:
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    env[node.id] = ANY
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    env[_dotted(node) or node.attr] = ANY

    def function(self, node, env, inner_env=None):
        inner = dict(inner_env if inner_env is not None else env)
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            inner[arg.arg] = ANY
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        self.block(body, inner)
        returns = [s for s in body if isinstance(s, ast.Return) and s.value is not None]
        if len(body) == 1 and returns:  # a one-line helper: inlined where it is called
            env[node.name] = ("fn", [a.arg for a in node.args.args], returns[0].value, dict(env))
        elif len(returns) == 1 and body[-1] is returns[0]:
            env[node.name] = ("fn-tree", self.expr(returns[0].value, inner))
        else:
            env.pop(node.name, None)
        return inner

    def klass(self, node, env):
        shared = dict(env)  # self.x assigned in __init__ is seen by the other methods
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = self.function(item, {}, inner_env=shared)
                shared.update({k: v for k, v in inner.items() if k.startswith("self.")})
        env.pop(node.name, None)

    def bind(self, target, value_node, value, env, node):
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Attribute):
            env[_dotted(target) or target.attr] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value_node.elts if isinstance(value_node, (ast.Tuple, ast.List)) else None
            for i, element in enumerate(target.elts):
                if values is not None and len(values) == len(target.elts):
                    self.bind(element, values[i], self.expr(values[i], env), env, node)
                else:
                    part = ANY if value == ANY else ("unpack", value, ("c", float(i)))
                    self.bind(element, None, part, env, node)
        elif isinstance(target, ast.Subscript):
            base = self.expr(target.value, env)
            self.emit(("setitem", base, self.index(target.slice, env), value), node)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, None, ANY, env, node)

    # --- expressions --------------------------------------------------------------------

    def expr(self, node, env, depth=0):
        if depth > DEPTH:
            return ANY
        e = lambda n: self.expr(n, env, depth + 1)
        if isinstance(node, ast.Name):
            value = env.get(node.id, ANY)
            return value if isinstance(value, tuple) and value[:1] not in (("fn",), ("fn-tree",)) else ANY
        if isinstance(node, ast.Constant):
            return const(node.value)
        if isinstance(node, ast.UnaryOp):
            inner = e(node.operand)
            if isinstance(node.op, ast.USub):
                if inner[:1] == ("c",) and isinstance(inner[1], float):
                    return ("c", -inner[1])
                if isinstance(node.operand, ast.Constant):
                    return const(-node.operand.value)
                return ("neg", inner) if inner != ANY else ANY
            if isinstance(node.op, (ast.Invert, ast.Not)):
                return ("not", inner)
            return inner
        if isinstance(node, ast.BinOp):
            return self.binop(BINOPS.get(type(node.op), "op"), e(node.left), e(node.right))
        if isinstance(node, ast.BoolOp):
            return ("bool", *[e(v) for v in node.values])
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            op = COMPARE.get(type(node.ops[0]), "cmp")
            a, b = e(node.left), e(node.comparators[0])
            if op in ("gt", "ge"):
                op, a, b = {"gt": "lt", "ge": "le"}[op], b, a
            return self.binop(op, a, b)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, env, depth)
        if isinstance(node, ast.Subscript):
            base = e(node.value)
            if base == ANY and _is_shape(node.value):
                return ANY
            return ("getitem", base, self.index(node.slice, env, depth))
        if isinstance(node, ast.Call):
            return self.call(node, env, depth)
        if isinstance(node, (ast.List, ast.Tuple)):
            return ("list", *[e(x) for x in node.elts])
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            inner = dict(env)
            for gen in node.generators:
                self.bind(gen.target, None, ANY, inner, node)
            return ("comp", self.expr(node.elt, inner, depth + 1),
                    *[self.expr(g.iter, env, depth + 1) for g in node.generators])
        if isinstance(node, ast.IfExp):
            return ("ifexp", e(node.body), e(node.orelse))
        if isinstance(node, ast.Lambda):
            return ANY
        if isinstance(node, ast.Starred):
            return e(node.value)
        return ANY

    def opaque(self, args, env, depth):
        """A call of something that is not torch's (a module, a function of the notebook's):
        what flows through it is its first argument; the others (an offset, a flag) are its own."""
        return ("call", self.expr(args[0], env, depth + 1)) if args else ("call",)

    def binop(self, op, a, b):
        # scales: / sqrt(d), / d ** 0.5, * d ** -0.5, * rsqrt(d) are one operation
        if op == "div" and isinstance(b, tuple) and b[:1] == ("sqrt",):
            return ("scale", a, b[1])
        if op == "div" and isinstance(b, tuple) and b[:1] == ("pow",) and b[2] == ("c", 0.5):
            return ("scale", a, b[1])
        for x, y in ((a, b), (b, a)):
            if op == "mul" and isinstance(y, tuple) and y[:1] == ("pow",) and y[2] == ("c", -0.5):
                return ("scale", x, y[1])
            if op == "mul" and isinstance(y, tuple) and y[:1] == ("rsqrt",):
                return ("scale", x, y[1])
        if op in COMMUTATIVE:
            a, b = sorted((a, b), key=repr)
        return (op, a, b)

    def index(self, node, env, depth=0):
        e = lambda n: self.expr(n, env, depth + 1)
        if isinstance(node, ast.Slice):
            part = lambda n: e(n) if n is not None else ("c", None)
            return ("slice", part(node.lower), part(node.upper), part(node.step))
        if isinstance(node, ast.Tuple):
            parts = [self.index(x, env, depth) for x in node.elts]
            while parts and parts[-1] == ("slice", ("c", None), ("c", None), ("c", None)):
                parts.pop()  # x[:, -1, :] is x[:, -1]
            return ("tuple", *parts) if len(parts) != 1 else parts[0]
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            return ("ellipsis",)
        return e(node)

    def attribute(self, node, env, depth):
        dotted = _dotted(node)
        if dotted and dotted.startswith("self.") and dotted in env:
            return env[dotted]
        if node.attr == "mT":
            return ("mT", self.expr(node.value, env, depth + 1))
        if node.attr == "T" and not _is_namespace(node.value):
            return ("T", self.expr(node.value, env, depth + 1))
        if node.attr in ("inf",):
            return ("c", math.inf)
        return ANY  # .shape, .device, self.something, torch.bool, ...

    def call(self, node, env, depth):
        e = lambda n: self.expr(n, env, depth + 1)
        func, args = node.func, list(node.args)
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(func, ast.Name):
            name = func.id
            if name == "float" and args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                return const(float(args[0].value))
            helper = env.get(name)
            if isinstance(helper, tuple) and helper[:1] == ("fn",):
                _, params, body, closure = helper
                inner = dict(closure)
                inner.update({p: e(a) for p, a in zip(params, args)})
                return self.expr(body, inner, depth + 1)
            if isinstance(helper, tuple) and helper[:1] == ("fn-tree",):
                return helper[1]
            if name in SIZE_BUILTINS:
                return ANY
            return self.opaque(args, env, depth)
        if not isinstance(func, ast.Attribute):
            return self.opaque(args, env, depth)
        name = ALIASES.get(func.attr, func.attr)
        if _is_namespace(func.value):  # torch.softmax(x, ...), F.softmax(x, ...), nn.Linear(...)
            if name in CONSTRUCTORS:
                return self.opaque(args, env, depth)
            if name == "sqrt" and args:
                return ("sqrt", e(args[0]))
            tensor, rest = (args[0], args[1:]) if args else (None, [])
        else:
            if func.attr == "register_buffer" and args and isinstance(args[0], ast.Constant):
                value = e(args[1]) if len(args) > 1 else ANY
                env[f"self.{args[0].value}"] = value
                return ("register_buffer", value)
            if name not in TENSOR_METHODS:
                # self.query(x), head.key(x), model.attn.reset_cache(): a module or a method of ours
                return self.opaque(args, env, depth)
            if name in TRANSPARENT:
                return e(func.value)
            tensor, rest = func.value, args
        base = e(tensor) if tensor is not None else ANY
        if name in TRANSPARENT:
            return base
        if name in ("transpose", "movedim") and len(rest) == 2 and _dims(rest) in ({-2, -1},):
            return ("mT", base)
        if name == "where" and len(rest) == 2:  # torch.where(cond, a, b)
            return ("where", base, e(rest[0]), e(rest[1]))
        names = POSITIONAL.get(name, [])
        kw = {}
        for i, arg in enumerate(rest):
            if i < len(names):
                kw[names[i]] = e(arg)
        rest = rest[len(names):]
        for key, value in keywords.items():
            if key in DROPPED_KEYWORDS:
                continue
            kw[key] = e(value)
        for (fn, key), default in DEFAULTS.items():
            if fn == name and key in kw and kw[key] == const(default):
                del kw[key]
        if name in ("reshape", "permute", "expand", "repeat", "new_zeros", "new_ones") :
            rest = [ast.Tuple(elts=rest, ctx=ast.Load())] if len(rest) != 1 else rest
        parts = [base, *[e(a) for a in rest], *[("kw", k, v) for k, v in sorted(kw.items())]]
        if name in ("matmul", "mul", "div", "add", "sub", "maximum", "minimum") and len(parts) == 2:
            return self.binop(name, parts[0], parts[1])
        if name in ("exp", "sqrt", "rsqrt") and len(parts) == 1:
            return (name, base)
        return (name, *parts)


TENSOR_METHODS = {
    "softmax", "log_softmax", "masked_fill", "masked_fill_", "nan_to_num", "nan_to_num_", "transpose",
    "swapaxes", "swapdims", "movedim", "permute", "view", "reshape", "flatten", "unflatten", "sum", "mean",
    "amax", "amin", "max", "min", "argmax", "exp", "exp_", "log", "sqrt", "rsqrt", "pow", "matmul", "bmm",
    "mul", "div", "add", "sub", "triu", "tril", "triu_", "tril_", "unsqueeze", "squeeze", "expand",
    "expand_as", "repeat", "repeat_interleave", "cumsum", "chunk", "split", "unbind", "where", "maximum",
    "minimum", "logsumexp", "clamp", "abs", "masked_select", "topk", "sort", "gather", "index_select",
    "new_zeros", "new_ones", "new_full", "zero_", "fill_", "copy_", "to", "float", "double", "half",
    "cpu", "cuda", "contiguous", "detach", "clone", "type_as", "multinomial", "argsort", "eq", "ne",
    "lt", "gt", "le", "ge", "logical_not", "all", "any", "isinf", "isnan", "isfinite", "norm", "var",
    "std", "sign", "relu", "tanh", "sigmoid", "stack", "cat", "dropout", "add_", "mul_", "div_",
    "sub_", "exp", "item", "tolist", "unsqueeze_", "numpy", "squeeze_", "requires_grad_",
    "zeros_like", "ones_like", "full_like", "empty_like", "ones", "zeros", "full", "empty", "arange",
    "randn", "rand", "randint", "tensor", "eye", "einsum", "outer", "round", "scaled_dot_product_attention",
    "layer_norm", "embedding", "linear", "gelu", "cross_entropy", "one_hot", "true_divide", "divide",
}


def _dims(args):
    out = set()
    for a in args:
        if isinstance(a, ast.Constant) and isinstance(a.value, int):
            out.add(a.value)
        elif isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub) and isinstance(a.operand, ast.Constant):
            out.add(-a.operand.value)
        else:
            return None
    return out


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _is_namespace(node):
    dotted = _dotted(node)
    return bool(dotted) and dotted.split(".")[0] in NAMESPACES


def _is_shape(node):
    return isinstance(node, ast.Attribute) and node.attr in ("shape",) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size")


def trees_of(source, lines=None):
    """The trees of one piece of code on its own."""
    shapes = Shapes()
    return shapes.add(source, lines=lines)
