"""The shape of ``grader/``: layers import downwards only, no module imports another's private names,
and no two modules import each other (directly or round a longer circle).

Layers, top to bottom: faces (pytest plugin, commands, renderers) -> grading (box, worker, judge)
-> levels -> engine (recorder, crash models, invariants). A module may import its own layer or a
lower one. Imports inside functions count too: a late import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

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
