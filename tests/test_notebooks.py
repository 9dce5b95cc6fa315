"""The walkthrough notebooks: valid, committed without outputs, built from their script, and runnable.

The notebook's pictures come from ``grader.faces.pictures``; the tests call the same functions directly,
so "the fix is all green" is checked on the data itself, not on a PNG.
"""

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from grader.faces.pictures import OUTCOMES, classify, crash_matrix, draw_crash_matrix
from grader.engine.scripted import from_turns, support_tickets
from grader.engine.loader import import_file

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
WALKTHROUGH = NOTEBOOK_DIR / "02-checkpoints-walkthrough.ipynb"
SCENARIO = support_tickets(0)


def _load(path: Path, name: str):
    return import_file(path, name=name)


loops = _load(NOTEBOOK_DIR / "checkpoint_loops.py", "walkthrough_checkpoint_loops")


def _missing_execution_deps():
    missing = [name for name in ("nbclient", "ipykernel", "matplotlib") if importlib.util.find_spec(name) is None]
    return missing


def _has_matplotlib():
    return importlib.util.find_spec("matplotlib") is not None


# -- the committed files ---------------------------------------------------------------------------

def test_there_is_a_walkthrough_notebook():
    assert WALKTHROUGH in NOTEBOOKS, f"expected {WALKTHROUGH.name} under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_valid_nbformat(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.cells, f"{path.name} has no cells"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: code cells {dirty} carry outputs or execution counts; rebuild it "
                       "(python notebooks/build_walkthrough.py) or clear outputs before committing")


def test_walkthrough_matches_its_build_script():
    """The .ipynb is generated: reviewing build_walkthrough.py must mean reviewing the notebook."""
    build = _load(NOTEBOOK_DIR / "build_walkthrough.py", "walkthrough_build")
    want, got = build.build(), nbformat.read(WALKTHROUGH, as_version=4)
    # Compared cell by cell rather than as text, so a newer nbformat's layout does not matter.
    assert [(c.id, c.cell_type, c.source) for c in got.cells] == [(c.id, c.cell_type, c.source) for c in want.cells], \
        "the notebook differs from notebooks/build_walkthrough.py: run `python notebooks/build_walkthrough.py`"
    assert got.metadata.get("kernelspec", {}).get("name") == "python3"


# -- the data behind the pictures ------------------------------------------------------------------

@pytest.fixture(scope="module")
def four():
    return crash_matrix(loops.IMPLEMENTATIONS, SCENARIO)


@pytest.fixture(scope="module")
def fixed():
    return crash_matrix(loops.FIXED, SCENARIO)


def test_the_fix_picture_has_no_failing_cell(fixed):
    assert fixed.failing_cells() == []
    assert fixed.ok
    for row in fixed.rows:
        assert row.exploration.ok, row.exploration.report()
        assert len(row.verdicts) == row.exploration.states > 40, "the fix rows must have been crashed for real"
        assert all(cell for cell in row.cells.values()), f"{row.name}: some loop position had no crash state"


def test_each_of_the_four_implementations_fails_for_its_own_reason(four):
    def kinds(name):
        return {v.outcome for v in four.row(name).verdicts}

    assert kinds("in place + B only") == {"ok", "torn", "untraced"}
    assert kinds("atomic + B only") == {"ok", "untraced"}
    assert kinds("in place + A and B") == {"ok", "torn"}
    assert kinds("atomic + A and B") == {"ok"}
    outcomes = four.outcomes()
    tool_columns = [i for i, col in enumerate(four.columns) if col.key[-1] == "tool"]
    assert len(tool_columns) == 3
    # Saving at A is what makes a running tool visible; saving atomically is what keeps saves whole.
    assert all(outcomes["in place + B only"][i] == "untraced" for i in tool_columns)
    assert all(outcomes["in place + A and B"][i] == "ok" for i in tool_columns)
    assert outcomes["in place + A and B"][[c.key for c in four.columns].index((2, "A"))] == "torn"


def test_the_matrix_agrees_with_the_engine(four):
    """Every bad stripe is a violation explore_loop reports, and a green row is an ok exploration."""
    for row in four.rows:
        bad = [v for v in row.verdicts if v.outcome != "ok"]
        assert len(bad) == len(row.exploration.violations), row.name
        assert sorted((v.point, v.model) for v in bad) == sorted((v.point, v.model) for v in row.exploration.violations)
        assert row.ok == row.exploration.ok
        assert len(row.verdicts) == row.exploration.states


def test_columns_follow_the_loop_in_order(four):
    words = [col.key for col in four.columns]
    assert words[0] == ("start",) and words[-2:] == [("final",), ("done",)]
    assert words[1:13] == [(turn, phase) for turn in (1, 2, 3) for phase in ("A", "tool", "B", "model")]
    assert [c.tool for c in four.columns if c.turn] == ["list_tickets"] * 4 + ["classify_tickets"] * 4 + ["publish_table"] * 4


def _save_before_counting(state, directory="checkpoints"):
    loops.save_atomic(dict(state, turns=max(0, state["turns"] - 1)) if state["pendingToolUse"] is None
                      and state["turns"] else state, directory)


def _save_temp_in_tmp(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f)
    # /tmp is a file system of its own (as the kit runs code): the move is a copy, which a crash can tear.
    shutil.move(tmp, os.path.join(directory, "checkpoint.json"))


def _replace_from_tmp(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(directory, "checkpoint.json"))  # a rename across file systems: EXDEV


def test_other_outcomes_show_up_where_the_legend_says():
    small = from_turns("t", [("a", {"n": 1}, "x" * 300), ("b", {"n": 2}, "y" * 300)], name="small")
    matrix = crash_matrix({
        "A only": loops.make_loop(loops.save_atomic, "A"),
        "counts late": loops.make_loop(_save_before_counting, "AB"),
        "temp in /tmp": loops.make_loop(_save_temp_in_tmp, "AB"),
        "replace from /tmp": loops.make_loop(_replace_from_tmp, "AB"),
    }, small)
    assert {v.outcome for v in matrix.row("A only").verdicts} >= {"stale", "older"}
    assert "counters" in {v.outcome for v in matrix.row("counts late").verdicts}
    temp = matrix.row("temp in /tmp")
    assert not temp.ok and any(v.finding and v.finding.invariant == "ATOMIC-DIR" for v in temp.verdicts)
    told = matrix.explain("temp in /tmp")
    assert "PARSE broken" in told or "ATOMIC-DIR" in told, told
    replaced = matrix.row("replace from /tmp")
    assert not replaced.ok and "Invalid cross-device link" in (replaced.error or "")


def test_a_loop_that_raises_is_a_row_with_an_error():
    def broken(task, tools, call_model, execute_tool, directory="checkpoints"):
        raise RuntimeError("the loop fell over")

    matrix = crash_matrix({"broken": broken}, SCENARIO)
    row = matrix.row("broken")
    assert not row.ok and "the loop fell over" in row.error
    assert "did not finish" in matrix.explain("broken")


def test_classify_covers_every_outcome_in_the_legend():
    assert classify(None, b"{}") == "ok"
    assert set(OUTCOMES) >= {"ok", "torn", "untraced", "stale", "counters", "older"}


@pytest.mark.skipif(not _has_matplotlib(), reason="matplotlib is not installed (pip install -e '.[dev]')")
def test_pictures_are_coloured_from_the_data(four, fixed):
    import matplotlib.colors as mcolors
    from matplotlib.collections import PolyCollection

    def colours(fig):
        found = set()
        for ax in fig.axes:
            for coll in ax.collections:
                if isinstance(coll, PolyCollection) and len(coll.get_paths()):
                    found |= {mcolors.to_hex(c) for c in coll.get_facecolors() if c[3] > 0}
        return found

    red, orange, green = (OUTCOMES[k][1] for k in ("torn", "untraced", "ok"))
    assert colours(draw_crash_matrix(fixed)) == {green}
    assert {red, orange, green} <= colours(draw_crash_matrix(four))


# -- running the notebooks -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def executed():
    missing = _missing_execution_deps()
    if missing:
        pytest.skip(f"cannot execute notebooks: {', '.join(missing)} not importable (pip install -e '.[dev]')")
    import nbclient

    out = {}
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                         resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
        client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
        out[path.name] = nb
    return out


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_from_a_fresh_kernel(executed, path):
    nb = executed[path.name]
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")


@pytest.mark.notebook
def test_walkthrough_draws_its_pictures(executed):
    nb = executed[WALKTHROUGH.name]
    images = [c.id for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if "image/png" in o.get("data", {})]
    # four implementations, file sizes, the fix, your save, your agent, your conversation, power loss
    assert len(images) >= 7, f"expected at least 7 pictures, got {len(images)} (cells {images})"
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "crash states over four rows; bad ones: none" in text


@pytest.mark.notebook
def test_the_walkthrough_counts_what_pytest_and_check_count(executed):
    """The notebook crashes the loop in the folder the level's tests use, so its counts for the
    starter (section 4, and 7b on the shipped agent.py) are the ones pytest and check print."""
    import re

    from grader.engine.explore import NESTED_FOLDER, explore_loop
    from grader.engine.scripted import DEFAULT_SEED

    starter = _load(ROOT / "exercises" / "level2" / "agent.py", "walkthrough_counted_starter")
    want = explore_loop(starter.run_agent, support_tickets(DEFAULT_SEED), directory=NESTED_FOLDER)
    text = "".join(o.get("text", "") for c in executed[WALKTHROUGH.name].cells if c.cell_type == "code"
                   for o in c.outputs)
    counts = re.findall(r"(\d+) crash states at (\d+) crash points", text)
    assert len(counts) >= 2, text[:2000]
    assert set(counts) == {(str(want.states), str(want.points))}, (counts, want.states, want.points)


# -- legible at notebook width, 0 to 12 turns ------------------------------------------------------

def _turns(n):
    return from_turns("t", [(f"tool{i}", {"i": i}, "r" * 700) for i in range(n)], name=f"{n} turns")


@pytest.fixture(scope="module")
def by_turns():
    two = {name: loops.IMPLEMENTATIONS[name] for name in ("in place + B only", "atomic + A and B")}
    return {n: crash_matrix(two, _turns(n)) for n in (0, 1, 8, 12)}


def _overlaps(boxes):
    boxes = sorted(boxes, key=lambda b: b.x0)
    return [(a, b) for a, b in zip(boxes, boxes[1:]) if a.x1 > b.x0 + 0.5 and a.y1 > b.y0 and b.y1 > a.y0]


def _legend_labels(fig):
    return [t.get_text() for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
            for t in legend.get_texts()]


@pytest.mark.skipif(not _has_matplotlib(), reason="matplotlib is not installed (pip install -e '.[dev]')")
@pytest.mark.parametrize("turns", (0, 1, 8, 12))
def test_pictures_fit_a_notebook_at_any_length(by_turns, turns):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from grader.faces.pictures import MAX_WIDTH, draw_file_sizes

    matrix = by_turns[turns]
    for fig in (draw_crash_matrix(matrix), draw_file_sizes(matrix)):
        width, height = fig.get_size_inches()
        assert width <= MAX_WIDTH and width / height < 3.5, (turns, width, height)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in fig.axes:
            labels = [t for t in ax.get_xticklabels() if t.get_text()]
            assert all(t.get_rotation() == 0 for t in labels), "tick labels must be horizontal"
            assert not _overlaps([t.get_window_extent(renderer) for t in labels]), \
                f"{turns} turns: x labels overlap on {ax.get_title()!r}"


@pytest.mark.skipif(not _has_matplotlib(), reason="matplotlib is not installed (pip install -e '.[dev]')")
def test_legends_explain_bands_colours_and_power_cuts(by_turns):
    from grader.faces.pictures import draw_file_sizes

    sizes = _legend_labels(draw_file_sizes(by_turns[8]))
    assert any("grey band" in label for label in sizes)
    assert any(OUTCOMES["torn"][0] in label for label in sizes)
    killed = _legend_labels(draw_crash_matrix(by_turns[1]))
    assert OUTCOMES["ok"][0] in killed and not any("power cut" in label for label in killed)
    power = crash_matrix({"atomic + A and B": loops.IMPLEMENTATIONS["atomic + A and B"]}, _turns(1),
                         models=("M1", "M3"))
    assert any("power cut" in label for label in _legend_labels(draw_crash_matrix(power)))


# -- the setup cells do not depend on the learner's file -------------------------------------------

@pytest.mark.notebook
def test_a_syntax_error_in_agent_py_breaks_only_the_cell_that_loads_it(tmp_path):
    missing = _missing_execution_deps()
    if missing:
        pytest.skip(f"cannot execute notebooks: {', '.join(missing)} not importable")
    import nbclient

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "checkpoint_loops.py").write_text((NOTEBOOK_DIR / "checkpoint_loops.py").read_text())
    (tmp_path / "exercises" / "level2").mkdir(parents=True)
    (tmp_path / "exercises" / "manifest.json").write_text("{}")  # what the setup cell looks for
    (tmp_path / "exercises" / "level2" / "agent.py").write_text("def run_agent(task:\n    pass\n")
    nb = nbformat.read(WALKTHROUGH, as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code" and "load_learner_file" in c.source and "def " in c.source)
    loads = [c for c in nb.cells if c.cell_type == "code" and "load_learner_file(ROOT" in c.source]
    assert len(loads) == 1, "exactly one cell loads exercises/level2/agent.py"
    nb.cells = [setup, loads[0]]
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                            resources={"metadata": {"path": str(tmp_path / "notebooks")}}).execute()
    errors = [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    said = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "does not load" in said and "SyntaxError" in said and "line 1" in said
    assert not "".join(o.get("text", "") for o in nb.cells[0].outputs).count("SyntaxError")
