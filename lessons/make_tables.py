"""The lesson's crash-model and check tables, rendered from the grader's own definitions.

    python lessons/make_tables.py           # rewrite every generated table in lessons/*.md
    python lessons/make_tables.py --check   # exit 1, naming the table, if a lesson file disagrees

A generated table sits in a lesson file between ``<!-- generated: NAME -->`` and ``<!-- end -->``.
Edit the grader (or this script), never the table: ``tests/test_lesson.py`` fails when the two
disagree, so a check added to the grader cannot go missing from the lesson.

Where the rows come from:

* crash models: ``grader.engine.crash_models.MODELS`` and ``MODEL_NAMES``; the levels that use a
  model come from ``exercises/manifest.json`` (each level's ``crash_models``);
* checks: :func:`check_catalogue`, the one function that knows where check ids live today.
  When ``grader/levels/registry.py`` holds every check, only that function changes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere in the kit
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end -->)", re.S)


@dataclass(frozen=True)
class Check:
    """One check a failure can name: its id, the levels that grade it, and what it asks."""

    id: str
    levels: tuple
    words: str


def _levels():
    from grader.levels import manifest

    return manifest.load(ROOT).levels


def check_catalogue() -> list:
    """Every check the grader can name, in the order a learner meets them.

    Today the ids live in three places: level 1's resume checks (``grader.levels.fields``), the
    crash-state invariants shared by levels 2, 3, 5 and 6 (``grader.engine.invariants``), and level 4's
    resume checks (``grader.levels.resume``). Which invariant a level grades is not yet data, so the
    few that belong to one engine only are named here; the rest apply to every crash-state level.
    """
    from grader.engine.crash_models import MODELS
    from grader.engine.explore import POWER_MODELS
    from grader.engine.invariants import INVARIANTS
    from grader.levels import fields, resume

    levels = _levels()
    by_engine = {}  # the level module's last name (grader.levels.loop -> loop) -> its level numbers
    for level in levels:
        by_engine.setdefault(level.module.rsplit(".", 1)[-1], []).append(level.number)
    crash_state_levels = tuple(sorted(n for engine in ("loop", "parallel_calls", "journal")
                                      for n in by_engine.get(engine, [])))
    power_levels = tuple(level.number for level in levels if set(level.crash_models) & set(POWER_MODELS)
                         and set(level.crash_models) <= set(MODELS))
    only = {
        "DURABLE": power_levels,                       # judged only under the power-cut models
        "KEPT": tuple(by_engine.get("parallel_calls", ())),  # several results per turn
        "ONCE": tuple(by_engine.get("parallel_calls", ())),
        "BYTES": tuple(by_engine.get("journal", ())),  # a whole-run measure, not a crash state
        "RESUME": (),                                  # level 4 states its own RESUME below
    }

    rows = [Check(name, tuple(by_engine.get("fields", ())), _first_line(check.__doc__))
            for name, check in fields.LEVEL1_CHECKS.items()]
    rows += [Check(name, only.get(name, crash_state_levels), words)
             for name, words in INVARIANTS.items() if only.get(name, crash_state_levels)]
    rows += [Check(name, tuple(by_engine.get("resume", ())), words) for name, words in resume.CHECKS.items()]
    return rows


def _first_line(doc) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _cell(text: str) -> str:
    # No capital forced on the first word: it is often a name (`checkpoint.json`, `load_checkpoint`).
    text = text.strip()
    if text and not text.endswith("."):
        text += "."
    return text.replace("|", "\\|")


def _level_words(numbers) -> str:
    numbers = list(numbers)
    if len(numbers) == 1:
        return str(numbers[0])
    return ", ".join(str(n) for n in numbers[:-1]) + " and " + str(numbers[-1])


def render_crash_models() -> str:
    from grader.engine.crash_models import MODEL_NAMES, MODELS

    levels = _levels()
    lines = ["| id | the crash | levels graded under it |", "|---|---|---|"]
    for model in MODELS:
        using = [level.number for level in levels if model in level.crash_models]
        lines.append(f"| {model} | {_cell(MODEL_NAMES[model])} | {_level_words(using) if using else 'none'} |")
    return "\n".join(lines) + "\n"


def render_checks() -> str:
    lines = ["| id | level | what it checks |", "|---|---|---|"]
    for check in check_catalogue():
        lines.append(f"| `{check.id}` | {_level_words(check.levels)} | {_cell(check.words)} |")
    return "\n".join(lines) + "\n"


TABLES = {"crash-models": render_crash_models, "checks": render_checks}


def fill(text: str, tables=None) -> str:
    """``text`` with every generated table replaced by what the grader says today."""
    rendered = {}

    def replace(match):
        name = match.group("name")
        if name not in TABLES:
            raise KeyError(f"unknown generated table {name!r}; known: {', '.join(TABLES)}")
        if name not in rendered:
            rendered[name] = (tables or {}).get(name) or TABLES[name]()
        return match.group(1) + rendered[name] + match.group(4)

    return MARKER.sub(replace, text)


def lesson_files() -> list:
    return sorted(HERE.glob("*.md"))


def main(argv) -> int:
    check_only = "--check" in argv
    stale = []
    for path in lesson_files():
        text = path.read_text(encoding="utf-8")
        new = fill(text)
        if new == text:
            continue
        stale.append(path)
        if not check_only:
            path.write_text(new, encoding="utf-8")
    for path in stale:
        verb = "differs from the grader; run python lessons/make_tables.py" if check_only else "rewritten"
        print(f"{path.relative_to(ROOT)}: generated tables {verb}")
    return 1 if (check_only and stale) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
