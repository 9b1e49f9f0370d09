"""grader/'s imports go one way: no cycle, even through imports inside functions, and the
student side (grader/checks/, what students' kernels run and the bundle ships) imports
neither the answers nor the instructor's tools nor grading (it receives the answers
through grader/checks/registry.py)."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "grader"


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    return {_module_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}


def _resolve(name, modules):
    """The module an import of name loads: itself, or the package the name is defined in."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in modules else None


def import_graph():
    """{module: {grader modules it imports anywhere in its code}}."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                    + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names]  # a module, or a name in base
            else:
                continue
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved and resolved != name:
                    found.add(resolved)
        graph[name] = found
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _under(module, package):
    return module == package or module.startswith(package + ".")


def test_the_import_graph_has_no_cycle():
    cycle = _cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_function_level_imports_are_in_the_graph():
    graph = import_graph()
    assert "grader.checks.core" in graph["grader"]  # grader/__init__.py imports it inside _make_check


def test_the_student_side_imports_only_itself_and_the_shared_modules():
    graph = import_graph()
    shared = {m for m in graph if m.count(".") == 1 and (PACKAGE / f"{m.split('.')[1]}.py").exists()}
    for module, imports in graph.items():
        if _under(module, "grader.checks"):
            wrong = {m for m in imports if not _under(m, "grader.checks") and m not in shared}
            assert not wrong, f"{module} imports {sorted(wrong)}"


def test_the_answers_import_no_tools_and_no_grading():
    graph = import_graph()
    for module, imports in graph.items():
        if _under(module, "grader.answers"):
            wrong = {m for m in imports if any(_under(m, p) for p in
                                               ("grader.instructor", "grading", "grader.grading", "grader.isolation"))}
            assert not wrong, f"{module} imports {sorted(wrong)}"


def test_importing_the_course_layout_changes_nothing():
    """grader.grading.layout sets PATH for nbgrader's helper programs only when nbgrader is
    set up (load_config, nbgrader_api), never on import."""
    import os
    import subprocess
    import sys

    code = ("import os; before = os.environ['PATH']; import grader.grading.layout as layout; "
            "same = os.environ['PATH'] == before; layout.put_installed_programs_on_path(); "
            "print(same, os.environ['PATH'] != before)")
    env = dict(os.environ, PATH="/usr/bin:/bin")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=PACKAGE.parent)
    assert out.stdout.split() == ["True", "True"], out.stderr


CHECK_JOBS = ("devices", "compare", "feedback", "exercise", "inputs", "calling", "output", "naming",
              "case", "stages", "smallest", "explain", "recall", "core")  # grader/checks/__init__.py's order


def test_the_check_s_modules_import_only_those_listed_before_them():
    graph = import_graph()
    for i, job in enumerate(CHECK_JOBS):
        module = f"grader.checks.{job}"
        later = {f"grader.checks.{j}" for j in CHECK_JOBS[i + 1:]}
        assert module in graph and not graph[module] & later, f"{module} imports {sorted(graph[module] & later)}"


def test_grading_imports_nothing_of_the_instructors_tools():
    """Grading is below the instructor's tools: the late policy and the extensions that a
    grade depends on live in grader/grading/ (late.py, extensions.py), and the tools
    (exports, feedback, the formgrader, LMS downloads) build on grading, never the reverse."""
    graph = import_graph()
    for module, imports in graph.items():
        if _under(module, "grader.grading"):
            wrong = {m for m in imports if _under(m, "grader.instructor")}
            assert not wrong, f"{module} imports {sorted(wrong)}"

