"""Build notebooks/02-checkpoints-walkthrough.ipynb from the cells below (the notebook is reviewed here, as text).

    python notebooks/build_walkthrough.py          # rewrite the notebook, without outputs
    python notebooks/build_walkthrough.py --check  # exit 1 if the committed notebook differs

Edit this file, never the .ipynb: tests/test_notebooks.py fails if the two disagree.
"""

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
TARGET = HERE / "02-checkpoints-walkthrough.ipynb"

CELLS = []


def md(text):
    CELLS.append(("markdown", text.strip("\n")))


def code(text):
    CELLS.append(("code", text.strip("\n")))


md("""
# Walkthrough: crash the level-2 loop and look at what it leaves on disk

This notebook goes with Lesson 2 (`lessons/02-checkpoints.md`) and with level 2 of the exercises.
The lesson argues that an agent loop must save at two moments in every turn, and must never write
its checkpoint in place. Here you check that claim yourself: you will crash a real loop a few hundred
times and open the file each crash leaves behind.

What happens, in order:

1. the starter loop from `exercises/level2/agent.py` runs once on a scripted model, with no crash;
2. every file operation it makes is recorded, and the checkpoint folder is rebuilt as a crash at
   each point would leave it; you read those files (size, last bytes, what a resume would make of them);
3. a picture places crash points along the loop against four ways of writing the loop, each crash
   coloured by what a resume would find;
4. the fix, drawn the same way: all green;
5. your turn: edit a save function, or your own `agent.py`, and redraw its row.

Nothing here needs a network or an API key: the model is a script that answers the same way every
time. Run the notebook top to bottom from a fresh kernel (*Restart & Run All*). Cells marked
**✎ edit me** are there to be changed and run again.
""")

md("""
## 0. Setup

The first cell looks upward from the current folder for `exercises/manifest.json`, so the notebook works
whether Jupyter was started in the repository or inside `notebooks/`. It imports the grader's engine
and takes the level-2 starter from `notebooks/checkpoint_loops.py`, where a copy of it is kept as
shipped: sections 1 to 4 crash that copy, so they work whether your own `exercises/level2/agent.py`
is untouched, half fixed or does not even parse. Section 7b is the one cell that loads your file.
""")

code('''
%matplotlib inline
%config InlineBackend.print_figure_kwargs = {"bbox_inches": None}  # the pictures lay themselves out
import copy
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

from IPython.display import Code, display

# The kit's folder: a clone, or a workspace made by `crashcourse init` (both hold the manifest).
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "exercises" / "manifest.json").is_file())
sys.path.insert(0, str(ROOT / "notebooks"))

import checkpoint_loops
from grader.engine.crash_models import crash_states
from grader.engine.explore import NESTED_FOLDER, describe_bytes, explore_loop, windows_for
from grader.engine.invariants import check
from grader.faces.pictures import OUTCOMES, classify, crash_matrix, draw_crash_matrix, draw_file_sizes
from grader.engine.recorder import Recorder
from grader.engine.scripted import DEFAULT_SEED, from_turns, support_tickets

# The seed `pytest exercises/level2` and `crashcourse check 2` use, so the counts below are theirs.
# Same seed, same run; another seed gives other tickets, other sizes and other tool ids.
SEED = DEFAULT_SEED
scenario = support_tickets(SEED)
# The folder the level's tests hand run_agent: two levels deep, so the loop must create it. Its
# mkdir calls are crash points too, so using it here keeps the counts equal to pytest's and check's.
FOLDER = NESTED_FOLDER
SCRATCH = tempfile.TemporaryDirectory(prefix="walkthrough-")  # removed when the kernel stops


def load_module(path):
    """Import a Python file fresh from disk, so edits to it count without restarting the kernel."""
    spec = importlib.util.spec_from_file_location(f"walkthrough_{Path(path).stem}_{os.urandom(4).hex()}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def show_source(*functions):
    for function in functions:
        display(Code(inspect.getsource(function), language="python"))


def load_learner_file(path):
    """Your file fresh from disk, or None after printing why it does not load (as Python says it)."""
    try:
        return load_module(path)
    except Exception as exc:  # a syntax error, or anything the file raises when it is imported
        print(f"{Path(path).relative_to(ROOT)} does not load:")
        print("".join(traceback.format_exception_only(type(exc), exc)).rstrip())
        return None


# Sections 1 to 4 crash the level-2 starter as shipped. They use checkpoint_loops' replica of it, so
# they run whatever state your own exercises/level2/agent.py is in; section 7b loads yours.
run_starter = checkpoint_loops.IMPLEMENTATIONS["in place + B only"]

print("task: ", scenario.task)
print("tools:", ", ".join(tool["name"] for tool in scenario.tools))
for number, result in enumerate(scenario.results, 1):
    print(f"  tool call {number} returns {len(result.encode()):,} bytes")
''')

md("""
## 1. The starter, when nothing goes wrong

`support_tickets()` plays the course's task in three tool calls: list last quarter's tickets,
label each one with an issue type, publish a table. Keep an eye on the last one: `publish_table`
posts to a team channel, so running it twice posts the table twice. The scripted model behaves like
the Messages API where it matters here: it rejects a conversation that has a `tool_use` with no
`tool_result` right after it.

Run the starter once, in a scratch folder, and compare the file with what the function returned.
""")

code('''
clean_dir = Path(SCRATCH.name) / "clean-run"
model, tools = scenario.model(), scenario.executor()
final = run_starter(scenario.task, scenario.tools, model, tools, directory=str(clean_dir))

saved = json.loads((clean_dir / "checkpoint.json").read_text(encoding="utf-8"))
print("turns:", final["turns"], "| tokensUsed:", final["tokensUsed"], "| model calls:", model.calls)
print("tools that ran:", [name for _, name, _ in tools.effects])
print(f"checkpoint.json: {(clean_dir / 'checkpoint.json').stat().st_size:,} bytes,",
      "equal to the returned state:", saved == final)
''')

md("""
All fine: each tool ran once, and the file matches the state in memory. But a checkpoint is only
ever read after something went wrong, so a run without a crash tells you almost nothing about it.
Time to crash it.
""")

md("""
## 2. Record every operation

To crash the loop "at every point" you need a list of the points. A `Recorder` watches a folder and
logs each operation that reaches the operating system: a file opened (and whether that emptied it),
bytes written, a rename, a close. The model and the tools are wrapped so that their calls land in the
same log, in order. The grader's `explore_loop` does exactly this for you; here it is written out.
""")

code('''
workdir = Path(SCRATCH.name) / "traced-run"
workdir.mkdir()
checkpoint_dir = str(workdir / FOLDER)  # the tests' folder, as everywhere in this notebook
model, tools = scenario.model(), scenario.executor()
recorder = Recorder(watch=[str(workdir)])


def call_model(**kwargs):
    recorder.event("model_start", model.calls + 1)
    response = model(**kwargs)
    recorder.event("model_end", (model.calls, copy.deepcopy(response)))
    return response


def execute_tool(name, tool_input):
    recorder.event("tool_start", (name, copy.deepcopy(tool_input)))
    result = tools(name, tool_input)
    recorder.event("tool_end", (name, result))
    return result


with recorder:
    recorder.event("run_start")
    run_starter(scenario.task, scenario.tools, call_model, execute_tool, directory=checkpoint_dir)
    recorder.event("run_end")

ops = recorder.ops
print(f"{len(ops)} operations recorded; anything the recorder could not see: {recorder.unseen or 'nothing'}")
for op in ops:
    print(f"{op.index:3d}  {op.describe()}")
''')

md("""
Read the log from the top and notice two things.

* Between `tool 'list_tickets' starts` and the first save's `open`, the checkpoint is never touched.
  The file hears about a tool call only after the tool has returned.
* Every save after the first starts with `open() ... emptied it`. From that operation on, the old checkpoint no
  longer exists, and the new one arrives in several `write`s: Python hands bytes to the OS in chunks
  (a large tool result goes in one big chunk), and the last chunk leaves Python's buffer only when
  the file is flushed and closed. The chunks are about 8 KiB on Python 3.10 to 3.13; Python 3.14's
  default buffer is 128 KiB, so there the same save takes fewer, larger writes.
""")

md("""
## 3. Crash it at every point

A *crash point* is a gap between two operations: crash point *k* means operations `0 … k-1` happened
and none after. Under crash model **M1** (the process is killed) whatever reached the OS stays.
`crash_states` replays the log and hands back the checkpoint folder as it would be found after each
crash. `windows_for` tells where in the loop each point falls, and `check` is the grader's own verdict
on the file, which `classify` turns into a few words.

The table lists every crash point with the size and the last bytes of `checkpoint.json`.
""")

code('''
windows = windows_for(ops, scenario.task)
killed = list(crash_states(ops, recorder.initial, checkpoint_dir, models=("M1",)))


def resume_finds(state):
    raw = state.read("checkpoint.json")
    return OUTCOMES[classify(check(raw, windows[state.point]), raw)][0]


def file_tail(state, width=30):
    data = state.read("checkpoint.json")
    if data is None:
        return "(no file)"
    return f"{len(data):>6,} B ...{data[-width:].decode('utf-8', 'replace')!r}"


print(f"{'pt':>3}  {'where in the loop':<34} {'checkpoint.json':<50} what a resume finds")
for state in killed:
    where = windows[state.point].words().split(" (")[0]
    print(f"{state.point:>3}  {where:<34} {file_tail(state):<50} {resume_finds(state)}")
''')

md("""
Three of those rows deserve a closer look:

* right after turn 2's save opened the file: the file has just been emptied;
* between two writes of that same save: the file stops in the middle of the JSON;
* while `publish_table` runs: the file is whole, but it is the save from the end of turn 2.
""")

code('''
def first_state(wanted):
    return next(state for state in killed if wanted(state, windows[state.point]))


emptied = first_state(lambda s, w: w.phase == "B" and w.turn == 2 and s.read("checkpoint.json") == b"")
half = first_state(lambda s, w: w.phase == "B" and w.turn == 2 and ops[s.point - 1].kind == "write"
                   and ops[s.point].kind == "write")
publishing = first_state(lambda s, w: w.phase == "tool" and w.tool_name == "publish_table")

for label, state in [("just emptied", emptied), ("half written", half), ("while publish_table runs", publishing)]:
    raw = state.read("checkpoint.json")
    print(f"--- {label}: crash point {state.point}, after {ops[state.point - 1].describe()}")
    print("    on disk:", "no file" if raw is None else describe_bytes(raw))
    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as exc:
        print(f"    json.loads fails: {type(exc).__name__}: {exc}")
    else:
        last = data["messages"][-1]["content"]
        print(f"    parses: turns={data['turns']}, pendingToolUse={data['pendingToolUse']},",
              f"{len(data['messages'])} messages, the last holding", [block["type"] for block in last])
    print("    a resume finds:", resume_finds(state))
''')

md("""
The third case is the quiet one. The file parses and looks healthy, yet it does not mention
`publish_table` at all: no result, no pending call. A resume from it asks the model what to do next,
the model asks to publish the table, and the team channel gets the table twice. Nothing on disk
could have told the resume otherwise.

### Torn writes

A kill that falls between two operations is the kind case. A single write can also be cut short:
the process dies when the OS has taken only part of a 48 KiB write. Crash model **M2** adds those
states: for each write it keeps a third, two thirds, and every 4 KiB block boundary of it.
""")

code('''
torn = list(crash_states(ops, recorder.initial, checkpoint_dir, models=("M2",)))
print(len(torn), "torn-write states; what a resume finds in them:", dict(Counter(resume_finds(s) for s in torn)))
sample = torn[len(torn) // 2]
landed, carried = sample.torn
print(f"example: {landed:,} of {carried:,} bytes of '{ops[sample.point].describe()}' landed")
print("checkpoint.json ends with:", repr(sample.read("checkpoint.json")[-60:].decode("utf-8", "replace")))
''')

md("""
## 4. What the grader says

`explore_loop` does all of the above, for M1 and M2 together, in one call. `report()` is the text
`pytest exercises/level2` shows for the first failure: where the crash landed, what was on disk,
which rule broke, and what a resume would run into.
""")

code('''
exploration = explore_loop(run_starter, scenario, models=("M1", "M2"), directory=FOLDER)
print(f"{exploration.states} crash states at {exploration.points} crash points;",
      "rules broken:", ", ".join(sorted(exploration.tripped)))
print()
print(exploration.report())
''')

md("""
## 5. Four ways to write the loop

Two separate choices decide whether a crash does damage:

* **how** a save writes: straight into `checkpoint.json` (*in place*), or into a temp file in the same
  folder that is closed and then renamed over the old file (*atomic*);
* **when** the loop saves: after the tool result is recorded only (*B only*, like the starter), or
  also just before the tool runs, with the call in `pendingToolUse` (*A and B*).

`notebooks/checkpoint_loops.py` builds all four combinations from two save functions and one loop.
""")

code('''
show_source(checkpoint_loops.save_in_place, checkpoint_loops.save_atomic, checkpoint_loops.make_loop)
''')

md("""
The picture below is the heart of this notebook. Columns are the stretches of the loop in the order
they happen: the first model call, then for each turn *save point A*, *tool runs*, *save point B*
and the next *model call*, then the *final save* and the moment after `run_agent` has returned. Rows are the four implementations. Each cell is cut
into thin stripes, one per crash state that falls in that stretch (M1 and M2 together, in trace
order), and each stripe is coloured by what a resume would find. The small label counts the bad
stripes out of all the stripes in the cell.
""")

code('''
matrix = crash_matrix(checkpoint_loops.IMPLEMENTATIONS, scenario, directory=FOLDER)
for row in matrix.rows:
    kinds = Counter(OUTCOMES[v.outcome][0] for v in row.verdicts if v.outcome != "ok")
    print(f"{row.name:<20} {len(row.verdicts):>4} crash states; bad: {dict(kinds) or 'none'}")
draw_crash_matrix(matrix, title="Where crashes land: four implementations of the level-2 loop")
''')

md("""
Read it one row at a time.

* **in place + B only** is the starter. Orange in every *tool runs* column: while a tool runs, the
  file holds the previous turn (or nothing yet), so the call is invisible. Red over every save: the
  file has been emptied and is being refilled.
* **atomic + B only** loses the red: a rename never shows anyone half a file. The orange stays, and
  spreads over save point B as well, because until the rename lands the file still knows nothing of
  the call that just ran. Atomic writing fixes *how* you save, not *when*.
* **in place + A and B** turns the tool columns green: save point A wrote the pending call before
  the tool started. But now there are twice as many saves, and each one is a stretch of red.
* **atomic + A and B** is green everywhere. Each fix covers what the other leaves open; you need both.

Three colours of the legend do not appear here: *stale pending*, *counters off* and *older save*.
They belong to loops that save at the wrong moment or count at the wrong moment; you can make two of
them appear yourself in section 7.

`matrix.explain(row, column)` prints the grader's full message for the first bad stripe of a cell.
Columns are named like `"turn 3 tool"`, `"turn 2 A"`, `"turn 1 B"`, `"turn 2 model"`, `"final"`.
""")

code('''
for row, column in [("atomic + B only", "turn 3 tool"), ("in place + A and B", "turn 2 A"),
                    ("in place + B only", "final")]:
    print(f"=== {row}, {column}")
    print(matrix.explain(row, column))
    print()
''')

md("""
Now the same moment, while `publish_table` runs, in the row that is green. This is what save point A
put on disk just before the tool started:
""")

code('''
at_a = matrix.row("atomic + A and B").cells[(3, "tool")][0]
on_disk = json.loads(at_a.files["checkpoint.json"])
print("crash point:", at_a.where)
for key, value in on_disk.items():
    shown = f"{len(value)} messages, the last from the {value[-1]['role']}" if key == "messages" else json.dumps(value)
    print(f"  {key:<15} {shown}")
''')

md("""
`pendingToolUse` names the call, with its id and input, and the last message is the assistant turn
that asked for it. A resume can see that `publish_table` may or may not have posted, and decide what
to do about it (check the channel, or record that the call was interrupted) instead of posting
blindly. Deciding that is the resume's job, in a later level; making it possible is the checkpoint's.

Another view of the same runs: the size of each file in the checkpoint folder at every M1 crash point,
for the two loops that save at A and B. Grey bands mark the stretches where a save is being written,
lettered A, B or F (the final save) along the top; a file that does not exist yet is drawn at zero.
""")

code('''
draw_file_sizes(matrix, ["in place + A and B", "atomic + A and B"])
''')

md("""
In the top panel the solid line falls to zero at the start of every save (that is `open(path, "w")`
emptying the file) and climbs back in steps, one per write; each red dot on the way is a crash that
loses the task. In the bottom panel `checkpoint.json` only ever steps up, and only at the instant of
the rename. All the risky growing happens in the dashed temp file, which no resume ever reads.
""")

md("""
## 6. The fix, and the same picture all green

The fix is the two changes together:

1. **Save at A and at B.** Before the tool runs, put `{id, name, input}` in `pendingToolUse` and save;
   after its result is appended, count the turn, clear `pendingToolUse` and save again.
2. **Never write the real file.** Write the whole JSON to a temp file *in the same folder*, make sure
   it is closed (leaving the `with` block closes it and pushes Python's buffer to the OS), then
   `os.replace` it onto `checkpoint.json`. Use `os.replace` rather than `os.rename`: on Windows,
   `os.rename` refuses to overwrite an existing file (on Linux and macOS the two behave the same).
   POSIX promises that other processes see the old file or the new one under the name while the
   rename runs, so a killed process leaves one or the other; what a power cut leaves is up to the
   file system (section 8 below). Windows documents no such promise for the call `os.replace` uses.

The tool you write the bytes with does not matter. Here is the fix four ways: plain `open`,
`pathlib`, `tempfile` (told to create its file in the checkpoint's folder) and raw `os.open`/`os.write`
with no Python buffer at all.
""")

code('''
show_source(checkpoint_loops.save_with_pathlib, checkpoint_loops.save_with_tempfile,
            checkpoint_loops.save_with_os_calls)
''')

code('''
fixed = crash_matrix(checkpoint_loops.FIXED, scenario, directory=FOLDER)
assert fixed.ok, fixed.failing_cells()
print(sum(len(row.verdicts) for row in fixed.rows), "crash states over four rows; bad ones:", fixed.failing_cells() or "none")
draw_crash_matrix(fixed, title="The fix written four ways: every crash state leaves a file resume can use")
''')

md("""
Why `tempfile` needs `dir=directory`: by default it would put the temp file in `/tmp`, which is often a
different file system. A rename across file systems is really a copy and a delete, and a crash can
tear the copy. The grader flags that as its own rule (`ATOMIC-DIR`).

### What the fix costs

Checkpoints are not free. Count the saves and the bytes each loop wrote in the runs above:
""")

code('''
def save_cost(row):
    ops = row.exploration.ops
    saves = sum(1 for op in ops if op.kind == "open" and "create" in op.flags)
    written = sum(len(op.data) for op in ops if op.kind == "write")
    return saves, written


for name in ("in place + B only", "atomic + A and B"):
    saves, written = save_cost(matrix.row(name))
    print(f"{name:<18} {saves} saves, {written / 1024:,.0f} KiB written, {written / saves / 1024:,.0f} KiB per save")
''')

md("""
Saving at A as well almost doubles the number of saves, and every save writes the *whole*
conversation again, tool results included. For three turns that is nothing. For a long task the size
of each save grows with the history, so the total written grows roughly with the square of the number
of turns; level 3 then adds an `fsync` per save, which waits for the storage device. How often to save and how
much to rewrite each time are real engineering trade-offs (level 6 comes back to the rewriting).

## 7. Your turn

### 7a. ✎ edit me: a save function of your own

The cell below holds a save function that looks a lot like the fix. Run it and the cell after it, and
look at its row: some crashes still leave a broken file. Read the printed explanation, work out why,
change the function, and run both cells again until the row is green.

Stuck? Ask yourself: at the moment `os.replace` runs, has the end of the JSON left Python's buffer?
What does the end of a `with` block do to a file?

Then play with `MY_POINTS`: set it to `"B"` or to `"A"` and see which colours appear. With `"A"`
alone two new ones show up: *stale pending* (the model is already being asked about a result while the
file still says that tool is pending) and *older save* (at the next turn's save point A, the file
is still the previous turn's A, one save behind what a correct loop would have written).
""")

code('''
# ✎ edit me, then run this cell and the next one again
MY_POINTS = "AB"  # the save points the loop uses: "AB", "A" or "B"


def my_save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
        os.replace(path + ".tmp", path)
''')

code('''
mine = crash_matrix({f"my_save_checkpoint, {MY_POINTS}": checkpoint_loops.make_loop(my_save_checkpoint, MY_POINTS)},
                    scenario, directory=FOLDER)
print("Every crash state is fine." if mine.ok else mine.explain(mine.rows[0].name))
draw_crash_matrix(mine, title="Your save function")
''')

md("""
### 7b. Your level-2 agent

This cell loads `exercises/level2/agent.py` fresh from disk and draws its row. As shipped, the row is
the starter's: orange and red. Fix the file in your editor, run this cell again, and watch the row
turn green. When it is, `pytest exercises/level2` agrees (it also tries generated conversations of up
to twelve turns).
""")

code('''
agent = load_learner_file(ROOT / "exercises" / "level2" / "agent.py")
if agent is not None:
    yours = crash_matrix({"exercises/level2/agent.py": agent.run_agent}, scenario, directory=FOLDER)
    print("Every crash state is fine." if yours.ok else yours.explain(yours.rows[0].name))
    counted = yours.rows[0].exploration
    print(f"{counted.states} crash states at {counted.points} crash points, the same count as "
          "`crashcourse check 2` and `pytest exercises/level2` give for this file.")
    display(draw_crash_matrix(yours, title="exercises/level2/agent.py"))
''')

md("""
### 7c. ✎ edit me: another conversation

The pictures so far use one task. `from_turns` builds a conversation from `(tool name, input, result)`
triples, one tool call per turn. Change the turns (add some, make a result huge, put unicode in an
input) and redraw the two extreme loops.
""")

code('''
# ✎ edit me: one (tool name, tool input, tool result) per turn
my_turns = [
    ("list_files", {"folder": "shared"}, json.dumps(["notes.txt", "résumé.pdf"])),
    ("read_file", {"path": "shared/notes.txt"}, "meeting moved to Thursday ☕ " * 500),
    ("send_email", {"to": "team@example.com", "subject": "Thursday"}, "sent"),
]
my_scenario = from_turns("Tell the team when the meeting is", my_turns, name="my-conversation")
draw_crash_matrix(crash_matrix({"in place + B only": checkpoint_loops.IMPLEMENTATIONS["in place + B only"],
                                "atomic + A and B": checkpoint_loops.IMPLEMENTATIONS["atomic + A and B"]},
                               my_scenario, directory=FOLDER), title="Your conversation")
''')

md("""
## 8. What the fix does not cover: the power going out

Everything so far assumed the *process* died while the machine kept running. Then whatever the OS
had accepted survives, even if it is still sitting in the OS's cache. A power cut is harsher: data
not yet forced to the disk can vanish, and a rename can reach the disk before the bytes of the file
it points at. Crash model **M3** models that. Run the fixed loop under it:
""")

code('''
power = crash_matrix({"atomic + A and B": checkpoint_loops.IMPLEMENTATIONS["atomic + A and B"]}, scenario,
                     models=("M1", "M2", "M3"))
print(power.explain("atomic + A and B"))
draw_crash_matrix(power, title="The level-2 fix after a power cut (M3)")
''')

md("""
Red again, and the red stripes are hatched: hatching marks a crash state after a power cut (M3),
so the picture tells those apart from a killed process. The loop still handles a killed process perfectly; what breaks is the assumption that the
disk holds what the OS was given. After a power cut the renamed file can come back empty, because its
bytes were never forced out of the OS's cache onto the disk. The cure is `os.fsync` on the temp file
before the rename, and on the folder after it, so the new directory entry is on the disk too. That is
level 3. (On macOS, `fsync` stops at the drive, whose own cache can still lose the data; there
`fcntl.F_FULLFSYNC` asks the drive to flush. Detail 4 of `lessons/02-checkpoints-deeper.md` has the
whole story.)

## Recap

* A save that opens `checkpoint.json` with `"w"` destroys the last good checkpoint first and rebuilds
  it a chunk at a time; every crash in between loses the task.
* Writing a temp file in the same folder, closing it, then `os.replace`-ing it over the old file means
  any crash leaves the old save or the new one, whole.
* Saving only after the result (B) leaves every running tool invisible on disk; saving also before
  it (A) records the call as `pendingToolUse`, which gives a resume something to reconcile.
* You need both: the picture has a red or orange stripe somewhere for every other combination.
""")


def build():
    """The notebook as an nbformat object, without outputs; cell ids are stable so diffs stay small."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for number, (kind, source) in enumerate(CELLS):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell["id"] = f"cell-{number:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def main(argv):
    text = nbformat.writes(build()) + "\n"
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.name} is out of date: run python notebooks/build_walkthrough.py")
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
