"""A student's own copy of the course: ``crashcourse init DIR`` and ``crashcourse handout OUT.zip``.

The workspace holds what a learner works from and nothing of the instructor's: the lessons, the
manifest, each handed-out level's folder (starter, tests, README, hints, answers template), the
walkthrough notebook and a README with the learner's commands. ``solutions/``, the kit's own tests
and corpus, and any instructor scenarios stay behind. Its manifest says ``"workspace": true``, so
``crashcourse demo`` run inside it knows the solution column belongs to the instructor.

It is made from the kit that came with the installed package (:func:`manifest.package_root`): the
copy a wheel carries, or the checkout of an editable install.

Making a workspace again never overwrites a learner's file (it may be work in progress); the
command lists what it left alone. Only the kit's own notes (README, .gitignore, workflow) are
brought up to date, and only when they still hold exactly what an earlier init wrote. ``--github-classroom`` adds a GitHub
Classroom workflow that grades each task of each level with the points its tests carry.

Nothing here imports a POSIX-only module: learners run this on macOS and Windows too.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import stat
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

from grader import kitsource
from grader.atomicfile import write_atomic
from grader.levels import manifest as manifest_mod

NOTEBOOK_FILES = ("02-checkpoints-walkthrough.ipynb", "checkpoint_loops.py")
NOTEBOOK_LEVEL = 2  # the walkthrough opens exercises/level2/agent.py
WORKFLOW_PATH = PurePosixPath(".github/workflows/classroom.yml")
KIT_FOLDER = ".crashcourse-kit"  # the grader's source, which `pip install ./.crashcourse-kit` installs
SKIP_PARTS = {"__pycache__", "checkpoints"}


class WorkspaceError(Exception):
    """The workspace cannot be made as asked; the message says why and what to do."""


def parse_levels(text: Optional[str], kit: manifest_mod.Manifest) -> list:
    """The levels named by ``--levels`` ("1,2", "2-4"), or every level present in the kit."""
    present = [level.number for level in kit.existing()]
    if not text:
        return present
    chosen: list[int] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                chosen.extend(range(low, high + 1))
            else:
                chosen.append(int(part))
        except ValueError:
            raise WorkspaceError(f"--levels {text!r}: write level numbers like 1,2 or 2-4") from None
    unknown = sorted(set(chosen) - set(present))
    if unknown:
        raise WorkspaceError(f"--levels {text!r}: this kit has no level {', '.join(map(str, unknown))}; "
                             f"the levels are {', '.join(map(str, present))}")
    return sorted(set(chosen))


# --- what gives what away --------------------------------------------------------------------------

NOTEBOOK_REVEALS = ("the walkthrough notebook works level 2's fix through four ways (its save_checkpoint and "
                    "both save points)")


@dataclass
class Plan:
    """What a hand-out holds, and what the instructor is told about what it gives away."""

    levels: list            # every level in the workspace afterwards (earlier ones included)
    notebook: bool
    notes: list             # one line each: what a handed-out starter (or the notebook) gives away
    refusal: Optional[str] = None


def _levels_words(numbers: list) -> str:
    return ("levels " if len(numbers) > 1 else "level ") + ", ".join(map(str, numbers))


def safe_first(kit: manifest_mod.Manifest) -> list:
    """The first levels, in order, up to the first one whose starter gives an earlier one away (1 and 2)."""
    chosen: list = []
    for level in kit.existing():
        if any(earlier in chosen for earlier, _ in level.reveals):
            break
        chosen.append(level.number)
    return chosen


def plan(kit: manifest_mod.Manifest, requested: list, earlier: list, allow_spoilers: bool) -> Plan:
    """Which levels and whether the notebook go out now, given the levels handed out ``earlier``.

    A level never goes out together with a later level whose starter holds its solution, nor level 2
    with the notebook, unless ``allow_spoilers``: a level handed out earlier may be given away by a
    later hand-out (that is how the course goes on), one handed out now may not."""
    now = sorted(set(requested) - set(earlier))
    every = sorted(set(now) | set(earlier))
    notes, clashes = [], []
    for number in now:
        for revealed, what in kit.level(number).reveals:
            if revealed in every:
                notes.append(f"level {number}'s starter gives away level {revealed}'s solution: {what}")
                if revealed in now:
                    clashes.append((number, revealed))
    later = any(n > NOTEBOOK_LEVEL for n in every)
    notebook = NOTEBOOK_LEVEL in every and (later or NOTEBOOK_LEVEL in earlier or allow_spoilers)
    if notebook:
        notes.append(f"{NOTEBOOK_REVEALS}: it goes in" + ("" if later or NOTEBOOK_LEVEL in earlier else
                                                         " because --allow-spoilers says so"))
    elif NOTEBOOK_LEVEL in every:
        notes.append(f"{NOTEBOOK_REVEALS}, so it is left out until a level after {NOTEBOOK_LEVEL} is handed out "
                     "(or add --allow-spoilers)")
    refusal = None
    if clashes and not allow_spoilers:
        spoiled = sorted({revealed for _, revealed in clashes})
        first = [n for n in now if n not in {number for number, _ in clashes}]
        refusal = ("these levels would go out together with a later level that holds their solution: "
                   + "; ".join(f"level {number}'s starter holds level {revealed}'s" for number, revealed in clashes)
                   + f". Hand out {_levels_words(first) if first else 'the earlier levels'} first "
                   f"and the others once level {','.join(map(str, spoiled))} is done (crashcourse init DIR --levels "
                   "N adds them to a workspace), or add --allow-spoilers to hand them out together anyway.")
    return Plan(every, notebook, notes, refusal)


# --- what goes in ---------------------------------------------------------------------------------


def _files_under(folder: Path) -> list:
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not SKIP_PARTS & set(rel.parts) and not any(p.startswith(".") for p in rel.parts) \
                and not path.name.endswith((".pyc", ".pyo")):
            out.append(path)
    return out


def workspace_files(kit: manifest_mod.Manifest, levels: list, *, github_classroom: bool = False,
                    install: Optional[str] = None, notebook: Optional[bool] = None) -> dict:
    """``{relative POSIX path: bytes}`` of the workspace for ``levels``, built from ``kit``.
    ``notebook``: whether the walkthrough goes in (default: when its level is handed out)."""
    if notebook is None:
        notebook = NOTEBOOK_LEVEL in levels
    root = kit.root
    files: dict[str, bytes] = {}
    for path in _files_under(root / "lessons"):
        if path.suffix != ".py":  # the lesson's pages and pictures; its table generator is the kit's
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    raw = json.loads((root / manifest_mod.MANIFEST_PATH).read_text(encoding="utf-8"))
    raw["workspace"] = True
    # Every level stays listed: the commands then say a level not handed out yet is "not in this copy".
    files[manifest_mod.MANIFEST_PATH.as_posix()] = (json.dumps(raw, indent=2, ensure_ascii=False) + "\n").encode()
    handed = [kit.level(n) for n in levels]
    for level in handed:
        for path in _files_under(level.starter_dir):
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    if notebook:
        for name in NOTEBOOK_FILES:
            path = root / "notebooks" / name
            if path.is_file():
                files[f"notebooks/{name}"] = path.read_bytes()
    # The grader's own source rides along, so `pip install ./.crashcourse-kit` works for a course
    # that never published the kit (GitHub Classroom's runner installs it from there too).
    for rel, data in kitsource.source_files().items():
        files[f"{KIT_FOLDER}/{rel}"] = data
    spec = install or default_install()
    files["README.md"] = workspace_readme(handed, spec, notebook).encode()
    files[".gitignore"] = GITIGNORE.encode()
    if github_classroom:
        files[WORKFLOW_PATH.as_posix()] = classroom_workflow(handed, spec).encode()
    return files


def default_install() -> str:
    """The workspace's own copy of the grader: it installs wherever the workspace is, published or not."""
    return f"./{KIT_FOLDER}"


GITIGNORE = """\
# What running the loop and the commands leaves behind; your own files are the ones to commit.
__pycache__/
checkpoints/
.crashcourse/
.hypothesis/
.pytest_cache/
.venv/
"""


def workspace_readme(levels: list, install: str, notebook: bool) -> str:
    first = levels[0] if levels else None
    rows = "\n".join(f"| {lv.number} | `{lv.folder}/{lv.files[0]}` | {lv.title} |" for lv in levels)
    n = first.number if first else 1
    looped = next((lv for lv in levels if lv.function == "run_agent"), None)
    run_row = (f"| `crashcourse run {looped.number}` | runs your level-{looped.number} loop once and shows the "
               "checkpoint it left |\n" if looped else "")
    start = (f"Read `lessons/02-checkpoints.md`, then `{first.folder}/{first.readme}`, and open "
             f"`{first.folder}/{first.files[0]}`." if first else "Read `lessons/02-checkpoints.md`.")
    notebook_part = ("""
## The notebook

`notebooks/02-checkpoints-walkthrough.ipynb` draws where crashes land in the level-2 loop, yours
included. It needs Jupyter and matplotlib (`pip install jupyter matplotlib`), then
`jupyter lab notebooks/02-checkpoints-walkthrough.ipynb` and run every cell.
""" if notebook else "")
    return f"""# Your crashcourse workspace

This folder is yours. Each level is a small piece of broken code that saves an agent loop's
checkpoint; your job is to fix it until a crash at any point leaves a file a resume can trust.
The tests here are the grader: they run your code, crash it at every point, and tell you what a
resume would have found on disk.

## Set up once

```
python -m venv .venv
source .venv/bin/activate        # on Windows: .venv\\Scripts\\activate
pip install "{install}"
```

(`.crashcourse-kit/` is the grader itself, shipped with this workspace so nothing has to come from a
package index but pytest and Hypothesis. If your instructor gave you a wheel file or a link
instead, `pip install` that.)

## Start

{start} Then, from this folder:

| command | what it does |
|---|---|
| `pytest {first.folder if first else "exercises/level1"}` | the grader: red until your code survives every crash |
| `crashcourse check {n}` | the same tests, your crash matrix, and the first failure in full |
| `crashcourse hint {n}` | a nudge: a question first, then where to look, then what to use |
| `crashcourse watch {n}` | runs `check` again every time you save |
{run_row}| `crashcourse demo` | the crash matrix of each starter as handed out |

A level is done when `pytest exercises/levelN` passes. Levels in this workspace:

| level | you edit | about |
|---|---|---|
{rows}

Where a level has an `answers.md`, write your answers there: your instructor reads them (a passing
`pytest` or `check` reminds you).
{notebook_part}
## What is not here

The solutions stay with your instructor: `crashcourse demo` shows the starter's column only, and
says so. When your instructor hands out more levels, `crashcourse init . --levels 3` (for
example) run in this folder adds the new files and never touches one you already have.
"""


# --- the GitHub Classroom workflow ----------------------------------------------------------------


@dataclass
class ClassroomStep:
    id: str
    name: str
    command: str
    max_score: float


def _marker_number(decorator: ast.expr, name: str) -> Optional[float]:
    """N from ``@pytest.mark.<name>(N)`` or ``@pytest.mark.<name>(taskno=N)``; 1 for a bare
    ``@pytest.mark.<name>`` (the plugin's rule for points)."""
    if isinstance(decorator, ast.Attribute) and decorator.attr == name:
        return 1.0
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == name):
        return None
    values = list(decorator.args) + [kw.value for kw in decorator.keywords]
    if values and isinstance(values[0], ast.Constant) and isinstance(values[0].value, (int, float)):
        return float(values[0].value)
    return None


@dataclass
class PointedTest:
    nodeid: str             # relative to the workspace root
    name: str
    task: Optional[int]
    points: float


def pointed_tests(level: manifest_mod.Level) -> list:
    """Every test of the level that carries points, in file order, as the pytest plugin counts them."""
    out = []
    for path in level.test_paths():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test")):
                continue
            task = next((t for d in node.decorator_list if (t := _marker_number(d, "task")) is not None), None)
            points = next((p for d in node.decorator_list if (p := _marker_number(d, "points")) is not None), None)
            if points is None:
                continue
            out.append(PointedTest(f"{level.folder}/{path.name}::{node.name}", node.name,
                                   None if task is None else int(task), points))
    return out


def task_tests(level: manifest_mod.Level) -> dict:
    """``{task number: [(node id relative to the kit root, points)]}`` from the level's test markers."""
    out: dict[int, list] = {}
    for test in pointed_tests(level):
        if test.task is not None:
            out.setdefault(test.task, []).append((test.nodeid, test.points))
    return out


def _written_tasks(level: manifest_mod.Level) -> set:
    try:
        from grader.grading.judge import written_tasks
    except ImportError:  # the judge needs POSIX; on Windows every task is graded by its tests
        return set()
    return written_tasks(level.starter_dir)


def classroom_steps(levels: list) -> list:
    """One graded step per test of each level, worth the points it carries: the step's pass or fail
    is that test's, so the workflow's total is the total the level's own ``pytest`` prints."""
    steps = []
    for level in levels:
        titles = dict(manifest_mod.readme_tasks(level.starter_dir / level.readme))
        written = _written_tasks(level)
        for test in pointed_tests(level):
            if test.task in written:
                continue  # written answers are read by the instructor, not scored here
            about = f"task {test.task}: {titles.get(test.task, '')}".rstrip(": ") if test.task is not None else ""
            step_id = f"level{level.number}_{test.name}"[:90]
            while step_id in {s.id for s in steps}:  # the same name in two test files
                step_id += "_"
            steps.append(ClassroomStep(
                id=step_id,
                name=f"Level {level.number}, {about + ', ' if about else ''}{test.name}",
                command=f'python -m pytest -q -p no:cacheprovider "{test.nodeid}"',
                max_score=test.points))
    return steps


def _q(text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar.
    return json.dumps(text, ensure_ascii=False)


def classroom_workflow(levels: list, install: str) -> str:
    steps = classroom_steps(levels)
    lines = [
        "# GitHub Classroom autograding, written by `crashcourse init --github-classroom`.",
        "# One graded step per test of each level, worth the points it carries (the total is pytest's).",
        "name: Autograding Tests",
        "'on':",
        "- push",
        "- repository_dispatch",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  run-autograding-tests:",
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    steps:",
        "    - name: Checkout code",
        "      uses: actions/checkout@v4",
        "    - name: Set up Python",
        "      uses: actions/setup-python@v5",
        "      with:",
        "        python-version: '3.12'",
        "    - name: Install the kit",
        f"      run: python -m pip install {_q(install)}",
    ]
    for step in steps:
        lines += [
            f"    - name: {_q(step.name)}",
            f"      id: {step.id}",
            "      uses: classroom-resources/autograding-command-grader@v1",
            "      with:",
            f"        test-name: {_q(step.name)}",
            "        setup-command: ''",
            f"        command: {_q(step.command)}",
            "        timeout: 10",
            f"        max-score: {step.max_score:g}",
        ]
    lines += [
        "    - name: Autograding Reporter",
        "      uses: classroom-resources/autograding-grading-reporter@v1",
        "      env:",
    ]
    lines += [f"        {step.id.upper()}_RESULTS: \"${{{{steps.{step.id}.outputs.result}}}}\"" for step in steps]
    lines += ["      with:", f"        runners: {','.join(step.id for step in steps)}", ""]
    return "\n".join(lines)


# --- writing it -----------------------------------------------------------------------------------


@dataclass
class InitReport:
    written: list
    unchanged: list
    kept: list  # there already, with other content: the learner's, left alone
    updated: list  # the kit's own notes (README, workflow), untouched since init wrote them


# Files that are the kit's notes about the workspace, not the learner's work: a later init may
# bring them up to date (say, the README's list of levels), but only if nobody edited them since.
REFRESHABLE = ("README.md", ".gitignore", WORKFLOW_PATH.as_posix())
RECORD = PurePosixPath(".crashcourse/handed-out.json")


def _refreshable(rel: str) -> bool:
    return rel in REFRESHABLE or rel.startswith(KIT_FOLDER + "/")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_workspace(target: Path, files: dict) -> InitReport:
    report = InitReport([], [], [], [])
    record_path = target.joinpath(*RECORD.parts)
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        record = {}
    for rel, data in sorted(files.items()):
        dest = target.joinpath(*PurePosixPath(rel).parts)
        if dest.exists() or dest.is_symlink():
            try:
                current = dest.read_bytes() if dest.is_file() and not dest.is_symlink() else None
            except OSError:
                current = None
            if current == data:
                report.unchanged.append(rel)
            elif _refreshable(rel) and current is not None and record.get(rel) == _digest(current):
                write_atomic(dest, data, durable=False)
                record[rel] = _digest(data)
                report.updated.append(rel)
            else:
                report.kept.append(rel)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not _create_whole(dest, data):
            report.kept.append(rel)  # it appeared since the check above: still never overwritten
            continue
        record[rel] = _digest(data)
        report.written.append(rel)
    try:
        record_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(record_path, json.dumps(record, indent=1, sort_keys=True), durable=False)
    except OSError:
        pass  # without the record, a later init only adds files; it never updates the README
    return report


def _create_whole(dest: Path, data: bytes) -> bool:
    """Create ``dest`` holding ``data``, whole or not at all, and never over an existing file.

    The bytes go to a temp file beside it first; a hard link then gives them the real name, which
    fails if the name is taken. So a kill mid-way leaves no half-written starter that a later
    ``init`` would keep as if it were the learner's own work. False: ``dest`` already existed.
    """
    tmp = dest.with_name(f".{dest.name}.crashcourse-new")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, dest)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: exclusive create, as close as it gets
            try:
                with open(dest, "xb") as f:
                    f.write(data)
            except FileExistsError:
                return False
        return True
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def handed_out(target: Path, kit: manifest_mod.Manifest) -> list:
    """Levels whose folders a workspace at ``target`` already has."""
    if not (target / manifest_mod.MANIFEST_PATH).is_file():
        return []
    return [level.number for level in kit.levels if (target / level.folder).is_dir()]


def _check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise WorkspaceError(f"{target} is a file; a workspace needs a folder (a new one, or one made by init)")
    existing = target / manifest_mod.MANIFEST_PATH
    if existing.is_file():
        try:
            raw = json.loads(existing.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            raw = {}
        if not raw.get("workspace"):
            raise WorkspaceError(f"{target} holds the kit itself (its manifest is not a workspace's); a workspace "
                                 "goes in a folder of its own, for example: crashcourse init ~/crashcourse-work")
    if (target / "solutions").is_dir():
        raise WorkspaceError(f"{target} has a solutions/ folder: it looks like the instructor's kit. Pick another "
                             "folder for the workspace.")


def _kit() -> manifest_mod.Manifest:
    kit = manifest_mod.load(manifest_mod.package_root())
    if kit.workspace:
        raise WorkspaceError("CRASHCOURSE_ROOT points at a student's workspace; a workspace is made from the kit "
                             "itself (unset CRASHCOURSE_ROOT, or point it at the kit)")
    return kit


def cmd_init(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    try:
        kit = _kit()
        _check_target(target)
        # Levels handed out before stay in the README's list and the workflow.
        earlier = handed_out(target, kit)
        requested = _requested(args.levels, kit, earlier)
        chosen = plan(kit, requested, earlier, args.allow_spoilers)
        if chosen.refusal:
            raise WorkspaceError(chosen.refusal)
        levels = chosen.levels
        files = workspace_files(kit, levels, github_classroom=args.github_classroom, install=args.install,
                                notebook=chosen.notebook)
    except (WorkspaceError, manifest_mod.ManifestError) as exc:
        print(f"crashcourse init: {exc}", file=sys.stderr)
        return 2
    target.mkdir(parents=True, exist_ok=True)
    report = write_workspace(target, files)
    try:
        where = os.path.relpath(target)
    except ValueError:  # Windows: another drive has no relative path
        where = str(target)
    if where.startswith(".."):
        where = str(target)
    print(f"Workspace {where}: levels {', '.join(map(str, levels))}; {len(report.written)} file(s) written.")
    _say_what_it_gives_away(chosen, kit, args.levels)
    if report.updated:
        print(f"  brought up to date (you had not edited them): {', '.join(report.updated)}")
    if report.unchanged:
        print(f"  {len(report.unchanged)} file(s) were already there as handed out; left as they are.")
    if report.kept:
        print(f"  {len(report.kept)} file(s) were already there with other content, maybe your work; "
              "skipped, never overwritten:")
        for rel in report.kept:
            print(f"    {rel}")
        print("  To get the handed-out version of one, move yours aside and run this again.")
    if args.github_classroom:
        print(f"  {WORKFLOW_PATH} grades {len(classroom_steps([kit.level(n) for n in levels]))} test(s), each worth its points, on GitHub "
              f"Classroom; it installs the kit with: pip install \"{args.install or default_install()}\"")
    first = kit.level(requested[0]) if requested else None
    if first is not None:
        go = "" if where == "." else f"cd {where} && "
        print(f"Next: {go}pytest {first.folder}    (red until you fix {first.files[0]}; README.md "
              "lists the other commands)")
    return 0


def _requested(text: Optional[str], kit: manifest_mod.Manifest, earlier: list) -> list:
    """``--levels``, or by default the first levels that give nothing away (none new where some are out)."""
    if text:
        return parse_levels(text, kit)
    return list(earlier) if earlier else safe_first(kit)


def _say_what_it_gives_away(chosen: Plan, kit: manifest_mod.Manifest, asked: Optional[str]) -> None:
    for note in chosen.notes:
        print(f"  note: {note}")
    rest = [lv.number for lv in kit.existing() if lv.number not in chosen.levels]
    if rest and not asked:
        print(f"  Levels {', '.join(map(str, rest))} are not in it: a later starter holds an earlier level's "
              "solution, so they go out later (--levels 3, say, once level 2 is done; --levels 1-6 "
              "--allow-spoilers for everything at once).")


def build_handout(output: str, files: dict, top: Optional[str] = None) -> str:
    """The workspace as a zip with one top folder, byte for byte the same each time."""
    top = top or Path(output).stem or "crashcourse-workspace"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for rel, data in sorted(files.items()):
            info = zipfile.ZipInfo(f"{top}/{rel}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o644 | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    out = Path(output)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True)
    write_atomic(out, buffer.getvalue())  # a half-written zip is never posted
    return str(out)


def cmd_handout(args: argparse.Namespace) -> int:
    try:
        kit = _kit()
        chosen = plan(kit, _requested(args.levels, kit, []), [], args.allow_spoilers)
        if chosen.refusal:
            raise WorkspaceError(chosen.refusal)
        levels = chosen.levels
        files = workspace_files(kit, levels, github_classroom=args.github_classroom, install=args.install,
                                notebook=chosen.notebook)
    except (WorkspaceError, manifest_mod.ManifestError) as exc:
        print(f"crashcourse handout: {exc}", file=sys.stderr)
        return 2
    out = build_handout(args.output, files)
    print(f"wrote {out}: a workspace with levels {', '.join(map(str, levels))} ({len(files)} files, no solutions). "
          f"Students unzip it and follow its README.md.")
    _say_what_it_gives_away(chosen, kit, args.levels)
    return 0


INIT_HELP = """\
Lay out a learner's workspace in DIR: the lessons, each level's starter, tests, README, hints and
answers template, the walkthrough notebook, and a README with the commands. No solutions. A later
level's starter holds an earlier level's fix (and the notebook level 2's), so by default no level
goes out together with one that gives it away; init says what each level gives away.

Running it again adds what is missing and never overwrites a file that is already there.

examples:
  crashcourse init my-course                    levels 1 and 2: the first ones that give nothing away
  crashcourse init my-course --levels 3         later, in the same folder: level 3 (its starter holds
                                                level 2's solution, which is why it waits) and the notebook
  crashcourse init my-course --levels 1-6 --allow-spoilers    everything at once
  crashcourse init repo --github-classroom      also .github/workflows/classroom.yml
"""

HANDOUT_HELP = """\
(instructors) Build the same workspace as `crashcourse init`, as a zip to post for students.

A later level's starter builds on an earlier level's fix (level 3's holds level 2's solution, level
4's those of levels 1 to 3), and the notebook works level 2's fix through: handout says, level by
level, what each gives away, and by default hands out none of them together with the level they
give away. Week by week:

  crashcourse handout week1.zip                 levels 1 and 2 (the default; no notebook yet)
  crashcourse handout week2.zip --levels 3      level 3 and the notebook, once level 2 is done
  crashcourse handout all.zip --levels 1-6 --allow-spoilers
"""


def register(sub) -> None:
    for name, handler, help_text, description in (
            ("init", cmd_init, "lay out a learner's workspace (no solutions) in a folder", INIT_HELP),
            ("handout", cmd_handout, "(instructors) the learner's workspace as a zip to post", HANDOUT_HELP)):
        parser = sub.add_parser(name, help=help_text, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == "init":
            parser.add_argument("dir", metavar="DIR", help="the workspace folder (made if missing)")
        else:
            parser.add_argument("output", metavar="OUT.zip", help="the zip to write")
        parser.add_argument("--levels", default=None, metavar="LIST",
                            help="levels to hand out, like 1,2 or 2-4 (default: the first levels that give nothing "
                                 "away, 1 and 2; in a workspace, the levels it has)")
        parser.add_argument("--allow-spoilers", action="store_true",
                            help="hand out together levels whose starters (or the notebook) hold an earlier "
                                 "level's solution; without it they are refused, and the notebook waits for level 3")
        parser.add_argument("--github-classroom", action="store_true",
                            help="also write .github/workflows/classroom.yml for GitHub Classroom autograding")
        parser.add_argument("--install", default=None, metavar="SPEC",
                            help=f"what the README and the workflow pip-install (default {default_install()}, the copy "
                                 "of the grader every workspace carries; a published name, a wheel's URL or a "
                                 "git URL works too)")
        parser.set_defaults(handler=handler)

