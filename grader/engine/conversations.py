"""Generated conversations: a Hypothesis strategy of scripted scenarios.

Each drawn :class:`~grader.engine.scripted.Scenario` has 0 to 12 turns, unicode everywhere, tool inputs of
every JSON type, results from nothing to 9000 characters (tens of KiB once JSON escapes them, so one
checkpoint spans many 8 KiB buffer flushes), and usage with and without the cache fields. Drawing is
deterministic under a seed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import unicodedata
from pathlib import Path
from typing import Any, Callable, Optional

from hypothesis import strategies as st

from grader.atomicfile import write_atomic
from grader.engine.scripted import Scenario, from_turns

text_strategy = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10 ** 12, 10 ** 12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | text_strategy,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text_strategy, children, max_size=4),
    max_leaves=12,
)
tool_input_strategy = st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12), _json, max_size=5)


@st.composite
def result_strategy(draw: st.DrawFn) -> str:
    size = draw(st.sampled_from([0, 1, 40, 700, 5000, 9000]))
    unit = draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8))
    return (unit * (size // len(unit) + 1))[:size] if size else ""


@st.composite
def usage_strategy(draw: st.DrawFn) -> dict:
    usage = {"input_tokens": draw(st.integers(0, 200000)), "output_tokens": draw(st.integers(0, 8000))}
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        if draw(st.booleans()):
            usage[key] = draw(st.integers(0, 100000))
    return usage


@st.composite
def conversations(draw: st.DrawFn, min_turns: int = 0, max_turns: int = 12) -> Scenario:
    """A strategy for scenarios: ``@given(conversations())``."""
    n = draw(st.integers(min_turns, max_turns))
    names = draw(st.lists(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=16), min_size=1, max_size=4,
                          unique=True))
    turns = [(draw(st.sampled_from(names)), draw(tool_input_strategy), draw(result_strategy())) for _ in range(n)]
    usages = [draw(usage_strategy()) for _ in range(n + 1)]
    task = draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80))
    final = draw(text_strategy)
    seed = draw(st.integers(0, 2 ** 31))
    scenario = from_turns(task, turns, final or "Done.", seed=seed, usages=usages,
                          name=f"a generated conversation of {n} turns")
    json.dumps(scenario.responses)  # every drawn value must survive a JSON round trip
    return scenario


_DRAWN: dict = {}


# Strategies by kind. A level with its own shape of conversation registers it (level 5's
# parallel tool calls: grader.levels.parallel_calls registers "parallel" when it is imported).
KINDS: dict = {}


def register_kind(kind: str, strategy: Callable[..., Any]) -> None:
    """Let :func:`generated` draw ``kind`` from ``strategy(**keywords)``."""
    KINDS[kind] = strategy


def _strategy(kind: str, kwargs: dict):
    if kind not in KINDS:
        raise KeyError(f"no conversations of kind {kind!r}: import the level that registers them "
                       f"(known: {', '.join(sorted(KINDS))})")
    return KINDS[kind](**kwargs)


@contextlib.contextmanager
def _without_local_constants():
    """Draw without Hypothesis's habit of mixing in constants from the source of loaded modules.

    Recent Hypothesis versions sometimes return a literal found in any local module already
    imported. Which modules those are differs between ``pytest exercises/level2`` (the student's
    file is loaded by then) and ``crashcourse grade`` (it is not), so the same seed would give
    different conversations, and a failure's re-run command would not reproduce it.
    """
    try:
        from hypothesis.internal.conjecture.providers import HypothesisProvider
    except ImportError:  # an older Hypothesis, which does not do this
        yield
        return
    original = HypothesisProvider.__dict__.get("_maybe_draw_constant")
    if original is None:
        yield
        return
    HypothesisProvider._maybe_draw_constant = lambda self, *args, **kwargs: None
    try:
        yield
    finally:
        HypothesisProvider._maybe_draw_constant = original


def generated(seed: int, count: int, kind: str = "conversations", **kwargs) -> list:
    """``count`` scenarios drawn from the strategy under ``seed``: the same list every time.

    Drawing is the slow part of a property test, so each list is drawn once per process and
    kept; the grader draws them before it forks one judge per submission, so none of them pays
    again. ``kind`` is ``"conversations"`` or ``"parallel"`` (several tools per turn).
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    key = (kind, seed, count, tuple(sorted(kwargs.items())))
    if key not in _DRAWN:
        cached = _from_disk(key)
        if cached is not None:
            _DRAWN[key] = cached
            return cached
        drawn: list = []

        @hypothesis_seed(seed)
        @settings(max_examples=count, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(_strategy(kind, kwargs))
        def collect(scenario: Scenario) -> None:
            drawn.append(scenario)

        with _without_local_constants():
            collect()
        _DRAWN[key] = drawn
        _to_disk(key, drawn)
    return _DRAWN[key]


# -- the draws, kept on disk between runs -----------------------------------------------------------
#
# A learner re-runs `pytest exercises/levelN` (or `crashcourse watch`) many times with the same seed,
# and drawing costs a good part of a second each time. The lists are kept in the user's cache folder,
# keyed by everything that could change what is drawn. A file that does not parse, or does not hold
# scenarios of the right shape, is ignored and drawn again. `crashcourse grade` turns the cache off
# (CRASHCOURSE_DRAW_CACHE=off): a submission under grading runs as the same user and could write it.

CACHE_ENV = "CRASHCOURSE_DRAW_CACHE"


def cache_dir() -> Optional[Path]:
    """Where drawn conversations are kept, or None when the cache is off."""
    setting = os.environ.get(CACHE_ENV, "")
    if setting.lower() in ("0", "off", "no", "false"):
        return None
    if setting:
        return Path(setting)
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = str(Path.home() / "Library" / "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crashcourse" / "conversations"


def _cache_file(key: tuple) -> Optional[Path]:
    folder = cache_dir()
    if folder is None:
        return None
    import hypothesis

    import grader
    from grader.engine import scripted

    # The strategies' own source is part of the key: editing them must never reuse an old draw.
    sources = [Path(__file__), Path(scripted.__file__)]
    strategy = KINDS.get(key[0])
    if strategy is None:
        return None  # not registered: generated() says so when it tries to draw
    module = sys.modules.get(getattr(strategy, "__module__", "") or "")
    if module is not None and getattr(module, "__file__", None):
        sources.append(Path(module.__file__))
    digest = hashlib.blake2b(repr((key, hypothesis.__version__, grader.__version__, sys.version_info[:2],
                                   unicodedata.unidata_version)).encode(), digest_size=16)
    for source in sources:
        digest.update(source.read_bytes())
    return folder / f"{key[0]}-{key[1]}-{key[2]}-{digest.hexdigest()}.json"


def _as_json(scenario: Scenario) -> dict:
    return {"name": scenario.name, "task": scenario.task, "tools": scenario.tools, "responses": scenario.responses,
            "results": scenario.results, "seed": scenario.seed, "non_idempotent": sorted(scenario.non_idempotent)}


def _from_json(data: Any) -> Scenario:
    if not isinstance(data, dict) or set(data) != {"name", "task", "tools", "responses", "results", "seed",
                                                   "non_idempotent"}:
        raise ValueError("not a scenario")
    lists = ("tools", "responses", "results", "non_idempotent")
    if not all(isinstance(data[k], list) for k in lists) or not isinstance(data["seed"], int) \
            or not isinstance(data["name"], str) or not isinstance(data["task"], str) \
            or not all(isinstance(r, str) for r in data["results"]) \
            or not all(isinstance(r, dict) and isinstance(r.get("content"), list) for r in data["responses"]):
        raise ValueError("not a scenario")
    return Scenario(data["name"], data["task"], data["tools"], data["responses"], data["results"], data["seed"],
                    frozenset(data["non_idempotent"]))


def _from_disk(key: tuple) -> Optional[list]:
    try:
        path = _cache_file(key)
        if path is None:
            return None
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, list) or len(raw) != key[2]:
            return None
        return [_from_json(item) for item in raw]
    except (OSError, ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return None  # missing, unreadable or not ours: draw again (and rewrite it)


def _to_disk(key: tuple, drawn: list) -> None:
    try:
        path = _cache_file(key)
        if path is None:
            return
        text = json.dumps([_as_json(s) for s in drawn], ensure_ascii=True)
        # repr, not ==: -0.0 == 0.0 and 1 == 1.0, but a learner's loop may write them differently.
        if repr([_as_json(_from_json(item)) for item in json.loads(text)]) != repr([_as_json(s) for s in drawn]):
            return  # something did not survive the round trip: keep drawing it each run instead
        path.parent.mkdir(parents=True, exist_ok=True)
        # A reader sees the old file or the new one, never half of it. Not durable: after a power
        # cut the worst case is drawing once more.
        write_atomic(path, text, durable=False)
    except (OSError, ValueError, RecursionError, TypeError):
        pass  # a read-only home only costs the time to draw again


def drawn(kind: str) -> list:
    """Every scenario of ``kind`` drawn so far in this process."""
    return [scenario for key, scenarios in _DRAWN.items() if key[0] == kind for scenario in scenarios]


def warm(seed: int, count: int, draws: Optional[list] = None) -> None:
    """Draw the lists the levels' property tests ask for, ahead of time (see :func:`generated`).

    ``draws``: ``(kind, keywords)`` for each list wanted (see :func:`draws_in`); all the levels'
    lists when None.
    """
    if draws is None:
        draws = [("conversations", {}), ("conversations", {"max_turns": 4})] + \
            [(kind, {}) for kind in KINDS if kind != "conversations"]
    for kind, keywords in draws:
        generated(seed, count, kind, **keywords)


def draws_in(paths: list) -> Optional[list]:
    """The ``generated(...)`` lists these test files ask for, as ``(kind, keywords)``; None if a call
    is not plain enough to read (then every list is drawn)."""
    import ast

    found = []
    for path in paths:
        for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or getattr(node.func, "id", getattr(node.func, "attr", None)) \
                    != "generated":
                continue
            kind, keywords = "conversations", {}
            extra = node.args[2:]
            if len(extra) > 1 or (extra and not isinstance(extra[0], ast.Constant)):
                return None
            if extra:
                kind = extra[0].value
            for keyword in node.keywords:
                if keyword.arg is None or not isinstance(keyword.value, ast.Constant):
                    return None
                if keyword.arg == "kind":
                    kind = keyword.value.value
                else:
                    keywords[keyword.arg] = keyword.value.value
            if (kind, keywords) not in found:
                found.append((kind, keywords))
    return found


register_kind("conversations", conversations)
