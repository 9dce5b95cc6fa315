"""``crashcourse watch [N]``: runs check again every time you save one of the level's files.
Ctrl-C stops it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from grader.faces import matrix
from grader.faces.student.check import check_level
from grader.faces.student.common import files_signature, folder_for, kit_manifest, read_state, rel, say
from grader.levels import manifest as manifest_mod


def _watchdog_event(folder: Path) -> Any:
    """A threading.Event set on any change in ``folder`` if watchdog is installed, else None (poll only)."""
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError:
        return None, None
    import threading

    event = threading.Event()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, _: Any) -> None:
            event.set()

    observer = Observer()
    observer.schedule(Handler(), str(folder), recursive=False)
    observer.daemon = True
    observer.start()
    return event, observer


def watch_loop(paths: list[Path], on_change: Callable[[], Any], *, interval: float = 0.1,
               max_checks: Optional[int] = None, event: Any = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Call ``on_change()`` once, then again whenever a file in ``paths`` changes (mtime or size).

    Polls every ``interval`` seconds; if ``event`` (a threading.Event set by a file watcher) is given,
    it wakes up sooner. Stops after ``max_checks`` calls (for tests) or on Ctrl-C. Returns the checks made.
    """
    checks = 0
    last = files_signature(paths)
    try:
        on_change()
        checks += 1
        while max_checks is None or checks < max_checks:
            if event is not None:
                event.wait(interval)
                event.clear()
            else:
                sleep(interval)
            now = files_signature(paths)
            if now != last:
                last = now
                on_change()
                checks += 1
    except KeyboardInterrupt:
        print("\nStopped watching.")
    return checks


# Standard modules a learner's checkpoint code often imports: loaded in the fork servers, so a fresh
# child (hundreds per check on levels 4 and 6) does not import them again each time.
_OFTEN_IMPORTED = ("json", "uuid", "tempfile", "pathlib", "hashlib", "shutil", "dataclasses", "datetime", "typing",
                   "copy", "random", "glob", "struct", "zlib", "base64", "contextlib", "functools", "itertools",
                   "collections", "enum", "threading", "errno", "stat", "fcntl", "secrets", "string", "traceback")


def start_fresh_servers(level: manifest_mod.Level) -> None:
    """Start the fork servers that every resume or load of a crash state is forked from, before pytest
    and Hypothesis are imported here (:func:`warm_up`): a fork costs in proportion to the memory it
    copies, and a check of level 4 or 6 forks hundreds. They load first what those children run: the
    level's module (its functions run there) and the standard modules a learner's file often imports.
    Every check, a child forked from this process, hands its crash states to them."""
    import importlib

    from grader.engine import fresh

    for name in (level.module, *_OFTEN_IMPORTED):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a head start only: a child imports what is missing itself
            pass
    fresh.start()


def warm_up(level: manifest_mod.Level, folder: Path) -> None:
    """Import here what every check of ``level`` needs: pytest, its plugins (Hypothesis's, the kit's) and
    the level's test modules, by collecting the tests once (collecting imports none of the learner's
    files). Each check is then a child forked from this process, which starts with all of it loaded."""
    import pytest

    from grader.faces.student import testrun

    here, saved = os.getcwd(), (os.dup(1), os.dup(2))
    fd = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        os.chdir(level.root)
        pytest.main(testrun.collect_args(level, folder))
    except BaseException:  # noqa: BLE001 - warming up is only a head start: each check runs whatever happens here
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.chdir(here)
        for target, saved_fd in zip((1, 2), saved):
            os.dup2(saved_fd, target)
            os.close(saved_fd)


def check_in_a_child(level: manifest_mod.Level, folder: Path, **options: Any) -> bool:
    """``check_level`` in a child forked from this process (which never imports the learner's files), so
    nothing of the learner's code, run in one check, is still in memory in the next. True if it passed."""
    if not hasattr(os, "fork"):
        return check_level(level, folder, **options).ok
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if check_level(level, folder, here=True, **options).ok else 1
        except BaseException:  # noqa: BLE001 - said on the screen, as a crash of check would be
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    except KeyboardInterrupt:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _pick_watch_level(kit: manifest_mod.Manifest) -> Optional[manifest_mod.Level]:
    status = read_state("status.json")
    existing = [lv for lv in kit.existing() if lv.test_paths()]
    for level in existing:
        if not status.get(str(level.number), {}).get("passed"):
            return level
    return existing[0] if existing else None


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        kit = kit_manifest()
        level = kit.require(args.level) if args.level is not None else _pick_watch_level(kit)
    except manifest_mod.ManifestError as exc:
        say(str(exc))
        return 2
    if level is None:
        say("There is no level with tests to watch yet.")
        return 2
    folder = folder_for(level, args.path)
    paths = level.watched_files(folder)
    paint = matrix.Painter()
    clear = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    start_fresh_servers(level)  # before pytest is imported here: smaller, so cheaper to fork from
    warm_up(level, folder)  # before any thread starts: each check forks from here
    event, observer = _watchdog_event(folder)

    def again() -> None:
        if clear:
            print("\033[2J\033[H", end="")
        ok = check_in_a_child(level, folder, examples=args.examples, paint=paint)
        names = ", ".join(rel(p) for p in paths if p.exists())
        print(f"\nWatching {names} (checks {'on every save' if event else f'every {args.interval:g} s'}); "
              "Ctrl-C to stop.", flush=True)
        if ok:
            nxt = next((lv for lv in kit.existing() if lv.number > level.number), None)
            if nxt:
                print(f"Next: crashcourse watch {nxt.number}  ({nxt.title})")

    try:
        watch_loop(paths, again, interval=args.interval, max_checks=args.max_checks, event=event)
    finally:
        if observer is not None:
            observer.stop()
    return 0


def register(sub: Any) -> None:
    """The ``watch`` command's parser (``sub`` is the cli's subparsers, descriptions wrapped)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("watch", help="check again every time you save (Ctrl-C stops)",
                       description="Runs `crashcourse check` on the level, then again whenever one of its files "
                                   "changes. Without N, watches the first level that does not pass yet.",
                       formatter_class=fmt)
    p.add_argument("level", nargs="?", type=int, help="the level number (default: the first not passing yet)")
    p.add_argument("--path", metavar="DIR", help="the folder holding your files (default: exercises/levelN)")
    p.add_argument("--interval", type=float, default=0.1, metavar="S", help="seconds between looks at the files")
    p.add_argument("--examples", type=int, metavar="N", help="generated conversations per property test")
    p.add_argument("--max-checks", type=int, metavar="N", help=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_watch)
