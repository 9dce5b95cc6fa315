"""Helpers the level tests share: run a submission's loop, and fail with a lesson, not a traceback.

A failing test names the checks it tripped as data: :func:`fail` and :func:`checking` attach the
ids (qualified by namespace, :mod:`grader.levels.registry`) to the exception, and the pytest plugin
copies them into the test's ``user_properties`` under :data:`~grader.levels.registry.PROPERTY`, where
every report reads them.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterable, Iterator

import pytest

from grader.engine.checkpoint import tool_use_blocks
from grader.engine.explore import Exploration, at_point
from grader.engine.hangs import LOOP_TIMEOUT
from grader.levels import registry

# How long one run of the learner's code may take (CRASHCOURSE_LOOP_TIMEOUT changes it).
STUDENT_TIMEOUT = LOOP_TIMEOUT
CHECKS_ATTRIBUTE = "crashcourse_checks"   # set on the exception a failing test raises
CAUSES_ATTRIBUTE = "crashcourse_causes"   # why it tripped them (keys of grader.engine.invariants.CAUSES)

# The question a failure ends with, by the cause of its first broken crash state: the same invariant
# can break for different reasons, and the question must be about the one this code has.
NUDGES = {
    "no-save-a": "Which save point does this loop never reach? Look at what the file says while a tool runs.",
    "save-a-late": "Is save point A on disk before your tool starts? Where does that save sit against the tool "
                   "call? What waits for it (a thread's join, say) before the tool runs?",
    "no-save-b": "What does the file say once a tool's result is in `messages`, before the model is called "
                 "again? Count the saves in one turn of your loop.",
    "no-final-save": "What is on disk after the model's last answer has been appended? Compare it with what "
                     "run_agent returns.",
    "pending-shape": "What does the protocol keep in pendingToolUse (null, or exactly the call's id, name and "
                     "input), and what does your loop put there?",
    "pending-not-set": "Your loop saves before the tool runs: what does pendingToolUse hold at that save, and "
                       "which call should it name?",
    "pending-not-cleared": "Once a tool's result is in `messages`, is that call still running? Where does your "
                           "loop take it out of pendingToolUse, and does that happen before the save?",
    "in-place": "Think about where the new bytes go while they are being written.",
    "emptied-before-rename": "What does opening a file with \"w\" do to what is already in it? To fsync a file "
                             "you have written, call os.fsync(f.fileno()) while it is still open, after f.flush().",
    "buffered-rename": "When does a file opened in a `with` block hand its bytes to the operating system? Where "
                       "does your rename run, inside that block or after it?",
    "deleted-first": "Between removing the old checkpoint and renaming the new one in, what is on disk? Which "
                     "call replaces the old file in one step?",
    "folder-swap": "Between renaming the old folder away and the new one in, what would a resume find? Which "
                   "single call replaces checkpoint.json inside its folder?",
    "temp-cross-device": "Which folder is your temp file made in? Make it beside checkpoint.json (with tempfile, "
                         "pass dir=directory), so the rename stays inside one file system.",
    "temp-copied": "Where was the temp file when it was moved in? Between two file systems a move copies the "
                   "bytes into checkpoint.json itself: make the temp file beside checkpoint.json (with tempfile, "
                   "pass dir=directory) and os.replace it.",
    "temp-elsewhere": "Which folder is your temp file in? Put it beside checkpoint.json (with tempfile, pass "
                      "dir=directory).",
    "result-after-save": "Once the tool has returned, what does your loop do first: append the result to "
                         "`messages`, or save? What does the file say about the call between the two?",
    "counts-turns": "When does a turn count as done? Compare `turns` with the tool results in `messages` at "
                    "each save.",
    "counts-tokens": "Which responses does your `tokensUsed` add up, the first one included, and which usage "
                     "fields of each?",
    "counts-early": "When you save (at save point A, and at the end after the final answer), is the model's "
                    "latest message already in `messages`?",
}


@contextlib.contextmanager
def checking(checks: Iterable[str], namespace: str = "loop") -> Iterator[None]:
    """Any exception raised inside carries ``checks`` (ids of ``namespace``) as the ones it tripped."""
    try:
        yield
    except BaseException as exc:
        ids = [registry.qualified(namespace, c) for c in sorted(set(checks))]
        setattr(exc, CHECKS_ATTRIBUTE, list(getattr(exc, CHECKS_ATTRIBUTE, ())) + ids)
        raise


def fail(message: str, checks: Iterable[str] = (), namespace: str = "loop", causes: Iterable[str] = ()) -> None:
    """``pytest.fail(message, pytrace=False)``, recording ``checks`` as the ids this failure tripped
    and ``causes`` as why (most telling first)."""
    try:
        with checking(checks, namespace):
            pytest.fail(message, pytrace=False)
    except BaseException as exc:
        setattr(exc, CAUSES_ATTRIBUTE, list(dict.fromkeys(causes)))
        raise


def checks_of(exc: BaseException) -> list:
    """The qualified check ids an exception carries (see :func:`checking`)."""
    return list(getattr(exc, CHECKS_ATTRIBUTE, ()))


def causes_of(exc: BaseException) -> list:
    """The causes an exception carries (see :func:`fail`)."""
    return list(getattr(exc, CAUSES_ATTRIBUTE, ()))


def assert_holds(exploration: Exploration, invariants: Iterable[str], rerun: str = "",
                 also_about: str = "") -> None:
    """Fail the test, in the learner's words, if any of ``invariants`` broke in ``exploration``.

    A loop that crashed on its own, or wrote where the recorder cannot see, fails every test: no
    verdict about crashes means anything until the uncrashed run works.
    """
    wanted = set(invariants)
    if exploration.error or exploration.unseen:
        if exploration.told and exploration.stuck is None:
            # Several tests read one run: its traceback is shown once, by the first of them.
            said = exploration.in_brief()
            pytest.fail(f"Not checked: {said}{'' if said.endswith(('.', '?', '!')) else '.'} "
                        "The first test that read this run shows "
                        "it in full; fix that first, since this test reads the same run.", pytrace=False)
        exploration.told = True
        cause = exploration.error_cause()
        if cause:
            fail(exploration.report(), causes=[cause])
        pytest.fail(exploration.report(), pytrace=False)
    hits = [v for v in exploration.violations if v.invariant in wanted]
    if not hits:
        return
    first = hits[0]
    if rerun:
        first.rerun = rerun
    broken = len(hits) + sum(n for name, n in exploration.over_cap.items() if name in wanted)
    others = broken - 1
    models = list(exploration.models)
    under = models[0] if len(models) == 1 else f"{', '.join(models[:-1])} and {models[-1]}"
    text = [f"{exploration.scenario}: {broken} of {exploration.states} crash states under {under} break "
            f"{', '.join(sorted({v.invariant for v in hits}))}.", "", first.explain()]
    if others:
        kinds: dict = {}
        for v in hits[1:]:
            kinds.setdefault((v.invariant, v.where), v)
        text.append("")
        text.append(f"The same happens at {others} more crash state{'s' if others > 1 else ''}, for example:")
        for v in list(kinds.values())[:3]:
            text.append(f"  {v.invariant} {at_point(v.where)}, {v.operation}")
    # The first crash state's cause decides the closing question; the test's own is for the rest.
    nudge = NUDGES.get(first.cause) or also_about
    if nudge:
        text += ["", nudge]
    causes = [first.cause] + [v.cause for v in hits[1:]]
    fail("\n".join(text), {v.invariant for v in hits}, causes=[c for c in causes if c])


def answers_reminders(rootdir: "str | os.PathLike", nodeids: Iterable[str], submission: "str | None" = None) -> list:
    """For a pytest run whose tests all passed: a reminder for each level it ran that has written
    answers (the manifest's ``answers``), naming the file where the learner's own files are."""
    from pathlib import Path

    from grader.levels import manifest

    lines = []
    for folder in sorted({(Path(rootdir) / nodeid.split("::", 1)[0]).resolve().parent for nodeid in nodeids}):
        try:
            kit = manifest.load(manifest.find_root(folder))
        except (manifest.ManifestError, OSError, ValueError):
            continue  # tests outside any kit (the plugin used on its own) have no answers to write
        for level in kit.levels:
            if level.answers and level.starter_dir.resolve() == folder:
                lines.append(level.answers_reminder(Path(submission) if submission else folder))
    return lines


def require(holds: object, message: str, checks: Iterable[str] = (), namespace: str = "loop",
            causes: Iterable[str] = ()) -> None:
    """Fail with ``message`` alone (no pytest locals, no traceback into the kit) unless ``holds``;
    the failure records ``checks`` as the ids it tripped, and ``causes`` as why."""
    if not holds:
        fail(message, checks, namespace, causes)


def _short_json(value: object, width: int = 70) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _pending_words(pending: object) -> str:
    if not pending:
        return "nothing pending"
    if isinstance(pending, dict) and "name" in pending:
        return f"`{pending['name']}` pending"
    if isinstance(pending, list):
        return f"{len(pending)} call{'s' if len(pending) != 1 else ''} pending"
    return f"pendingToolUse {_short_json(pending, 50)}"


def describe_final_file(raw: "bytes | None") -> str:
    """What checkpoint.json held once an uncrashed run had returned, in a few words."""
    import json

    if raw is None:
        return "there is no checkpoint.json in the folder"
    try:
        data = json.loads(raw)
        messages = data.get("messages") or []
        last = messages[-1].get("role") if messages and isinstance(messages[-1], dict) else None
        return (f"checkpoint.json holds turns={data.get('turns')}, {_pending_words(data.get('pendingToolUse'))}, "
                f"{len(messages)} messages"
                + (f", the last from the {last}" if last else ""))
    except (ValueError, RecursionError, AttributeError, TypeError):
        return f"checkpoint.json holds {len(raw)} bytes that are not a JSON object"


def _stopped_early(returned: dict, turns: int) -> bool:
    """The run ended before the task did: fewer tool results than the task makes, and the last
    message is not an assistant answer without tool calls."""
    count = returned.get("turns")
    messages = returned.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    answered = isinstance(last, dict) and last.get("role") == "assistant" and not tool_use_blocks(last.get("content"))
    return isinstance(count, int) and not isinstance(count, bool) and count < turns and not answered


def finished_problem(returned: object, on_disk: str, turns: int, turns_words: str,
                     pending: bool = True) -> "str | None":
    """What is wrong with the state an uncrashed run returned, told as the kit tells a crash (what
    happened, on disk, what is wrong, what resume would run into, a question), or None.

    ``turns``: the tool results the task records; ``turns_words`` says why, in the level's terms.
    ``pending``: whether the level's state keeps pendingToolUse to check."""
    return finished_failure(returned, on_disk, turns, turns_words, pending)[0]


def finished_failure(returned: object, on_disk: str, turns: int, turns_words: str,
                     pending: bool = True, rerun: str = "") -> "tuple[str | None, list]":
    """:func:`finished_problem`, with the causes it names (keys of grader.engine.invariants.CAUSES),
    so the nudge and the next hint follow them; ``rerun`` (a command) goes where a crash's story has it."""
    causes: list = []
    if not isinstance(returned, dict):
        what = "run_agent returned None" if returned is None else f"run_agent returned a {type(returned).__name__}"
        wrong = "run_agent hands back the final state, the same six fields it saved last"
        resume = "the caller has no answer to show and no state to compare with the file"
        question = "Does every way out of run_agent end with `return state`, after the final save?"
    elif _stopped_early(returned, turns):
        count = returned.get("turns")
        what = (f"it returned after {_short_json(count, 20)} of the task's {turns} tool calls, with the model "
                "still asking for tools: the last message of the state it returned is not the model's final answer")
        wrong = "the loop goes on until the model answers without asking for a tool (stop_reason 'end_turn')"
        resume = ("the file says the task is still in progress, so a resume would carry on a task this run "
                  "reported as finished")
        question = "What ends your loop? Does every way out of run_agent come after the model's final answer?"
        causes = ["stopped-early"]
    elif returned.get("turns") != turns:
        what = f"the state it returned says turns={_short_json(returned.get('turns'), 20)}"
        wrong = f"{turns_words}, so `turns` ends at {turns}"
        resume = "the count carried across a crash would be off, and a turn cap would stop too early or too late"
        question = "Where does `turns` go up, and does it go up once for each tool result recorded?"
    elif pending and returned.get("pendingToolUse"):
        what = f"the state it returned still has {_pending_words(returned.get('pendingToolUse'))}"
        wrong = "once the model has given its final answer no call is in flight, so pendingToolUse is None"
        several = isinstance(returned.get("pendingToolUse"), list) and len(returned["pendingToolUse"]) > 1
        resume = ("from a file like this, a resume would take " + ("those calls for ones" if several else
                  "that call for one") + " the crash cut off, and run " + ("them" if several else "it") + " again")
        question = "After a tool's result is appended, where do you set pendingToolUse back to None?"
        causes = ["pending-not-cleared"]
    else:
        messages = returned.get("messages")
        last = messages[-1] if isinstance(messages, list) and messages else None
        role = last.get("role") if isinstance(last, dict) else None
        if role == "assistant":
            return None, []
        what = ("the state it returned has no messages" if last is None
                else f"the last message of the state it returned is from the {role}")
        wrong = "the task ends on the model's final answer, so the last message is the assistant's"
        resume = "a resume would call the model again for an answer it had already given"
        question = "Is the model's final answer appended to `messages` before the loop saves and returns?"
    return "\n".join([f"The loop ran to the end without a crash, but {what}.",
                      f"  On disk after the run: {on_disk}.",
                      f"  What is wrong: {wrong}.",
                      f"  What resume would run into: {resume}.",
                      *([f"  Re-run just this check: {rerun}"] if rerun else []),
                      "", question]), causes

