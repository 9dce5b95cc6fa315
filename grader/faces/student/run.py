"""``crashcourse run N [--live]``: runs your loop once and shows the conversation and what it left
on disk, however it ended; ``run 4`` resumes what a run left. ``--live`` uses the real Messages
API (needs the SDK and ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN; see :mod:`grader.faces.live`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from grader.engine import loader
from grader.faces import matrix
from grader.faces.student.common import STATE_DIR, folder_for, kit_manifest, level_or_say, rel, say
from grader.levels import manifest as manifest_mod
from grader.levels.interface import Drive

DEFAULT_RUN_DIR = os.path.join(STATE_DIR, "run", "checkpoints")


class RunStopped(BaseException):
    """``run --stop-at-tool K``: the run is cut off as a kill would cut it (a BaseException, so a loop's
    ``except Exception`` cannot swallow it)."""


def _show_response(response: dict) -> None:
    for block in response.get("content") or []:
        if block.get("type") == "text" and block.get("text"):
            text = block["text"].strip().replace("\n", " ")
            print(f"  model: {text[:150]}{'…' if len(text) > 150 else ''}")
        elif block.get("type") == "tool_use":
            args = json.dumps(block.get("input"))
            print(f"  model asks for {block['name']}({args[:80]}{'…' if len(args) > 80 else ''})")
        elif block.get("type") in ("thinking", "redacted_thinking"):
            print("  model thinks (a thinking block: it goes back to the API as it came)")
    if response.get("stop_reason") not in ("tool_use", "end_turn", None):
        print(f"  stop_reason: {response.get('stop_reason')}")


def _short(value: Any, width: int = 90) -> str:
    if isinstance(value, str):
        value = " ".join(value.split())  # one line, whatever the text's own line breaks
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[:width - 1] + "…"


def _last_message_words(messages: Any) -> str:
    """The last message of a checkpoint in a few words, and whether it leaves a call unanswered."""
    if not isinstance(messages, list) or not messages:
        return "no messages"
    last = messages[-1]
    if not isinstance(last, dict):
        return f"not a message: {_short(last, 60)}"
    content = last.get("content")
    if isinstance(content, str):
        return f"{last.get('role')}: {_short(content, 70)}"
    parts, calls = [], []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(f"text {_short(block.get('text', ''), 50)}")
        elif kind == "tool_use":
            parts.append(f"tool_use {block.get('name')}")
            calls.append(block.get("name"))
        elif kind == "tool_result":
            parts.append("tool_result")
        else:
            parts.append(str(kind))
    words = f"{last.get('role')}: {', '.join(parts) or 'empty'}"
    if last.get("role") == "assistant" and calls:
        words += (f" (the call to {', '.join(map(str, calls))} has no tool_result after it: the API refuses this "
                  "conversation until one is added, so a resume must answer it first)")
    return words


def _state_summary(state: Any) -> list[str]:
    if not isinstance(state, dict):
        return [f"not a checkpoint object: {_short(state, 60)}"]
    messages = state.get("messages")
    count = len(messages) if isinstance(messages, list) else "?"
    return [f"turns={state.get('turns')}, tokensUsed={state.get('tokensUsed')}, {count} messages, "
            f"pendingToolUse={_short(state.get('pendingToolUse'), 70)}",
            f"last message: {_last_message_words(messages)}"]


def describe_checkpoint(directory: Path, drive: Drive, module: Any, finished: bool = True) -> list[str]:
    """What the run left in ``directory``, in a few lines: the file (or the level's own files) and its state.

    ``finished`` says whether the loop returned: one that did should have saved, one that was
    stopped may have been stopped before its first save.
    """
    nothing = ("did run_agent save to the directory it was given?" if finished else
               "the run stopped before a first save was complete.")
    if drive.own_loader:
        # Level 6 keeps its state in files of the learner's choosing: list them, then ask the
        # learner's own loader what they add up to.
        files = sorted(p for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else []
        if not files:
            return [f"No files in {rel(directory)}: {nothing}"]
        lines = [f"Files your loop left in {rel(directory)}:"]
        lines += [f"  {p.relative_to(directory)}  ({p.stat().st_size:,} bytes)" for p in files[:12]]
        if len(files) > 12:
            lines.append(f"  … and {len(files) - 12} more")
        load = getattr(module, "load_checkpoint", None)
        if load is None:
            return lines + ["Your file has no load_checkpoint(directory), so what they hold cannot be read back."]
        try:
            state = load(str(directory))
        except Exception as exc:  # noqa: BLE001 - the learner's loader, reported as it failed
            return lines + [f"Your load_checkpoint raised {type(exc).__name__}: {exc}"]
        if state is None:
            return lines + ["Your load_checkpoint returned None: no save had completed."]
        return lines + ["What your load_checkpoint makes of them:"] + [f"  {line}" for line in _state_summary(state)]
    path = directory / "checkpoint.json"
    if not path.is_file():
        return [f"No checkpoint at {rel(path)}: {nothing}"]
    size = path.stat().st_size
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        return [f"Checkpoint left on disk: {rel(path)} ({size:,} bytes), but it is not valid JSON ({exc})."]
    return [f"Checkpoint left on disk: {rel(path)} ({size:,} bytes):"] + [f"  {line}" for line in _state_summary(data)]


def level_drive(level: manifest_mod.Level) -> Optional[Drive]:
    """How `run` drives the level's file, as its level module says (None: it cannot, or the module
    will not load; selfcheck says why)."""
    try:
        return level.plugin.drive(level)
    except Exception:  # noqa: BLE001 - a level module that will not load drives nothing
        return None


def drivable_levels() -> tuple[list[int], list[int]]:
    """The numbers of the levels `run` can drive: those whose loop it runs, and those it resumes."""
    loops: list[int] = []
    resumers: list[int] = []
    for level in kit_manifest().levels:
        drive = level_drive(level)
        if drive is not None:
            (resumers if drive.resumes else loops).append(level.number)
    return loops, resumers


def cannot_drive(level: manifest_mod.Level) -> str:
    """Why `run` does not drive this level, and which levels it does drive."""
    loops, resumers = drivable_levels()
    parts = ([f"the levels whose file is an agent loop ({', '.join(map(str, loops))})"] if loops else []) \
        + [f"level {n}'s resume" for n in resumers]
    return (f"Level {level.number}'s file has no loop to drive (it grades {level.function}); `crashcourse run` works "
            + ("on " + " and on ".join(parts) if parts else "on no level of this kit") + ".")


def _prepare_folder(directory: Path, chosen: bool) -> Optional[str]:
    """Give the run an empty folder: the kit's own is emptied; one the learner chose must be empty already."""
    if not directory.exists():
        return None
    if not directory.is_dir():
        return f"{rel(directory)} is a file, not a folder: pick another --directory."
    if not chosen:
        shutil.rmtree(directory)  # the kit's own folder: last run's files would mix with this run's
        return None
    left = sorted(p.name for p in directory.iterdir())
    if left:
        shown = ", ".join(left[:5]) + (" …" if len(left) > 5 else "")
        return (f"{rel(directory)} already holds {shown}. A run starts in "
                "an empty folder, so that what you see afterwards is this run's alone: empty it, or pick another "
                "--directory.")
    return None


def _refuse_run_options(args: argparse.Namespace) -> Optional[str]:
    if args.max_tokens < 1:
        return f"--max-tokens must be at least 1 (got {args.max_tokens}): the API refuses a request with less."
    if args.timeout <= 0:
        return f"--timeout must be more than 0 seconds (got {args.timeout:g})."
    if args.retries < 0:
        return f"--retries cannot be negative (got {args.retries})."
    if args.stop_at_tool is not None and args.stop_at_tool < 1:
        return f"--stop-at-tool counts tool calls from 1 (got {args.stop_at_tool})."
    return None


@dataclass
class _Driver:
    """What a run hands the learner's loop: the model, the tools, and (live) what to read afterwards."""

    call_model: Callable[..., dict]
    run_tool: Callable[[str, Any], str]
    tools: list
    caller: Any = None  # the LiveModel of a live run
    desk: Any = None  # the live run's TicketDesk


def _live_driver(args: argparse.Namespace, parallel: bool, filename: str) -> _Driver:
    from grader.faces import live

    caller = live.LiveModel(live.default_client(), args.model, max_tokens=args.max_tokens, parallel_tools=parallel,
                            timeout=args.timeout, retries=args.retries, on_response=_show_response)
    note = live.model_note(args.model)
    if note:
        print(note)
    print(f"Running {filename} with {args.model} over the real Messages API (a few cents at most)...")
    choice = ("tool calls in parallel allowed (no tool_choice)" if parallel else
              f"one tool call per turn (tool_choice={json.dumps(live.ONE_CALL_PER_TURN)})")
    print(f"  each request: max_tokens={args.max_tokens}, {choice}; the whole run has {args.timeout:g} s")
    desk = live.TicketDesk(seed=0 if args.seed is None else args.seed)  # the stand-in tools: as before
    return _Driver(caller, desk, live.task_tools(parallel), caller, desk)


def _scripted_driver(args: argparse.Namespace, parallel: bool, filename: str) -> _Driver:
    from grader.engine.scripted import DEFAULT_SEED, support_tickets

    seed = DEFAULT_SEED if args.seed is None else args.seed
    if parallel:
        from grader.levels.parallel_calls import parallel_tickets

        scenario = parallel_tickets(seed)  # the level's own scenario: turns of several calls at once
    else:
        scenario = support_tickets(seed)
    model = scenario.model()
    print(f"Running {filename} on the scripted model (add --live for the real API)...")

    def call_model(**kwargs: Any) -> dict:
        response = model(**kwargs)
        _show_response(response)
        return response

    return _Driver(call_model, scenario.executor(), scenario.tools)


def _why_it_stopped(exc: BaseException, args: argparse.Namespace, verb: str) -> tuple[str, int]:
    """The line that says why a run stopped early, and the exit status that goes with it."""
    from grader.faces import live

    if isinstance(exc, RunStopped):
        return (f"The run was stopped as a crash would stop it, as tool call {args.stop_at_tool} began "
                "(--stop-at-tool).", 3)
    if isinstance(exc, KeyboardInterrupt):
        return "The run was stopped (Ctrl-C).", 130
    if isinstance(exc, live.LiveError):
        return f"The run stopped: {exc}", 1
    if isinstance(exc, live.TooManyCalls):
        return f"The run stopped: {exc}.", 1
    return f"The run stopped: your {verb} raised {type(exc).__name__}: {exc}", 1


def cmd_run(args: argparse.Namespace) -> int:
    level = level_or_say(args.level)
    if level is None:
        return 2
    folder = folder_for(level, args.path)
    drive = level_drive(level)
    if drive is None:
        say(cannot_drive(level))
        return 2
    refused = _refuse_run_options(args) or _live_unavailable(args)
    if refused:
        say(refused)
        return 2
    try:
        module = matrix.load_module(folder / level.files[0], "run")
    except loader.ImportProblem as exc:
        say(str(exc))
        return 1
    directory = Path(args.directory).resolve()
    problem = _folder_problem(args, drive, directory)
    if problem:
        say(problem)
        return 2
    setup = _live_driver if args.live else _scripted_driver
    try:
        driver = setup(args, drive.several_calls, rel(folder / level.files[0]))
    except Exception as exc:  # noqa: BLE001 - the SDK could not build a client from this environment
        say(f"The live run could not start: {type(exc).__name__}: {exc}")
        return 2
    state, status = _run_once(args, drive, module, driver, directory)
    # However the run ended, what it left on disk is the point: show it.
    print()
    for line in describe_checkpoint(directory, drive, module, finished=status == 0):
        print(line)
    if isinstance(state, dict):
        print(f"{drive.function} returned turns={state.get('turns')}, tokensUsed={state.get('tokensUsed')}.")
    status = _what_the_model_did(args, drive, driver, status)
    _, resumers = drivable_levels()
    if status == 3 and resumers:
        print(f"To carry the task on from here: crashcourse run {resumers[0]}" + (" --live" if args.live else "")
              + (f" --directory {args.directory}" if args.directory != DEFAULT_RUN_DIR else ""))
    print(f"To see what a crash at each point would leave: crashcourse check {level.number}")
    return status


def _live_unavailable(args: argparse.Namespace) -> Optional[str]:
    """Why --live cannot run here (no SDK, no key), or None."""
    from grader.faces import live

    if args.live:
        try:
            live.check_available()
        except live.LiveUnavailable as exc:
            return str(exc)
    return None


def _folder_problem(args: argparse.Namespace, drive: Drive, directory: Path) -> Optional[str]:
    """A resume needs the checkpoint a run left; a run needs an empty folder (the kit's own is emptied)."""
    if not drive.resumes:
        return _prepare_folder(directory, chosen=args.directory != DEFAULT_RUN_DIR)
    if (directory / "checkpoint.json").is_file():
        return None
    loops, _ = drivable_levels()
    return (f"There is no checkpoint at {rel(directory / 'checkpoint.json')} to resume. Leave one with a run "
            f"that stops partway, e.g. `crashcourse run {loops[0] if loops else 'N'} --stop-at-tool 2` (add "
            "--live for the real API), then run this again.")


def _run_once(args: argparse.Namespace, drive: Drive, module: Any, driver: _Driver, directory: Path) -> tuple:
    """Call the level's function once, as its Drive says: ``(the state it returned, exit status)``."""
    from grader.engine.scripted import TICKET_TASK

    started = {"tools": 0}

    def execute_tool(name: str, tool_input: Any, **_: Any) -> str:
        started["tools"] += 1
        if started["tools"] == args.stop_at_tool:
            raise RunStopped()
        result = driver.run_tool(name, tool_input)
        print(f"  tool {name} -> {len(result):,} characters")
        return result

    state = None
    try:
        if drive.resumes:
            print(f"  resuming the task in {rel(directory / 'checkpoint.json')}")
            state = getattr(module, drive.function)(driver.tools, driver.call_model, execute_tool, str(directory))
        else:
            print(f"  task: {TICKET_TASK}")
            state = getattr(module, drive.function)(TICKET_TASK, driver.tools, driver.call_model, execute_tool,
                                                    str(directory))
        for table in driver.desk.published if driver.desk else []:
            print("\nThe table the model published:\n" + textwrap.indent(table.strip(), "  "))
    except (Exception, KeyboardInterrupt, RunStopped) as exc:  # noqa: BLE001 - said in one line, then the disk
        line, status = _why_it_stopped(exc, args, drive.function)
        print("\n" + line)
        return state, status
    return state, 0


def _what_the_model_did(args: argparse.Namespace, drive: Drive, driver: _Driver, status: int) -> int:
    """A live run's token counts, and status 1 when the model stopped for another reason than the end."""
    from grader.engine.checkpoint import spend
    from grader.faces import live

    last = driver.caller.last_response if driver.caller is not None else None
    if last is not None:
        # The two numbers the lesson keeps apart: how full the context was, and what the run spent.
        usage = last.get("usage") or {}
        context = sum(usage.get(k) or 0 for k in ("input_tokens", "cache_creation_input_tokens",
                                                   "cache_read_input_tokens"))
        spent = sum(spend(r) for r in driver.caller.responses)
        print(f"The last call's input was {context:,} tokens (the context's size then); all "
              f"{len(driver.caller.responses)} calls together spent {spent:,} (what tokensUsed counts).")
    if status == 0 and driver.caller is not None and not (drive.resumes and last is None):
        why = live.unfinished(last, args.max_tokens)
        if why:
            print(f"The run did not finish: {why}. The checkpoint above is what it left.")
            return 1
    return status


def register(sub: Any) -> None:
    """The ``run`` command's parser (``sub`` is the cli's subparsers, descriptions wrapped)."""
    from grader.faces import live

    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("run", help="run your loop once (scripted, or --live with the real API)",
                       description="Run your level-N loop on the course's task and show the conversation and what "
                                   "it left on disk, however the run ends. Each run starts in an empty folder. "
                                   "`run 4` resumes the checkpoint an earlier run left there (stop one partway with "
                                   "--stop-at-tool).\n\n"
                                   "With --live it talks to the real Messages API: it needs the SDK (pip install "
                                   "anthropic) and ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN. Each request carries "
                                   "the model, max_tokens, the task's tools and the conversation; levels whose loop "
                                   "answers one tool call per turn also send tool_choice "
                                   '{"type": "auto", "disable_parallel_tool_use": true}, level 5 does not.\n\n'
                                   "Exit status: 0 when the model finished the task (stop_reason end_turn); 1 when "
                                   "the run stopped early or the model stopped for another reason; 2 when the run "
                                   "could not start; 3 after --stop-at-tool; 130 after Ctrl-C.\n\n"
                                   "example:\n  crashcourse run 2\n  crashcourse run 2 --live\n"
                                   "  crashcourse run 2 --live --stop-at-tool 2; crashcourse run 4 --live",
                       formatter_class=fmt)
    p.add_argument("level", type=int, help="the level number (one whose file has run_agent, or 4 to resume)")
    p.add_argument("--live", action="store_true", help="use the real Messages API instead of the scripted model")
    p.add_argument("--model", default=os.environ.get("CRASHCOURSE_MODEL") or live.DEFAULT_MODEL,
                   help=f"model for --live (default {live.DEFAULT_MODEL}, or $CRASHCOURSE_MODEL)")
    p.add_argument("--max-tokens", type=int, default=live.DEFAULT_MAX_TOKENS, metavar="N",
                   help=f"max_tokens of each --live request, thinking included (default {live.DEFAULT_MAX_TOKENS})")
    p.add_argument("--timeout", type=float, default=live.DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds the whole --live run may take, retries included (default {live.DEFAULT_TIMEOUT:g})")
    p.add_argument("--retries", type=int, default=live.DEFAULT_RETRIES, metavar="N",
                   help="times a --live call is tried again after a 429, a 5xx or a dropped connection, within "
                        f"--timeout (default {live.DEFAULT_RETRIES})")
    p.add_argument("--stop-at-tool", type=int, metavar="K",
                   help="stop the run as a crash would, as the K-th tool call starts (for run 4 to resume)")
    p.add_argument("--directory", default=DEFAULT_RUN_DIR, metavar="DIR",
                   help="where the loop writes its checkpoint (default: the kit's own folder, emptied each run)")
    p.add_argument("--path", metavar="DIR", help="the folder holding your files (default: exercises/levelN)")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="seed of the scripted task (default: the plugin's, so the run is the one pytest and check judge)")
    p.set_defaults(handler=cmd_run)
