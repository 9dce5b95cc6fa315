"""The judge: runs a level's own tests on one submission, without ever importing the submission.

Trust design (why a score cannot be faked from inside a submission)
-------------------------------------------------------------------
Two processes grade each submission, and only one of them runs student code:

* The **judge** (this module) runs ``pytest exercises/levelN`` in-process, with the level's real
  tests, fixtures, crash engine and invariants. It implements the plugin's
  ``pytest_crashcourse_submission`` hook, so the ``submission`` fixture hands out a
  :class:`~grader.grading.stand_in.RemoteSubmission` and ``submission.load("agent.py")`` returns a
  stand-in module whose functions run somewhere else. Pass or fail, points, and the report are decided here, from data.
* The **worker** (:mod:`grader.grading.worker`) is a separate process in a bubblewrap box
  (:mod:`grader.grading.bubblewrap`; with ``--no-box``, the bare sandbox of :mod:`grader.grading.sandbox`).
  It imports the student's file and calls its functions when asked. When
  the judge's crash engine is recording (``explore_loop``), the worker records the file operations
  with the same :class:`~grader.engine.recorder.Recorder` and streams them back as plain JSON; the judge
  appends them to its own recorder in order. The scripted model and tools stay in the judge: the
  worker only receives a callback handle, so each model and tool call is recorded by the judge at
  the moment it serves it, and the loop events in the trace cannot be forged or reordered.

What that buys:

* printing fake results, writing a results file: the judge reads neither (the worker's output is
  captured, capped, and shown as output, never parsed);
* ``sys.exit(0)`` or ``os._exit(0)`` anywhere: the judge sees an exception or a dead pipe, never
  a pass; an exit at import fails every test with that reason;
* patching pytest, ``grader.faces.assertions.assert_holds`` or ``_pytest.runner``: those patches land in
  the worker, where no verdict is computed (pytest is not even imported there);
* a thread or a detached process left running: the worker is killed after the run, and every
  process it started is found (session, subreaper, environment marker) and killed;
* a hang or an endless loop: a wall-clock deadline for the whole submission; once it is spent,
  the remaining tests fail at once with the same reason;
* lying about file operations (speaking the worker's wire protocol directly): after each recorded
  call the judge replays the trace and compares it with the files really on disk; a mismatch
  makes the run "unseen", which fails. A lie that leaves the same final files (a submission that
  edits the recorder's list from inside its own process) gains nothing: the worker runs under
  strace, and the crash states are built from the system calls it made
  (:mod:`grader.grading.kernel_trace`), which the recorder's operations only label; a recorded
  operation the kernel never saw is refused as forged.

The worker's data is decoded as JSON with a few tagged forms and checked (kinds of operation,
types of fields); written bytes travel raw after the JSON, by offset. Nothing it sends is
unpickled or evaluated. A model call carries only the messages that changed since the previous
call on the same callback; the judge rebuilds the conversation from what it was sent before and
refuses a call that refers to messages it never received.

Four things a level's tests may do in their own process are carried across:

* files the code opened for reading are replayed as ``open`` audit events in the judge, so a
  check that watches which files a loader read (level 6) sees the same as in-process;
* arguments the code changed (a dict it was given) are merged back into the caller's objects,
  keeping every value that did not change, identity included (level 1 checks that a save leaves
  the loop's live objects in place);
* a module-level value a test sets on the student's module (level 4's ``MAX_TURNS``) is set in
  the worker too, and again after the worker is restarted (:meth:`RemoteModule.__setattr__`);
* a change to ``os`` the kit's own checks make on purpose and mark (level 4 makes ``fsync`` free,
  since it grades resume, not durability) is made in the worker by name
  (:func:`~grader.grading.stand_in.forwarded_patches`, ``grader.engine.forwarded.FORWARDED``); only names the worker knows are used.

Faults are made from outside too. A check that needs the platform to misbehave (level 3: the
second save's ``fsync`` reports an I/O error, once or every time; a folder cannot be opened, as on
Windows) patches ``os`` in a learner's own pytest run, but under grade it asks the stand-in
(:meth:`~grader.grading.stand_in.RemoteSubmission.run_with_fault`): its steps run in a fresh worker
whose strace makes the kernel fail exactly those calls (``inject=fsync:error=EIO:when=N``, with N
read from the trace of a run without the fault; :mod:`grader.grading.faults`). The verdict comes
from what the judge sees from outside: whether the save raised (the stand-in's reply), which calls
failed and what followed them (the kernel's trace), and the files left (read with ``O_NOFOLLOW``).
No pytest runs inside a box, and nothing computed there is scored. (Where strace cannot run, the
fault is made as in a learner's own run, by patching ``os`` in the worker, which then reports the
calls that failed; each finding of such a check says so.) A test that still patches the judge's
own process is spotted (:func:`~grader.grading.stand_in.patched_by_test`) and fails with that
reason, since the patch cannot reach the code.

Where each job lives:

* :mod:`grader.grading.wire`  the format on the pipes, both halves (worker's encoder, judge's decoder);
* :mod:`grader.grading.box`  one submission's box and the worker process (:class:`Box`, :class:`Worker`);
* :mod:`grader.grading.kernel_trace`  the worker's file-system calls as strace saw them, compared with what it reported;
* :mod:`grader.grading.faults`  which calls a check's fault is for, and the strace injection that fails them;
* :mod:`grader.grading.stand_in`  the stand-in for the student's module, and what crosses with a call;
* :mod:`grader.grading.outcomes`  the outcome collector every run of a level's tests shares;
* :mod:`grader.grading.scenarios`  an instructor's own scenarios;
* this module: the pytest session of one submission, and its report entry.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from grader.engine import crash_models, hangs
from grader.engine.scripted import DEFAULT_SEED
from grader.grading import bubblewrap
from grader.grading.box import Box
from grader.grading.outcomes import Outcome, Outcomes
from grader.grading.scenarios import run_scenarios
from grader.grading.stand_in import RemoteSubmission, remember_pristine

OUTPUT_SHOWN = 4000
SEED_SHOWN = "_crashcourse_seed_shown"  # grader.faces.plugin.SEED_SHOWN: the seed re-run lines print


# -- running a level's tests as the judge ------------------------------------------------------------

class Collector(Outcomes):
    """The judge's outcome collector: :class:`~grader.grading.outcomes.Outcomes`, plus which test is
    running now (so an incident in the sandbox is charged to that test)."""

    def __init__(self, box: Box, private_seed: bool = False):
        super().__init__()
        self.box = box
        self.private_seed = private_seed

    def pytest_runtest_setup(self, item: Any) -> None:
        self.box.current = item.nodeid

    def pytest_configure(self, config: Any) -> None:
        if self.private_seed:
            # The instructor's --seed stays the instructor's: a student's re-run lines name none.
            setattr(config, SEED_SHOWN, None)


def report_entry(outcome: Outcome) -> dict:
    """A test's outcome in the judge's terms: a skip counts as a fail, a test without points is worth 0."""
    status, output = outcome.status, outcome.output
    if status == "skipped":
        status, output = "failed", "skipped: " + output
    return {"nodeid": outcome.nodeid, "name": outcome.name, "status": status, "output": output,
            "max_score": outcome.points if outcome.points is not None else 0.0, "task": outcome.task,
            "checks": list(outcome.checks)}


class StandIns:
    """Implements the plugin's ``pytest_crashcourse_submission`` hook: a stand-in for every folder."""

    def __init__(self, box: Box):
        self.box = box

    def pytest_crashcourse_submission(self, config: Any, folder: Path) -> RemoteSubmission:
        return RemoteSubmission(folder, self.box)


def _shorten(text: str, box: Box, names: dict) -> str:
    for old, new in sorted(names.items(), key=lambda item: -len(item[0])):  # longest first: paths nest
        text = text.replace(old, new)
    if len(text) > OUTPUT_SHOWN:
        text = text[:OUTPUT_SHOWN] + f"\n... ({len(text) - OUTPUT_SHOWN} more characters)"
    return text


def written_tasks(level_dir: Path) -> set:
    """Task numbers the level's README marks as written answers for manual review."""
    readme = level_dir / "README.md"
    if not readme.exists():
        return set()
    out, current = set(), None
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            head = line[3:].strip()
            number = head.split(".", 1)[0]
            current = int(number) if number.isdigit() else None
            if current is not None and "manual review" in head.lower():
                out.add(current)
        elif current is not None and "manual review" in line.lower() and "no automatic points" in line.lower():
            out.add(current)
    return out


# Only the plugins a level's tests use: whatever else is installed (pytest-benchmark asks git for
# the commit on every start) would cost each of hundreds of judges for nothing. Capture and the
# terminal reporter are off because a judge's own output goes nowhere: verdicts and their texts
# come from the test reports (Collector), which do not depend on either.
LEAN = ["-p", "grader.faces.plugin"] + [w for name in ("logging", "junitxml", "pastebin", "doctest", "faulthandler",
                                                 "stepwise", "nose", "legacypath", "capture", "terminal")
                                  for w in ("-p", f"no:{name}")]


def judge_args(level: Path, basetemp: str, folder: str, seed: Optional[int], examples: Optional[int]) -> list:
    """The pytest command line of a judge (the level's folder first)."""
    # The unraisable/thread-exception plugins run gc.collect() after every test: costly in a big heap,
    # and only about the judge's own objects (the student's code never runs here).
    args = [str(level), "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:unraisableexception",
            "-p", "no:threadexception", "--basetemp", basetemp, "--submission", folder,
            "--rootdir", str(level.parent.parent)]
    if seed is not None:
        args += ["--crashcourse-seed", str(seed)]
    if examples is not None:
        args += ["--crashcourse-examples", str(examples)]
    return args


def prepare_config(level_dir: str, seed: Optional[int] = None, examples: Optional[int] = None) -> Any:
    """The judges' pytest configuration, parsed once before they fork (each would spend ~40 ms on it).

    Nothing in it is configured yet: each judge sets its submission's folder and scratch
    directory, then runs the session (:func:`run_judge` with ``config=``).
    """
    try:
        from _pytest.config import _prepareconfig  # pytest's own step before a session; not public API
    except ImportError:
        return None  # each judge then parses its command line itself, as pytest.main does
    level = Path(level_dir).resolve()
    cwd, autoload = os.getcwd(), os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        os.chdir(level.parent.parent)
        return _prepareconfig(judge_args(level, "/nonexistent/basetemp", str(level), seed, examples) + LEAN)
    except Exception:  # noqa: BLE001 - another pytest may want other arguments: fall back the same way
        return None
    finally:
        os.chdir(cwd)
        if autoload is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload


def _read_answers(level: Path, root: str, folder: str) -> Optional[str]:
    """The submission's answers.md as handed in (None when the level asks for none, or none was handed in).

    Through O_NOFOLLOW, a regular file only, 64 KiB at most: never a link to someone else's file.
    """
    if not (level / "answers.md").exists():
        return None
    data, why = bubblewrap.read_box_file(root, os.path.relpath(folder, root) + "/answers.md")
    if data is not None:
        return data.decode("utf-8", "replace")[:OUTPUT_SHOWN]
    # Marked for review only where one was handed in (a link or an odd file is shown, with why).
    return None if why.startswith("there is no") else f"({why})"


def run_judge(level_dir: str, folder: str, root: str, token: str, *, seed: Optional[int] = None,
              timeout: float = 60.0, scenarios: Optional[str] = None, examples: Optional[int] = None,
              student: str = "", read_only: Optional[bool] = None, hide: tuple = (), config: Any = None,
              boxed: bool = False) -> dict:
    """Grade one submission folder with the level's tests. Returns the submission's report entry.

    ``config``: a configuration from :func:`prepare_config` (same level, seed and examples), which
    this process may use once.
    """
    level = Path(level_dir).resolve()
    kit_root = level.parent.parent
    # What a replay of the box's file operations may hold beyond their bytes (a judge needs 150 to 350
    # MiB of its 2 GiB cap): the engine's own cap, which nothing the batch ran before may have lifted.
    crash_models.HELD_LIMIT = crash_models.JUDGE_HELD_LIMIT
    scenarios = os.path.abspath(scenarios) if scenarios else None  # read after the chdir below
    # Hidden from the student's code (without a box: a box binds none of these): the instructor's
    # scenarios, the kit's solutions, tests and history, and the course a wheel carries in the package.
    hide = tuple(hide) + ((scenarios,) if scenarios else ()) + tuple(
        str(kit_root / name) for name in ("solutions", "tests", ".git")) + tuple(bubblewrap.hidden_kit())
    # answers.md is read before any of the submission's code runs: what the code writes while it
    # runs (something it was shown, an instructor's scenario) never reaches the report.
    answers = _read_answers(level, root, folder)
    box = Box(folder, root, token, timeout, read_only=read_only, hide=hide, boxed=boxed)
    scratch = os.path.join(box.root, "tmp")
    os.makedirs(scratch, exist_ok=True)
    import tempfile
    tempfile.tempdir = scratch
    os.environ["TMPDIR"] = scratch
    collector = Collector(box, private_seed=seed is not None and seed != DEFAULT_SEED)
    stand_ins = StandIns(box)  # the level's `submission` fixture hands out stand-ins (see the plugin's hook)
    args = judge_args(level, os.path.join(box.root, "pytest"), box.folder, seed, examples)
    mark = hangs.hang_mark()
    os.chdir(kit_root)
    remember_pristine()
    try:
        error = _run_tests(box, collector, stand_ins, config if config is not None else args)
    except BaseException as exc:  # noqa: BLE001 - the judge reports, it does not crash the batch
        error = f"the grader failed on this submission: {type(exc).__name__}: {exc}"
    extra = run_scenarios(scenarios, box) if scenarios else []
    killed = box.shutdown()

    shown = _Shown(box, {box.folder: student or "<submission>",
                         os.path.relpath(box.folder, kit_root): student or "<submission>", box.root: "<sandbox>"})
    written = written_tasks(level)
    tests = [_test_row(entry, box.incidents.get(entry["nodeid"]), written, shown)
             for entry in [report_entry(outcome) for outcome in collector.tests.values()] + extra]
    if answers is not None:
        tests.append({"name": "answers.md (written part)", "status": "manual review", "score": 0.0,
                      "max_score": 0.0, "output": answers, "task": None, "reason": None})
    scored = [t for t in tests if t["status"] != "manual review"]
    score = sum(t["score"] for t in scored)
    status, error = _verdict(scored, error, mark)
    output = bytes(box.output).decode("utf-8", "replace")
    if box.output_dropped:
        output += f"\n... ({box.output_dropped} more bytes of output were dropped)"
    return {"id": student, "score": score if status != "error" or score else 0.0,
            "max_score": sum(t["max_score"] for t in scored),
            "status": status, "error": shown(error) if error else None, "tests": tests,
            "stdout": shown(output), "stray_processes": killed}


def _run_tests(box: Box, collector: Collector, stand_ins: StandIns, how: Any) -> Optional[str]:
    """Run the level's tests in this process, from ``how``: a configuration parsed once before the
    judges forked (see :func:`prepare_config`; only this submission's folder and scratch directory
    differ), or pytest's arguments. Returns why the run gave no verdict, or None."""
    import pytest

    if isinstance(how, list):
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        code = pytest.main(how + LEAN, plugins=[collector, stand_ins])
    else:
        how.option.basetemp = os.path.join(box.root, "pytest")
        how.option.crashcourse_submission = box.folder
        how.pluginmanager.register(collector, "crashcourse-judge-collector")
        how.pluginmanager.register(stand_ins, "crashcourse-judge-stand-ins")
        os.environ["PYTEST_VERSION"] = pytest.__version__
        try:
            code = how.hook.pytest_cmdline_main(config=how)
        finally:
            how._ensure_unconfigure()
    if collector.collect_errors:
        return "the level's tests could not be collected:\n" + collector.collect_errors[0]
    if code not in (0, 1) and not collector.tests:
        return f"pytest stopped with exit code {int(code)}"
    return None


class _Shown:
    """Text as the report shows it: the box's paths named for the reader, and cut to a length."""

    def __init__(self, box: Box, names: dict):
        self.box, self.names = box, names

    def __call__(self, text: str) -> str:
        return _shorten(text, self.box, self.names)


def _test_row(entry: dict, reason: Optional[str], written: set, shown: _Shown) -> dict:
    """One test in the report: a task marked for manual review is worth nothing here; ``reason`` is
    what went wrong with the process while this test ran (a hang, an exit), if anything."""
    status, max_score = entry["status"], entry["max_score"]
    if entry.get("task") in written:
        status, max_score = "manual review", 0.0
    return {"name": entry["name"], "status": status,
            "score": max_score if status == "passed" else 0.0, "max_score": max_score,
            "output": shown(entry["output"]), "task": entry.get("task"),
            "checks": list(entry.get("checks") or []),
            "reason": shown(reason) if reason else None}


def _verdict(scored: list, error: Optional[str], mark: Any) -> tuple[str, Optional[str]]:
    """The submission's status and its one-line error, from the tests with points."""
    if error is None and not scored:
        error = "the level has no tests with points"
    # Tests share one run of the loop (the `once` fixture), so an incident (a hang, an exit, a
    # crash of the worker) is met by the first test that runs the code; the others fail on its
    # cached result. Nothing passed and something went wrong with the process: an error, with why.
    reasons = [t["reason"] for t in scored if t["reason"]]
    if error is None and reasons and not any(t["status"] == "passed" for t in scored):
        error = reasons[0]
    status = "error" if error else ("passed" if all(t["status"] == "passed" for t in scored) else "failed")
    stuck = next((hang for kind, hang in hangs.hangs_since(mark) if kind == "stopped"), None)
    if stuck is not None and error is None and status == "failed":
        error = stuck.summary()  # the report's one line for a hang: the learner's function, file and line
    return status, error
