"""Everything a level module takes from the kit, in one typed place.

A level module (the one ``exercises/manifest.json`` names for a level) imports from the kit only
this module: ``from grader.levels.api import ...``. ``tests/test_level_api.py`` fails when a level
module imports anything else of ``grader``, and when a name here has no type hints. What a level
may use is therefore listed once, below, grouped by what it is for; a change to one of these
names is a change to every level, and is made here on purpose.

- **The level itself**: :class:`LevelModule` (subclass it, set ``LEVEL``; or
  :class:`NamedChecksLevel` for a level judged by named checks), :class:`Drive`, the manifest's
  :class:`Level`, and the column a level draws (:class:`Column`, :class:`ColumnMeaning`,
  :class:`NamedChecks`, :func:`column`, :func:`failed_column`, :func:`load_module`).
- **Its checks and causes**: :class:`Check`, :func:`declare` (a namespace of checks and the cell
  words of its matrix), :func:`declare_causes` (why a check failed, in a learner's words),
  :func:`checks`, :func:`words`, :func:`qualified`.
- **Running the learner's code**: :func:`time_limit`, :func:`loop_timeout`, :class:`LoopTimeout`,
  :class:`Hang`, :func:`hang_mark`, :func:`hangs_since`, :func:`working_in`, :func:`scratch_root`,
  :func:`folder_in`, :func:`parent_exists`, :func:`short_traceback`, :func:`free_fsync`, and laying
  out a crash state's files safely (:class:`Layout`, :func:`lay_out`, :func:`check_names`), and
  running one resume or load of a crash state in a process that never saw the run
  (:func:`run_fresh`; several side by side, answered in order, with :func:`run_fresh_each`,
  :class:`FreshCall` and :func:`fresh_width`; :class:`FreshProcessDied`, :func:`served_here`; after a crash only the files
  are left).
- **Recording and crashing a loop**: :func:`explore_loop`, :func:`record_run`, :func:`recorded_run`,
  :func:`check_trace`, :func:`rerun_after_crashes`, :func:`crash_states`, :func:`windows_for`,
  :class:`Exploration`, :class:`Violation`, :func:`at_point`, :func:`describe_bytes`, and the
  invariants (:func:`check`, :func:`parse`, :func:`parse_cached`, :func:`shape_finding`,
  :func:`no_checkpoint`, :class:`Finding`, :class:`Window`).
- **The checkpoint protocol and the scripted model**: the ``checkpoint`` helpers and the
  ``scripted`` scenario (:class:`Scenario`, :func:`support_tickets`, :func:`from_turns`, ...), and
  :func:`register_kind` with the strategies to add a kind of generated conversation.
"""

from __future__ import annotations

import typing as _typing

from grader.engine import checkpoint as _checkpoint
from grader.engine import crash_models as _crash_models
from grader.engine import explore as _explore
from grader.engine import scripted as _scripted
from grader.engine.checkpoint import (clone, compute_reference_saves, exactly_saved, field_problems, initial_state,
                                      pending_record, plain_pickle, read_or_none, reference_saves, run_reference,
                                      snapshot, spend, tool_result_ids, tool_result_message, tool_use_blocks)
from grader.engine.crash_models import crash_states
from grader.engine.explore import (Exploration, Violation, at_point, check_trace, crossed_file_systems,
                                   describe_bytes, explore_loop, folder_in, parent_exists, record_run, recorded_run, rerun_after_crashes,
                                   scratch_root, short_traceback, windows_for, working_in)
from grader.engine.forwarded import free_fsync
from grader.engine.fresh import Call as FreshCall, FreshProcessDied, run_fresh, run_fresh_each, served_here
from grader.engine.fresh import width as fresh_width
from grader.engine.fresh import namespace as learner_namespace
from grader.engine.hangs import Hang, KnownHang, LoopTimeout, hang_mark, hangs_since, loop_timeout, time_limit
from grader.engine.invariants import Finding, Window, check, no_checkpoint, parse, parse_cached, shape_finding
from grader.engine.layout import Layout, UnsafeName, check_names, lay_out
from grader.engine.recorder import Recorder, active as active_recorder, namespaces_of
from grader.engine.scripted import (Scenario, ScriptedModel, ScriptedModelError, ScriptedTools, ScriptedToolError,
                                    assistant_turns, check_messages, from_turns, random_tool_id, random_usage,
                                    support_tickets)
from grader.levels import columns as _columns
from grader.levels.columns import (Column, ColumnMeaning, NamedChecks, column, failed_column, load_module, models_line,
                                   row_key, share_key, shared, tests_and_column_share)
from grader.levels.interface import Drive, LevelModule
from grader.levels.manifest import Level
from grader.levels.named import NamedChecksLevel
from grader.levels.registry import Check, checks, declare, declare_causes, qualified, words

# The words of a matrix cell that are no check's: nothing wrong, no such point, code that got stuck.
OK: str = _columns.OK
NOWHERE: str = _columns.NOWHERE
STUCK: str = _columns.STUCK
# The protocol's file and fields, and the crash models by name.
CHECKPOINT_NAME: str = _checkpoint.CHECKPOINT_NAME
FIELDS: tuple = _checkpoint.FIELDS
MODEL_NAMES: dict = _crash_models.MODEL_NAMES
# The folders a level hands the loop instead of "checkpoints", so code that ignores `directory` is caught.
NESTED_FOLDER: str = _explore.NESTED_FOLDER
ABSOLUTE_FOLDER: str = _explore.ABSOLUTE_FOLDER
# The course's task, its tools and the ticket data the scripted model draws from.
TICKET_TASK: str = _scripted.TICKET_TASK
TICKET_TOOLS: list = _scripted.TICKET_TOOLS
ISSUE_TYPES: list = _scripted.ISSUE_TYPES
NON_IDEMPOTENT_TOOLS: frozenset = _scripted.NON_IDEMPOTENT_TOOLS

# Generated conversations (register_kind, and the strategies to draw a kind of the level's own from)
# come from grader.engine.conversations when first asked for: they load Hypothesis, a fifth of a second
# and a third of a process's memory, which a level that draws no conversations, and the process each
# crash state is loaded in, do without.
_GENERATED = ("register_kind", "result_strategy", "usage_strategy", "text_strategy", "tool_input_strategy")
if _typing.TYPE_CHECKING:  # what __getattr__ gives, for readers and type checkers
    from grader.engine.conversations import (register_kind, result_strategy, text_strategy, tool_input_strategy,
                                             usage_strategy)


def __getattr__(name: str):
    if name in _GENERATED:
        from grader.engine import conversations
        return getattr(conversations, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    # the level and its column
    "LevelModule", "NamedChecksLevel", "Drive", "Level", "Column", "ColumnMeaning", "NamedChecks", "column", "failed_column", "load_module",
    "models_line", "row_key", "NOWHERE", "OK", "STUCK", "shared", "share_key", "tests_and_column_share",
    # checks and causes
    "Check", "declare", "declare_causes", "checks", "words", "qualified",
    # running the learner's code
    "time_limit", "loop_timeout", "LoopTimeout", "Hang", "hang_mark", "hangs_since", "working_in", "scratch_root",
    "folder_in", "parent_exists", "short_traceback", "free_fsync", "active_recorder", "Recorder", "namespaces_of",
    "KnownHang",
    # a process that never saw the run, for each resume or load of a crash state
    "run_fresh", "run_fresh_each", "FreshCall", "fresh_width", "FreshProcessDied", "served_here", "learner_namespace",
    # laying out a crash state's files safely (plain names inside one folder)
    "Layout", "UnsafeName", "check_names", "lay_out",
    # recording and crashing a loop
    "explore_loop", "record_run", "recorded_run", "check_trace", "rerun_after_crashes", "crash_states",
    "windows_for", "Exploration", "Violation", "at_point", "describe_bytes", "MODEL_NAMES", "NESTED_FOLDER",
    "ABSOLUTE_FOLDER", "crossed_file_systems",
    # the invariants
    "check", "parse", "parse_cached", "shape_finding", "no_checkpoint", "Finding", "Window",
    # the checkpoint protocol
    "CHECKPOINT_NAME", "FIELDS", "clone", "compute_reference_saves", "exactly_saved", "field_problems",
    "initial_state", "pending_record", "plain_pickle", "read_or_none", "reference_saves", "run_reference", "snapshot",
    "spend", "tool_result_ids", "tool_result_message", "tool_use_blocks",
    # the scripted model and generated conversations
    "Scenario", "ScriptedModel", "ScriptedModelError", "ScriptedToolError", "ScriptedTools", "assistant_turns",
    "check_messages", "from_turns", "random_tool_id", "random_usage", "support_tickets", "TICKET_TASK",
    "TICKET_TOOLS", "ISSUE_TYPES", "NON_IDEMPOTENT_TOOLS", "register_kind", "result_strategy", "text_strategy",
    "tool_input_strategy", "usage_strategy",
]
