"""crashcourse's pytest plugin: grade a folder of exercise files, and explore crashes in your own code.

Registered through the ``pytest11`` entry point, so it is active wherever crashcourse is installed.

Options (each has an ini twin with the same help text):

``--submission DIR``
    Grade the exercise files in DIR instead of the ones beside the tests. This is how the kit
    tests its solutions and how ``crashcourse grade`` grades a student's folder.
``--crashcourse-seed N``
    The seed for the scripted model and the generated conversations. Same seed, same crash
    states; the report header prints it so any run can be repeated.
``--crashcourse-examples N``
    How many generated conversations a property test tries (default 12).

Markers: ``@pytest.mark.task(taskno=N)`` ties a test to task N of the level's README;
``@pytest.mark.points(P)`` says how many points it is worth.

Hook: ``pytest_crashcourse_submission(config, folder)`` builds what the ``submission`` fixture
hands out; ``crashcourse grade``'s judge implements it to hand out stand-ins whose code runs in
the sandbox (:mod:`grader.grading.judge`).

Fixtures: ``submission`` (load the file under test), ``crashcourse_seed``, and ``crash_explorer``
for any project's own file-writing code::

    def test_settings_are_saved_atomically(crash_explorer, tmp_path):
        target = tmp_path / "settings.json"
        target.write_text('{"theme": "dark"}')
        crashes = crash_explorer(lambda: save_settings(target, {"theme": "light"}), target)
        crashes.assert_atomic()
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
from pathlib import Path
from typing import Any, Optional

import pytest

from grader.engine import fresh as _fresh  # noqa: F401 - its fork server must start before a learner file is imported
from grader.engine import hangs
from grader.engine import loader
from grader.engine.explore import explore_writes
from grader.engine.scripted import DEFAULT_EXAMPLES, DEFAULT_SEED
from grader.grading.outcomes import Outcomes, points_of, task_of

SEED_HELP = "seed for the scripted model and generated conversations (printed in the header; same seed, same run)"
SUBMISSION_HELP = "grade the exercise files in this folder instead of the ones beside the tests"
EXAMPLES_HELP = "how many generated conversations each property test tries"


class SubmissionHooks:
    """The hook this plugin adds (registered in :func:`pytest_addhooks`)."""

    @pytest.hookspec(firstresult=True)
    def pytest_crashcourse_submission(self, config: pytest.Config, folder: Path) -> Any:
        """What the ``submission`` fixture hands to a test for ``folder``: an object with the
        methods of :class:`Submission`. The first implementation that returns something wins;
        this plugin's own (a :class:`Submission`) runs last."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(SubmissionHooks)


@pytest.hookimpl(trylast=True)
def pytest_crashcourse_submission(config: pytest.Config, folder: Path) -> Any:
    if not hasattr(config, "_crashcourse_import_told"):
        config._crashcourse_import_told = {}
    return Submission(folder, config._crashcourse_import_told)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("crashcourse", "crashcourse: crash an agent loop at every point")
    group.addoption("--submission", "--crashcourse-submission", dest="crashcourse_submission", default=None,
                    metavar="DIR", help=SUBMISSION_HELP)
    group.addoption("--crashcourse-seed", dest="crashcourse_seed", default=None, metavar="N", help=SEED_HELP)
    group.addoption("--crashcourse-examples", dest="crashcourse_examples", default=None, metavar="N", help=EXAMPLES_HELP)
    # Where the learner typed the command, when pytest runs for `crashcourse check` or `watch` (from the
    # workspace's root): re-run lines are written to be pasted there.
    group.addoption("--crashcourse-rerun-from", dest="crashcourse_rerun_from", default=None, help=argparse.SUPPRESS)
    parser.addini("crashcourse_submission", SUBMISSION_HELP, default="")
    parser.addini("crashcourse_seed", SEED_HELP, default="")
    parser.addini("crashcourse_examples", EXAMPLES_HELP, default="")


def _int_option(config: pytest.Config, name: str, default: int) -> int:
    raw, source = config.getoption(name), f"--{name.replace('_', '-')}"
    if raw is None:
        raw, source = config.getini(name), f"the ini option {name}"
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"{source} must be a whole number, got {raw!r}") from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(taskno): the task of the level's README this test checks")
    config.addinivalue_line("markers", "points(value): how many points this test is worth")
    config._crashcourse_seed = _int_option(config, "crashcourse_seed", DEFAULT_SEED)
    config._crashcourse_examples = _int_option(config, "crashcourse_examples", DEFAULT_EXAMPLES)
    folder = config.getoption("crashcourse_submission") or config.getini("crashcourse_submission") or None
    if folder is not None:
        path = Path(folder).expanduser().resolve()
        if not path.is_dir():
            raise pytest.UsageError(f"--submission {folder}: no such folder. Point it at a folder that holds the "
                                    "level's files (for example solutions/level2).")
        folder = path
    config._crashcourse_submission = folder
    config._crashcourse_quiet = hangs.on_slow_loop(lambda line: _say_now(config, line))
    config.pluginmanager.register(Outcomes(), OUTCOMES_NAME)
    gc.freeze()  # see pytest_collection_finish


OUTCOMES_NAME = "crashcourse-outcomes"


def pytest_collection_finish(session: pytest.Session) -> None:
    # Garbage collection was about a tenth of level 6's run. What pytest, Hypothesis and the kit
    # imported lives until the process exits: frozen (here and in pytest_configure), it is left out
    # of every later collection. And an exploration makes many small objects that live a while
    # (decoded saves, windows, caches): collecting the youngest generation every 10,000 new objects
    # rather than every 700 set off a sixth as many collections, and no full one during the tests.
    # Memory is freed as before: only reference cycles wait a little longer.
    gc.freeze()
    gc.set_threshold(10000, 10, 10)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    quiet = getattr(config, "_crashcourse_quiet", None)
    if quiet is not None:
        quiet()
    # pytest ends with two full garbage collections (to report exceptions raised in __del__), which
    # walk every object the run left alive: level 6's 200-turn explorations made them about 35 ms, a
    # twentieth of the learner's wait. Everything alive now lives until the process exits anyway.
    gc.freeze()


def _say_now(config: pytest.Config, line: str) -> None:
    """Print ``line`` on the terminal while a level's test runs (output capture is paused for it)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    item = getattr(config, "_crashcourse_item", None)
    if reporter is None or item is None or not _grades_a_folder(item):
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        # On the progress line itself: a line of its own would make pytest print the file's name a
        # second time when the test's letter follows.
        reporter.write(f" [crashcourse: {line}] ", flush=True)


# -- code that got stuck -----------------------------------------------------------------------------
#
# The engine stops a call into the learner's code that runs past its limit, and refuses at once any
# later call into the functions that were stuck (grader.engine.hangs). Here each test learns which of
# that happened while it ran, itself or in a result it shares through `once`: the first test to meet
# a hang tells it in full (where, and what to try); a later one that would run the stuck code again
# says in a line that it was not run. A test that never calls the stuck code runs as usual.


def _grades_a_folder(item: pytest.Item) -> bool:
    """A level's test (it grades a learner's folder through the `submission` fixture): only those speak
    of stuck code; any other test that uses the plugin keeps its own verdict."""
    return "submission" in getattr(item, "fixturenames", ())


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    """Stuck code is refused even where a test calls the learner's function itself, outside a limit."""
    with hangs.refusing(hangs.current_hangs() if _grades_a_folder(pyfuncitem) else []):
        yield


def _hangs_met(item: pytest.Item) -> list:
    """``(kind, Hang)`` for each hang this test met: in its own run, or in a shared result it read."""
    if not _grades_a_folder(item):
        return []
    mark = getattr(item, "_crashcourse_hang_mark", None)
    met = hangs.hangs_since(mark) if mark is not None else []
    return met + list(getattr(item, "_crashcourse_hangs_inherited", ()))


def _hang_report(item: pytest.Item, met: list, text: str) -> str:
    """What a test that met stuck code says instead of its own verdict."""
    told = item.config.__dict__.setdefault("_crashcourse_hangs_told", [])
    fresh = [hang for kind, hang in met if kind == "stopped" and not any(hang is h for h in told)]
    if fresh:
        hang = fresh[0]
        told.extend(fresh)
        # The level's own account is kept when it already names the place (it may say more: which
        # crash left the folder the loop got stuck in); otherwise the engine's story is told.
        if not (hang.place and hang.place in text or hang.story.splitlines()[0] in text):
            text = hang.story
        if "Re-run just this" not in text:
            text = f"{text.rstrip()}\n  Re-run just this test: {_rerun(item.config, item.nodeid)}"
        return text
    hang = met[0][1]
    where = f" ({hang.spot})" if hang.spot else ""
    return (f"Not run: the code under test got stuck in an earlier test of this run{where}, and this test calls "
            f"{hang.function} again. Fix that first: the first failure above says where, and what to try.")


def pytest_report_header(config: pytest.Config) -> str:
    where = config._crashcourse_submission or "the files beside each test"
    return f"crashcourse: seed {config._crashcourse_seed}, grading {where} (re-run with --crashcourse-seed " \
           f"{config._crashcourse_seed})"


class Submission:
    """The folder being graded; :meth:`load` imports one of its files as a fresh module."""

    def __init__(self, folder: Path, told: Optional[dict] = None):
        self.folder = folder
        # Files whose import failed earlier in this run: the reason is shown in full once, then named.
        self.told = told if told is not None else {}

    def path(self, filename: str) -> Path:
        return self.folder / filename

    def load(self, filename: str) -> Any:
        """Import ``filename`` from the folder as a new module (a fresh copy on every call)."""
        path = self.path(filename)
        if not path.exists():
            pytest.fail(f"There is no {filename} in {self.folder}. The level's tests grade a file with exactly that "
                        "name.", pytrace=False)
        key = str(path.resolve())
        if key in self.told:
            said = self.told[key]
            pytest.fail(f"Not run: {said}. The first error above shows "
                        + ("where, and what to try." if " got stuck" in said else "why, as Python reports it."),
                        pytrace=False)
        try:
            with hangs.time_limit(hangs.loop_timeout(), owner=str(path)):  # a top level that never ends
                return loader.load_file(path)
        except loader.ImportProblem as exc:
            problem = str(exc)
            self.told[key] = problem.split("\n", 1)[0].rstrip(":. ")
            stop = exc.__cause__
            if isinstance(stop, hangs.LoopTimeout):
                problem = str(stop)  # where the import got stuck, not an exception it "raised"
                spot = f" ({stop.hang.spot})" if stop.hang is not None and stop.hang.spot else ""
                self.told[key] = f"importing {filename} got stuck{spot}"
        pytest.fail(problem, pytrace=False)  # outside the except: the report shows the reason, not a chain

    def function(self, filename: str, name: str) -> Any:
        module = self.load(filename)
        fn = getattr(module, name, None)
        if not callable(fn):
            pytest.fail(f"{filename} has no function `{name}`; the tests call it by that name.", pytrace=False)
        return fn


@pytest.fixture
def submission(request: pytest.FixtureRequest) -> Submission:
    """The folder under test: ``--submission DIR``, or the folder of the test file itself."""
    folder = request.config._crashcourse_submission or Path(str(request.node.fspath)).parent
    return request.config.hook.pytest_crashcourse_submission(config=request.config, folder=Path(folder))


@pytest.fixture
def once(request: pytest.FixtureRequest, submission: Submission):
    """``once(name, compute)``: ``compute()`` for this submission, run once per test session.

    Several tests read the same crash exploration (each checks its own invariants), so the loop
    runs once, not once per test: faster, and a loop that hangs costs its time limit only once.
    """
    store = request.config.__dict__.setdefault("_crashcourse_once", {})

    met = request.config.__dict__.setdefault("_crashcourse_once_hangs", {})

    def get(name: Any, compute: Any) -> Any:
        key = (str(submission.folder), name)
        if key not in store:
            mark = hangs.hang_mark()
            try:
                store[key] = compute()
            finally:
                met[key] = hangs.hangs_since(mark)
        elif met.get(key):
            # A result computed while the code got stuck: this test met that hang too.
            inherited = getattr(request.node, "_crashcourse_hangs_inherited", [])
            request.node._crashcourse_hangs_inherited = inherited + met[key]
        return store[key]

    return get


@pytest.fixture
def crashcourse_seed(request: pytest.FixtureRequest) -> int:
    return request.config._crashcourse_seed


@pytest.fixture
def crash_explorer():
    """``crash_explorer(fn, path, models=("M1", "M2"))`` runs ``fn`` and returns every crash state of ``path``."""
    return explore_writes


def rerun_command(request: pytest.FixtureRequest) -> str:
    """The exact command that re-runs only this test, with this seed and submission."""
    return _rerun(request.config, request.node.nodeid)


SEED_SHOWN = "_crashcourse_seed_shown"  # the seed a re-run line may print, where it is not the run's own


def _rerun(config: pytest.Config, nodeid: str) -> str:
    # A node id is relative to pytest's rootdir, and the learner pastes the line where they ran
    # pytest (or crashcourse): both paths are given from there.
    here = config.getoption("crashcourse_rerun_from", None) or str(config.invocation_params.dir)
    path, sep, rest = nodeid.partition("::")
    test = _from(here, os.path.join(str(config.rootpath), path)) + sep + rest
    # The judge of `crashcourse grade` hides an instructor's own seed (SEED_SHOWN None): the line is
    # the student's, and re-runs the test on the conversations anyone's run draws.
    seed = getattr(config, SEED_SHOWN, config._crashcourse_seed)
    parts = ["pytest", f'"{test}"'] + ([f"--crashcourse-seed {seed}"] if seed is not None else [])
    if config._crashcourse_submission:
        folder = _from(here, str(config._crashcourse_submission))
        parts.append(f'--submission "{folder}"' if " " in folder else f"--submission {folder}")
    return " ".join(parts)


def _from(here: str, path: str) -> str:
    """``path`` as typed in ``here``: relative when it lies inside, whole when it would climb out."""
    path = os.path.normpath(os.path.join(here, path))
    inside = os.path.relpath(path, here)
    return path if inside.startswith(os.pardir) else inside


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    outcomes = config.pluginmanager.get_plugin(OUTCOMES_NAME)
    got, total = outcomes.points() if outcomes is not None else (0.0, 0.0)
    if outcomes is not None and outcomes.scored():
        terminalreporter.write_sep("-", f"crashcourse: {got:g} of {total:g} points")
        if exitstatus == 0 and got == total:  # a level that passes may still have answers to write
            from grader.faces.assertions import answers_reminders
            for line in answers_reminders(config.rootpath, outcomes.tests, config._crashcourse_submission):
                terminalreporter.write_line(line)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    """The check ids a failing test's exception carries become data on its report (user_properties).

    A test that met stuck code has no verdict on any check: it fails with the hang's story (the
    first to meet it) or a line saying it was not run, and records no check ids."""
    met = _hangs_met(item) if call.when in ("setup", "call") else []
    if call.excinfo is not None and not met:
        from grader.faces.assertions import causes_of, checks_of
        from grader.levels.registry import PROPERTY

        ids = checks_of(call.excinfo.value)
        if ids:
            item.user_properties.append((PROPERTY, ids))
        causes = causes_of(call.excinfo.value)
        if causes:
            item.user_properties.append(("crashcourse_causes", causes))
    outcome = yield
    report = outcome.get_result()
    if met and (call.when == "call" or report.failed):
        text = report.longreprtext if report.failed else ""
        report.outcome, report.longrepr = "failed", _hang_report(item, met, text)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item._crashcourse_hang_mark = hangs.hang_mark()
    item.config._crashcourse_item = item
    # Also on the report, for any other plugin that reads user_properties (junitxml, for one).
    points = points_of(item)
    if points is not None:
        item.user_properties.append(("crashcourse_points", points))
    task = task_of(item)
    if task is not None:
        item.user_properties.append(("crashcourse_task", task))
