"""The level author's API (grader/levels/api.py): the one module a level module imports from the kit.

A level module is one the manifest names (``"module": ...``), or the template a new level starts
from. If one of them reaches past the API into the engine, the API no longer says what a level may
use, and a change in the engine breaks a level no test of the API covers.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from grader.levels import api, manifest

KIT = Path(__file__).resolve().parent.parent
TEMPLATES = KIT / "templates"


def level_module_files() -> list:
    """Every level module: the ones the kit's manifest names, and each template's."""
    names = sorted({level.module for level in manifest.load(KIT).levels})
    files = [KIT / (name.replace(".", "/") + ".py") for name in names]
    return files + sorted(TEMPLATES.glob("*/level_module.py"))


def kit_imports(path: Path) -> list:
    """``(line, what)`` for each import of the kit (``grader``) in ``path``, late ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "grader"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "grader":
            found += [(node.lineno, f"{node.module}.{a.name}" if node.module == "grader.levels" else node.module)
                      for a in node.names]
    return found


@pytest.mark.parametrize("path", level_module_files(), ids=lambda p: str(p.relative_to(KIT)))
def test_a_level_module_imports_nothing_of_the_kit_but_the_api(path):
    outside = [f"{path.name}:{line} imports {what}" for line, what in kit_imports(path) if what != "grader.levels.api"]
    assert not outside, "a level imports from grader.levels.api only:\n" + "\n".join(outside)
    assert kit_imports(path), f"{path.name} does not use the API at all (is the walk above still finding imports?)"


def test_the_walk_finds_an_import_past_the_api(tmp_path):
    """The check above can fail: a level module that imports the engine is caught, late imports too."""
    bad = tmp_path / "bad.py"
    bad.write_text("from grader.levels.api import LevelModule\n\ndef f():\n    from grader.engine import hangs\n"
                   "    from grader.levels import columns\n")
    assert [w for _, w in kit_imports(bad) if w != "grader.levels.api"] == ["grader.engine",
                                                                             "grader.levels.columns"]


def test_every_name_the_api_offers_exists_and_is_listed():
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert not missing, missing
    assert len(set(api.__all__)) == len(api.__all__), "a name is listed twice in __all__"
    unlisted = sorted(name for name, value in vars(api).items() if not name.startswith("_")
                      and not inspect.ismodule(value) and name != "annotations" and name not in api.__all__)
    assert not unlisted, f"public names of grader.levels.api missing from __all__: {unlisted}"


def untyped(name: str, value: object) -> list:
    """What of ``value`` (a name of the API) has no type hint."""
    if inspect.isclass(value):
        methods = [(f"{name}.{attr}", fn) for attr, fn in vars(value).items()
                   if inspect.isfunction(fn) and not attr.startswith("_")]
    elif callable(value):
        methods = [(name, value)]
    else:
        return [] if name in api.__annotations__ else [f"{name} (a constant with no annotation in api.py)"]
    out = []
    for label, fn in methods:
        sig = inspect.signature(fn)
        bare = [p.name for p in sig.parameters.values()
                if p.annotation is inspect.Parameter.empty and p.name not in ("self", "cls")]
        if bare:
            out.append(f"{label}: parameters {bare} have no type hint")
        if sig.return_annotation is inspect.Signature.empty and fn.__name__ != "__init__":
            out.append(f"{label}: no return type")
    return out


def test_every_name_of_the_api_has_type_hints():
    gaps = [gap for name in api.__all__ for gap in untyped(name, getattr(api, name))]
    # The level interface and the column model are the API's own classes: every public method typed.
    assert not [g for g in gaps if g.split(".")[0].split(":")[0] in {"LevelModule", "Column", "ColumnMeaning",
                                                                      "NamedChecks"}], gaps
    functions = [g for g in gaps if "." not in g.split(":")[0]]
    assert not functions, "\n".join(functions)


def test_the_type_hint_check_can_fail():
    def loose(a, b: int):
        return a

    assert untyped("loose", loose) == ["loose: parameters ['a'] have no type hint", "loose: no return type"]


# --- a column belongs to its level ------------------------------------------------------------------


def seal_column(problems: dict) -> api.Column:
    """A column of a level with named checks that no face knows about."""
    meaning = api.NamedChecks(fine="{title}: all {rows} seals hold", failing="{title}: {bad} of {rows} seals broken "
                                                                             "({names})")
    col = api.Column("your code", problems=problems, namespace="toy-seal", meaning=meaning)
    for check_id in ("sealed", "verified", "accepts"):
        col.cells[("seal", 0, check_id)] = ["broken" if check_id in problems else api.OK]
    return col


def test_a_named_checks_column_is_summed_up_in_its_levels_words():
    fine = seal_column({})
    assert not fine.failed and fine.tripped == set()
    assert fine.summary() == "your code: all 3 seals hold"
    broken = seal_column({"verified": "the loader took a file whose seal did not match"})
    assert broken.failed and broken.tripped == {"verified"}
    assert broken.summary() == "your code: 1 of 3 seals broken (verified)"
    empty = api.Column("your code", note="there is no seal.py", namespace="toy-seal", meaning=broken.meaning)
    assert empty.failed and empty.tripped == {"ERROR"} and empty.summary() == "your code: there is no seal.py"


def test_the_first_failure_is_the_check_the_test_recorded_not_the_columns_first():
    col = seal_column({"sealed": "save wrote no seal", "verified": "the loader took a bad seal"})
    told = col.explain(["toy-seal/verified"], [], "VERIFIED broken: whatever the text says", 'pytest "t.py::test_v"')
    assert told == 'the loader took a bad seal\n  Re-run just this test: pytest "t.py::test_v"'
    # No check recorded (the test failed some other way): the column's first story.
    assert col.explain([], [], "a message", "").startswith("save wrote no seal")


def overrides_typed_apart(path: Path) -> list:
    """``name.method: what`` for each method a level's class overrides from LevelModule with other types
    than LevelModule's own (an ``api.`` prefix is the same name)."""
    base = {name: inspect.signature(fn) for name, fn in vars(api.LevelModule).items() if inspect.isfunction(fn)}
    out = []
    for cls in (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in base):
            want = base[fn.name]
            args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            given = {a.arg: ast.unparse(a.annotation).replace("api.", "") if a.annotation else None for a in args}
            given["return"] = ast.unparse(fn.returns).replace("api.", "") if fn.returns else None
            wanted = {p.name: p.annotation for p in want.parameters.values() if p.name != "self"}
            wanted["return"] = want.return_annotation
            out += [f"{cls.name}.{fn.name}: {arg} is {given.get(arg)}, LevelModule says {hint}"
                    for arg, hint in wanted.items() if given.get(arg) != hint]
    return out


@pytest.mark.parametrize("path", level_module_files(), ids=lambda p: str(p.relative_to(KIT)))
def test_a_levels_overrides_are_typed_as_the_level_interface_types_them(path):
    assert overrides_typed_apart(path) == []


def test_an_override_typed_any_is_seen(tmp_path):
    loose = tmp_path / "level_module.py"
    loose.write_text("class L(api.LevelModule):\n"
                     "    def column(self, title: str, folder: Path, level: Any, seed: int = 0) -> Optional[Any]:\n"
                     "        return None\n")
    assert overrides_typed_apart(loose) == ["L.column: level is Any, LevelModule says Level",
                                            "L.column: return is Optional[Any], LevelModule says Optional[Column]"]


def test_check_speaks_of_a_named_checks_column_in_its_levels_words():
    """``crashcourse check``'s verdict says what the column holds as its meaning words it, not as a loop's."""
    from grader.faces.matrix import Painter
    from grader.faces.student.check import CheckOutcome, _show_verdict
    from grader.faces.student.testrun import TestRun

    level, plain = manifest.load(KIT).levels[0], Painter(enabled=False)
    told: list = []
    _show_verdict(CheckOutcome(level, KIT, seal_column({}), TestRun(0)), plain, told.append)
    assert told[0] == f"Level {level.number} passes: every test, and every check in the matrix."
    told.clear()
    meaning = api.NamedChecks(fine="", failing="", passes="every seal", disagrees="a seal above is broken")
    col = seal_column({"sealed": "save wrote no seal"})
    col.meaning = meaning
    _show_verdict(CheckOutcome(level, KIT, col, TestRun(0)), plain, told.append)
    assert told[-1] == "Note: the tests pass, but a seal above is broken; the level counts as failing until both agree."
    assert not any("crash state" in line for line in told), told
