"""The shape of ``grader/``: layers import downwards only, no module imports another's private names,
no two modules import each other (directly or round a longer circle), and no function branches more
than 30 ways (cyclomatic complexity, counted as radon counts it: see MOST_BRANCHES).

Layers, top to bottom: faces (pytest plugin, commands, renderers) -> grading (box, worker, judge)
-> levels -> engine (recorder, crash models, invariants). A module may import its own layer or a
lower one. Imports inside functions count too: a late import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GRADER = Path(__file__).resolve().parent.parent / "grader"
LAYERS = ["faces", "grading", "levels", "engine"]


def modules() -> dict:
    out = {}
    for path in sorted(GRADER.rglob("*.py")):
        parts = path.relative_to(GRADER.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return out


def type_only(tree: ast.AST) -> set:
    """The import nodes under ``if TYPE_CHECKING:``: names for type hints, never imported at run time."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING" for stmt in node.body for n in ast.walk(stmt)}


def imports(name: str, tree: ast.AST, runtime_only: bool = False) -> list:
    """(imported module, names taken from it, line) for every import of a grader module (``runtime_only``:
    leaving out those made for type hints alone)."""
    found = []
    skip = type_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("grader")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("grader") and not node.level:
            found.append((node.module, [a.name for a in node.names], node.lineno))
    return found


def layer(module: str):
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def resolve(target: str, names: list, known: dict) -> list:
    """``from grader.engine import recorder`` imports the module grader.engine.recorder."""
    subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
    return subs or [target]


def test_layers_import_downwards_only():
    known = modules()
    wrong = []
    for name, tree in known.items():
        for target, names, line in imports(name, tree):
            for module in resolve(target, names, known):
                mine, theirs = layer(name), layer(module)
                if mine is not None and theirs is not None and theirs < mine:
                    wrong.append(f"{name}:{line} imports {module} (a higher layer)")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_another_modules_private_names():
    known = modules()
    wrong = [f"{name}:{line} takes {n} from {target}"
             for name, tree in known.items() for target, names, line in imports(name, tree)
             for n in names if n.startswith("_") and not n.startswith("__") and target != name]
    assert not wrong, "\n".join(wrong)


def test_no_import_circles():
    known = modules()
    # A type hint's import (under TYPE_CHECKING) is no circle: nothing runs it. The layer rule above
    # still counts it.
    graph = {name: {m for target, names, _ in imports(name, tree, runtime_only=True)
                    for m in resolve(target, names, known)
                    if m in known and m != name and not name.startswith(m + ".") and m != "grader"}
             for name, tree in known.items()}
    circles, state = [], {}

    def visit(node: str, path: list) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_checks_see_a_violation():
    """The walk above finds imports at all (a broken walk would pass every test vacuously)."""
    tree = ast.parse("def f():\n    from grader.faces.plugin import _x\n")
    assert imports("grader.engine.recorder", tree) == [("grader.faces.plugin", ["_x"], 2)]
    assert layer("grader.faces.plugin") < layer("grader.engine.recorder")


# -- cyclomatic complexity ------------------------------------------------------------------------
#
# No function in grader/ may branch more than MOST_BRANCHES ways: past that a function does several
# jobs, and its branches want a table (per system call, per operation kind, per check) or functions
# of their own. Counted here with no dependency, by radon's rules (radon 6's ComplexityVisitor, the
# numbers `radon cc` prints; test_the_count_is_radons compares the two where radon is installed):
# 1, plus 1 for each if, conditional expression, for, while, assert and comprehension `for` or `if`,
# plus 1 for a loop's `else`, plus each `except` and a try's `else`, plus each `and`/`or` beyond the
# first operand, plus each case of a match but a final `case _`. A nested function or class is
# counted on its own, not in the function around it (as radon does); a lambda is part of it.

MOST_BRANCHES = 30


def _decisions(node: ast.AST) -> int:
    """The decision points in ``node`` and under it, nested functions and classes left out."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return 0
    if isinstance(node, ast.Assert):
        return 1  # radon counts the assert and does not look inside it
    return _POINTS.get(type(node), lambda _: 0)(node) + sum(_decisions(c) for c in ast.iter_child_nodes(node))


_POINTS = {
    ast.If: lambda n: 1, ast.IfExp: lambda n: 1,
    ast.For: lambda n: 1 + bool(n.orelse), ast.AsyncFor: lambda n: 1 + bool(n.orelse),
    ast.While: lambda n: 1 + bool(n.orelse),
    ast.Try: lambda n: len(n.handlers) + bool(n.orelse),
    ast.BoolOp: lambda n: len(n.values) - 1,
    ast.comprehension: lambda n: 1 + len(n.ifs),
    ast.Match: lambda n: max(0, len(n.cases) - any(getattr(c.pattern, "pattern", False) is None for c in n.cases)),
}


def complexity(function: ast.AST) -> int:
    """A function's cyclomatic complexity, as radon counts it."""
    return 1 + sum(_decisions(child) for child in function.body)


def functions(tree: ast.AST, prefix: str = "") -> list:
    """``(qualified name, line, complexity)`` of every function and method in ``tree``, nested ones too."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((prefix + node.name, node.lineno, complexity(node)))
            found += functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            found += functions(node, prefix + node.name + ".")
        else:
            found += functions(node, prefix)
    return found


def test_no_function_in_grader_is_over_the_complexity_limit():
    over = [f"{name}.{qualname} (line {line}): {n}" for name, tree in modules().items()
            for qualname, line, n in functions(tree) if n > MOST_BRANCHES]
    assert not over, (f"over cyclomatic complexity {MOST_BRANCHES} (turn the branches into a table, or into "
                      "functions with one job each):\n" + "\n".join(over))


def test_the_complexity_check_sees_a_branchy_function():
    """A function of 31 is caught, one of 30 is not, and each kind of branch counts as radon counts it."""
    def source(branches: int) -> str:
        return "class C:\n    def f(x):\n" + "".join(f"        if x == {i}:\n            x += 1\n" for i in range(branches - 1))
    assert [n for _, _, n in functions(ast.parse(source(31)))] == [31]
    assert [n for _, _, n in functions(ast.parse(source(30)))] == [30]
    tree = ast.parse(
        "def g(a, b):\n"
        "    def inner(): return 1 if a else 2\n"             # counted on its own: 2
        "    for i in a:\n        pass\n    else:\n        pass\n"  # 2
        "    while a and b or a:\n        pass\n"            # 1 + 2
        "    try:\n        pass\n    except OSError:\n        pass\n    except ValueError:\n        pass\n"
        "    else:\n        pass\n    finally:\n        pass\n"  # 3
        "    assert a or b\n"                                  # 1
        "    x = [i for i in a if i if b for j in b]\n"        # 3 + 1
        "    y = lambda: a if b else a\n"                      # 1
        "    match a:\n        case 1: pass\n        case 2: pass\n        case _: pass\n"  # 2
        "    with open(a): pass\n")                             # 0
    assert functions(tree) == [("g", 1, 17), ("g.inner", 2, 2)]


def test_the_count_is_radons():
    """Where radon is installed (it is not a dependency), its numbers for grader/ are these (radon lists
    no method of a class made inside a function: those are counted here only)."""
    radon = pytest.importorskip("radon.complexity")
    ours, theirs = {}, {}
    for name, tree in modules().items():
        for _, line, n in functions(tree):
            ours[(name, line)] = n
        path = GRADER.parent / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = GRADER.parent / name.replace(".", "/") / "__init__.py"
        blocks = radon.cc_visit(path.read_text(encoding="utf-8"))
        stack = [b for b in blocks if not hasattr(b, "methods")]
        while stack:
            block = stack.pop()
            theirs[(name, block.lineno)] = block.complexity
            stack += block.closures
    assert {k: (v, theirs[k]) for k, v in ours.items() if k in theirs and theirs[k] != v} == {}
    assert set(theirs) <= set(ours)
