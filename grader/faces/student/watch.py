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


def watch_loop(paths: list[Path], on_change: Callable[[], Any], *, interval: float = 0.5,
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
    event, observer = _watchdog_event(folder)

    def again() -> None:
        if clear:
            print("\033[2J\033[H", end="")
        outcome = check_level(level, folder, examples=args.examples, paint=paint)
        names = ", ".join(rel(p) for p in paths if p.exists())
        print(f"\nWatching {names} (checks {'on every save' if event else f'every {args.interval:g} s'}); "
              "Ctrl-C to stop.")
        if outcome.ok:
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
    p.add_argument("--interval", type=float, default=0.5, metavar="S", help="seconds between looks at the files")
    p.add_argument("--examples", type=int, metavar="N", help="generated conversations per property test")
    p.add_argument("--max-checks", type=int, metavar="N", help=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_watch)
