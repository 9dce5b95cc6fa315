"""Every check a level can fail, declared once: its id, what holds, and how each face shows it.

Checks are namespaced, because two levels may use one id for different rules:

- ``loop``: the crash engine's invariants (:data:`grader.engine.invariants.INVARIANTS`), used by the
  levels whose loop is crashed at every point (2, 3, 5, 6). Their words stay in the engine, which
  must not import the levels; the words a face shows are added here.
- ``fields``: level 1's checks, one per protocol field and three for the loader.
- ``resume``: level 4's checks of a resume run from every crash state.

A level plug-in (:mod:`grader.levels.interface`) names its namespace. Everything that shows a check
reads it from here: the tests (the ids they record when they fail), the crash matrix (cell words and
the legend), the pictures (which colour a crash state gets) and the class-wide report (what each id
guards).

A failing test records the ids it tripped as data (:func:`qualified` strings in the pytest
``user_properties`` entry :data:`PROPERTY`); reports read them from there, never from the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from grader.engine.invariants import CAUSES, INVARIANTS

__all__ = ["Check", "PROPERTY", "PICTURE_OUTCOMES", "cause_words", "causes", "check", "checks", "declare",
           "declare_causes", "legend", "legend_for", "namespaces", "qualified", "split", "words"]

PROPERTY = "crashcourse_checks"   # the user_properties key a failing test records its check ids under


@dataclass(frozen=True)
class Check:
    """One check: ``words`` say what holds when it passes.

    ``cell`` is the word a crash-matrix cell shows when it fails ("" where the face works it out from
    the crash state, as for PARSE); ``row`` labels its own matrix row (level 1's checks have one each);
    ``legend`` explains each cell word it can show, in the order the legend lists them; ``picture`` is
    the key of :data:`PICTURE_OUTCOMES` a failing crash state is drawn in ("" = worked out, or other).
    """

    namespace: str
    id: str
    words: str
    cell: str = ""
    row: str = ""
    legend: tuple = ()
    picture: str = ""

    @property
    def qualified(self) -> str:
        return qualified(self.namespace, self.id)


def _loop(check_id: str, cell: str = "", legend: tuple = (), picture: str = "") -> Check:
    return Check("loop", check_id, INVARIANTS[check_id], cell=cell, legend=legend, picture=picture)


# Declared in the order the crash-matrix legend lists their words.
_LOOP = (
    _loop("PARSE", legend=(
        ("no file", "no checkpoint.json although a save had finished (PARSE)"),
        ("empty file", "checkpoint.json is there but holds 0 bytes (PARSE)"),
        ("torn file", "checkpoint.json stops part-way through the JSON: resume cannot read it (PARSE)")),
        picture="torn"),
    _loop("FIELDS", "wrong fields", (
        ("wrong fields", "the six fields are not all there, or have the wrong type or version (FIELDS)"),)),
    _loop("WHOLE", legend=(
        ("older save", "the file is an earlier save than the last one that finished (WHOLE)"),
        ("mixed save", "the file matches no state the loop saved (WHOLE)"))),
    _loop("TRACE", "untraced tool call", (
        ("untraced tool call", "a tool had started and the file does not mention it (TRACE)"),), picture="untraced"),
    _loop("PAIRING", "unpaired tool call", (
        ("unpaired tool call", "pendingToolUse and the last tool_use disagree, or a result is missing (PAIRING)"),)),
    _loop("KEPT", "lost result", (
        ("lost result", "a tool result that had come back is missing from the file (KEPT)"),)),
    _loop("ONCE", "call run twice", (
        ("call run twice", "the loop ran one call a second time, with no crash at all (ONCE)"),)),
    _loop("FRESH", "stale pending call", (
        ("stale pending call", "the model was called while the file still said a tool was pending (FRESH)"),),
        picture="stale"),
    _loop("COUNTS", "counters off", (
        ("counters off", "turns or tokensUsed disagree with the messages on disk (COUNTS)"),), picture="counters"),
    _loop("ATOMIC-DIR", "temp file elsewhere", (
        ("temp file elsewhere", "the temp file was renamed in from another directory (ATOMIC-DIR)"),)),
    _loop("RERUN", "second run trips", (
        ("second run trips", "a run started in the folder this crash left (a temp file in it) could not save "
                             "cleanly (RERUN)"),)),
    _loop("RESUME", "bad resume", (
        ("bad resume", "resuming from this file does not end like a run that never crashed (RESUME)"),)),
    # The bytes row's cell is "bytes grow (Nx)", written by level 6's column.
    _loop("BYTES", legend=(
        ("bytes grow", "each save rewrites more than what changed, so a long task writes many times its size "
                       "(BYTES)"),)),
    _loop("DURABLE", legend=(
        ("power cut:", "after a power cut (only what was fsynced survives), the file shows the trouble named "
                       "(DURABLE)"),)),
)

_FIELDS = (
    Check("fields", "fields", "the file holds exactly the six fields", "extra or missing keys", legend=(
        ("extra or missing keys", "checkpoint.json lacks a protocol field, or carries runtime-only keys"),)),
    Check("fields", "turns", "`turns`: the turn cap across a crash", "cap overshoots", legend=(
        ("cap overshoots", "the turn count restarted at zero, so a capped task ran past its cap"),)),
    Check("fields", "tokensUsed", "`tokensUsed`: spend budget after a crash", "budget misfires", legend=(
        ("budget misfires", "the spend restarted at zero, so the spend budget tripped late or never"),)),
    Check("fields", "version", "`version`: a file from a future format", "loads it anyway", legend=(
        ("loads it anyway", "a version-2 file was read as if it were version 1"),)),
    Check("fields", "task", "`task`: resume says what it continues", "task unknown", legend=(
        ("task unknown", "resume could not say which task it was continuing"),)),
    Check("fields", "messages", "`messages`: resume continues the talk", "starts over", legend=(
        ("starts over", "resume had no conversation and ran every tool again"),)),
    Check("fields", "pendingToolUse", "`pendingToolUse`: a crash mid-tool", "crash unnoticed", legend=(
        ("crash unnoticed", "nothing on disk said a tool was cut off, so resume never answered it"),)),
    Check("fields", "load-version", "load refuses versions 0, 2, true, 1.0, none", "accepts them", legend=(
        ("accepts them", "load_checkpoint returned a file it should have refused with a CheckpointError"),)),
    Check("fields", "load-shape", "load refuses broken or partial files", "accepts them", legend=(
        ("accepts them", "load_checkpoint returned a file it should have refused with a CheckpointError"),)),
    Check("fields", "load-accepts", "load returns a good file unchanged", "refuses or alters it", legend=(
        ("refuses or alters it", "load_checkpoint failed on, or changed, a correct version-1 file"),)),
)
for _c in _FIELDS:  # level 1's matrix rows are labelled with what holds
    object.__setattr__(_c, "row", _c.words)

_RESUME = (
    Check("resume", "REFUSE", "a checkpoint resume cannot trust raises CheckpointError, calls nothing, and is left "
                              "as it was", "trusted a bad file", legend=(
        ("trusted a bad file", "resume used (or changed) a file it should have refused with CheckpointError "
                               "(REFUSE)"),)),
    Check("resume", "PAIRING", "every tool_use the model is sent is answered once, in the message right after it",
          "unanswered tool_use", legend=(
        ("unanswered tool_use", "the model was sent a tool_use with no tool_result right after it: a 400 "
                                "(PAIRING)"),)),
    Check("resume", "ONCE", "a non-idempotent tool's effect happens at most once, across the crash and the resume",
          "effect twice", legend=(("effect twice", "a non-idempotent tool ran again after the crash (ONCE)"),)),
    Check("resume", "COUNTS", "turns and tokensUsed continue from the file, so they end where an uncrashed run "
                              "ends", "counters restart", legend=(
        ("counters restart", "turns or tokensUsed did not carry on from the numbers in the file (COUNTS)"),)),
    Check("resume", "RESUME", "resuming ends in the uncrashed run's final state (a pending call may instead be "
                              "answered by an error tool_result saying it was interrupted)", "wrong ending", legend=(
        ("wrong ending", "the resumed run did not end where an uncrashed run ends (RESUME)"),)),
    Check("resume", "SAVED", "resume saves as it goes: a call is pendingToolUse on disk before it runs, the model "
                             "is sent only what is on disk, and the file ends equal to the state returned",
          "stopped saving", legend=(
        ("stopped saving", "resume ran on without keeping checkpoint.json current (SAVED)"),)),
    Check("resume", "CAP", "the turn cap counts the turns run before the crash", "cap broken", legend=(
        ("cap broken", "the turn cap did not count the turns from before the crash (CAP)"),)),
)

_CHECKS: dict = {"loop": _LOOP, "fields": _FIELDS, "resume": _RESUME}

STUCK_LEGEND = ("the code did not return in time and was stopped (or, having got stuck before, was not run "
                "again), so nothing could be checked there")
# Cell words that belong to no single check, listed after the namespace's own in the legend.
_OTHER_CELLS: dict = {
    "loop": (("+N", "that many other kinds of trouble at the same crash points (the test failures name each)"),
             ("ok", "a resume would carry on correctly"),
             ("—", "this loop does nothing at that point, so there is no crash to show")),
    "fields": (("save failed", "save_checkpoint raised, or wrote nowhere, before any resume could start"),
               ("stuck", STUCK_LEGEND)),
    "resume": (("resume raised", "resume_agent raised an exception that is not CheckpointError"),
               ("stuck", STUCK_LEGEND)),
}

# How the pictures colour a crash state: key -> (label, colour, what it means).
PICTURE_OUTCOMES = {
    "ok": ("ok", "#2ca25f", "resume finds a whole save that matches what had happened"),
    "torn": ("torn or empty file", "#d7301f", "checkpoint.json cannot be parsed (or is gone): the task is lost"),
    "untraced": ("untraced tool call", "#fd8d3c", "a tool had started but the file does not mention it"),
    "stale": ("stale pending", "#8856a7", "pendingToolUse names a call whose result is already recorded"),
    "counters": ("counters off", "#bf812d", "turns or tokensUsed disagree with the conversation"),
    "older": ("older save", "#2b8cbe", "the file is behind a save that had already completed"),
    "other": ("other problem", "#969696", "wrong fields, a mix of two saves, or a temp file elsewhere"),
}


def declare(namespace: str, new_checks: Iterable[Check], other_cells: Iterable[tuple] = ()) -> None:
    """Add a level's own namespace of checks (a level module calls this when it is imported).

    The kit's levels are declared above; a new level may declare its namespace from its own module
    instead, so adding it edits no file but its own and the manifest (CONTRIBUTING.md). Declaring a
    namespace again with the same checks is harmless (a module may be imported twice).
    """
    new_checks = tuple(new_checks)
    if any(c.namespace != namespace for c in new_checks):
        raise ValueError(f"every check declared under {namespace!r} must carry that namespace")
    if namespace in _CHECKS:
        if _CHECKS[namespace] != new_checks:
            raise ValueError(f"the check namespace {namespace!r} is already declared with other checks")
        return
    _CHECKS[namespace] = new_checks
    _OTHER_CELLS[namespace] = tuple(other_cells)


def namespaces() -> tuple:
    """Every namespace declared so far, the kit's own first."""
    return tuple(_CHECKS)


def checks(namespace: str) -> tuple:
    """The namespace's checks, in their declared order."""
    try:
        return _CHECKS[namespace]
    except KeyError:
        raise KeyError(f"no check namespace {namespace!r}; known: {', '.join(_CHECKS)}") from None


def check(namespace: str, check_id: str) -> Optional[Check]:
    return next((c for c in checks(namespace) if c.id == check_id), None)


def words(namespace: str) -> dict:
    """``{id: what holds}`` for the namespace, in order."""
    return {c.id: c.words for c in checks(namespace)}


def legend(which: Optional[Iterable[str]] = None) -> dict:
    """``{cell word: what it means}`` for the crash matrix, in the order the legend lists them:
    the namespaces ``which`` names (all when None), where the first to declare a word wins."""
    out: dict = {}
    for namespace in (namespaces() if which is None else which):
        for c in checks(namespace):
            for word, text in c.legend:
                out.setdefault(word, text)
        for word, text in _OTHER_CELLS.get(namespace, ()):
            out.setdefault(word, text)
    return out


def legend_for(drawn: Iterable[str]) -> dict:
    """The legend of a matrix whose columns belong to the namespaces ``drawn``: a word the drawn levels
    declare is explained in their words (so a level's "ok" is its own), a word none of them declares
    (the shared "stuck", "+N") in the words of the level that does; in the legend's usual order."""
    every = legend()
    own = legend(list(dict.fromkeys(drawn)))
    return {word: own.get(word, text) for word, text in every.items()}


def qualified(namespace: str, check_id: str) -> str:
    """How a check id travels as data: ``"resume/PAIRING"``."""
    return f"{namespace}/{check_id}"


def split(name: str) -> tuple[str, str]:
    """``("resume", "PAIRING")`` from ``"resume/PAIRING"``; a bare id is taken as the engine's."""
    namespace, _, check_id = name.rpartition("/")
    return (namespace or "loop"), check_id


# --- causes: why a check failed, in a learner's words ---------------------------------------------

# The engine's causes (the loop invariants') under "loop"; a level declares its own with
# declare_causes when its module is imported. A cause travels as its bare id (a test records it,
# hints.md names it), so ids are unique across namespaces.
_CAUSES: dict = {"loop": dict(CAUSES)}


def declare_causes(namespace: str, new_causes: Mapping[str, str]) -> None:
    """Add a level's causes (``{id: what went wrong, as a clause}``) under its namespace.

    A level module calls this when it is imported, beside :func:`declare`; the id is what a failing
    test records (``causes=[...]``) and what ``hints.md`` names in a ``<!-- causes: ... -->`` line.
    Declaring the same causes again is harmless; an id already declared elsewhere with other words
    is refused, since a recorded id must mean one thing."""
    for cause, text in new_causes.items():
        for namespace_, known in _CAUSES.items():
            if cause in known and known[cause] != text:
                raise ValueError(f"the cause {cause!r} is already declared by {namespace_!r} with other words")
    _CAUSES.setdefault(namespace, {}).update(new_causes)


def causes(namespace: Optional[str] = None) -> dict:
    """``{cause id: words}``: one namespace's, or every one declared so far (None)."""
    if namespace is not None:
        return dict(_CAUSES.get(namespace, {}))
    return {cause: text for known in _CAUSES.values() for cause, text in known.items()}


def cause_words(cause: str) -> str:
    """What the cause ``cause`` means, as a clause ("" when no level declared it)."""
    return next((known[cause] for known in _CAUSES.values() if cause in known), "")
