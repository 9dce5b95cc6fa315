"""The cause table: for each submission, the first test it fails, the cause that failure records
(as data), and the words its message must (and must not) use.

A loop can break one invariant for several reasons (an older save is a missing save point B in one
loop and a missing final save in another); the message, the closing question and the next hint
must name the reason this code has. Each row runs the level's own tests on the submission in this
process, as `pytest exercises/levelN --submission DIR` would, stopping at the first failure, and
reads the outcome the kit's collector keeps (the causes come from user_properties, not the text).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.faces.student import check, hint, testrun
from grader.grading.outcomes import Outcomes
from grader.levels import manifest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


@dataclass
class Row:
    level: int
    submission: str            # a corpus file (copied in as the level's file), or a folder of the repo
    first: str                 # the first failing test
    cause: str                 # the cause it records first ("" = none)
    names: tuple               # words the failure must contain
    not_names: tuple = ()      # words it must not contain (a wrong cause, a misleading file name)
    hint_task: int = 0         # the task `crashcourse hint` leads to (0: the first failing task)
    hint: str = ""             # words the first hint must hold (a question about this cause, not the task's)
    also: dict = field(default_factory=dict)   # later tests of the same run: {test: (cause, names, not_names)}


TEMP_FILE_QUESTION = "where the new bytes go"

ROWS = [
    # A loop that returns before the model's final answer: no crash invariant breaks, task 1 says why.
    *[Row(level, f"stops_early/level{level}_agent.py", first, "stopped-early",
          ("returned after", "still asking for tools", "What ends your loop?"), ("IndexError", "grader/engine", "turns go up"),
          hint="does it still ask for a tool?")
      for level, first in ((2, "test_the_loop_still_finishes_the_task"),
                           (3, "test_a_killed_process_still_leaves_a_whole_current_file"),
                           (5, "test_the_loop_still_finishes_the_task"),
                           (6, "test_the_loop_finishes_and_the_loader_reads_the_final_state"))],
    Row(2, "level2/w26_saves_only_at_a_atomically.py", "test_the_loop_still_finishes_the_task", "no-final-save",
        ("final answer was never saved", "save point A"), (TEMP_FILE_QUESTION,),
        also={"test_a_crash_mid_save_never_leaves_half_a_file": (
            "no-save-b", ("Nothing was saved after the tool returned (save point B)", "Count the saves"),
            (TEMP_FILE_QUESTION, "temp file"))}),
    Row(2, "level2/w16_no_final_save.py", "test_the_loop_still_finishes_the_task", "no-final-save",
        ("final answer was never saved", "turn 3, save point B", "it already gave.\n  Re-run just this check: "),
        (TEMP_FILE_QUESTION,), hint="Between appending that answer and `return state`",
        also={"test_a_crash_mid_save_never_leaves_half_a_file": (
            "no-final-save", ("The final answer was never saved", "model's last answer"), (TEMP_FILE_QUESTION,))}),
    Row(2, "level2/w09_save_at_a_only.py", "test_a_crash_mid_save_never_leaves_half_a_file", "no-save-b",
        ("save point B", "Count the saves in one turn"), (TEMP_FILE_QUESTION, "temp file"), hint_task=3,
        hint="which save puts that result on disk?"),
    Row(2, "level2/w27_removes_the_old_file_first.py", "test_every_tool_call_that_starts_is_on_disk",
        "deleted-first", ("just deleted checkpoint.json (os.unlink)", "before checkpoint.new was renamed in",
                          "replaces the old file in one step"),
        ("never reach",), hint_task=2, hint="removes `checkpoint.json`"),
    # The old file renamed to a backup before the new one comes in: the same gap as a delete, told as a move.
    Row(2, "level2/w46_moves_the_old_file_to_a_backup_first.py", "test_every_tool_call_that_starts_is_on_disk",
        "deleted-first", ("just moved checkpoint.json out of the way (os.replace(", "checkpoint.json.bak",
                          "before checkpoint.json.tmp was renamed in", "Which call replaces the old file in one step?"),
        ("never reach",), hint_task=2, hint="removes `checkpoint.json`"),
    # Two renames swap the whole folder: the moment between them is told as what it is, not as a
    # checkpoint written somewhere else, and the uncrashed run (which ends with a good file) passes.
    Row(2, "level2/w31_swaps_folders_by_two_renames.py", "test_every_tool_call_that_starts_is_on_disk", "folder-swap",
        ("moved the checkpoint folder itself out of the way", "between the two renames of a folder swap",
         "Which single call replaces checkpoint.json"), ("instead", "never wrote"), hint_task=2,
        hint="between those two renames"),
    # Save point A runs in a thread joined only after the tool: the race is named, not a missing save.
    Row(2, "level2/w32_save_a_in_a_thread_joined_late.py", "test_every_tool_call_that_starts_is_on_disk", "save-a-late",
        ("Save point A reached the disk only after `list_tickets` had started", "races the tool",
         "What waits for it"), ("never reach",)),
    # Save point A made after execute_tool returns: the same late landing, told without claiming a save
    # that was "still being written" when the tool started (it had not begun).
    Row(2, "level2/w38_save_a_after_the_tool_returned.py", "test_every_tool_call_that_starts_is_on_disk", "save-a-late",
        ("Save point A reached the disk only after `list_tickets` had started", "a save made after the tool is called",
         "Where does that save sit against the tool call"), ("still being written", "never reach")),
    Row(2, "level2/w28_pending_holds_the_whole_block.py", "test_every_tool_call_that_starts_is_on_disk",
        "pending-shape", ("also carries `type`", "whole tool_use block", "exactly id, name and input"),
        ("never reach",), hint="Which keys end up in `pendingToolUse`"),
    Row(2, "level2/w04_replace_inside_with.py", "test_a_crash_mid_save_never_leaves_half_a_file", "buffered-rename",
        ("still in Python's buffer", "`with` block had not closed"), ("checkpoint.json.tmp at offset",),
        hint="still held by the open file object?"),
    Row(2, "level2/w08_save_at_b_only.py", "test_every_tool_call_that_starts_is_on_disk", "no-save-a",
        ("while `list_tickets` runs", "Which save point does this loop never reach?"), (TEMP_FILE_QUESTION,)),
    Row(2, "exercises/level2", "test_a_crash_mid_save_never_leaves_half_a_file", "in-place",
        ("This save writes checkpoint.json itself", TEMP_FILE_QUESTION), ("never reach",)),
    Row(2, "level2/w11_output_tokens_only.py", "test_the_file_is_current_when_the_model_is_called", "counts-tokens",
        ("`tokensUsed` is 223", "the first one included"), ("clear pendingToolUse",),
        hint="Which model responses does `tokensUsed` add up"),
    Row(2, "level2/w13_turns_before_the_tool_runs.py", "test_the_file_is_current_when_the_model_is_called",
        "counts-turns", ("`turns` is 1 but messages hold 0 tool results", "When does a turn count as done?"),
        ("clear pendingToolUse",), hint="how many tool results are in `messages`"),
    Row(2, "level2/w15_save_a_before_the_assistant_message.py", "test_the_file_is_current_when_the_model_is_called",
        "counts-early", ("the spend of 1 model response, but the file's messages hold 0",
                         "before the model's latest message was appended"), ("0 model responses recorded spent 0",),
        hint="has the model's message already been appended"),
    # Task 1 of levels 2 and 5 on what run_agent returned: the kit's story, not a bare line.
    # Level 1: a save that pops the runtime keys names both, in one sentence that agrees with itself.
    # version true or 1.0 passes `== 1`: the hint asks about that, not about versions in general.
    Row(1, "level1/w12_version_true_or_float_loads.py", "test_load_refuses_versions_it_does_not_know",
        "version-not-int", ("a file whose `version` is true", "JSON's true is not the number 1"), (),
        hint="`True == 1` and `1.0 == 1`"),
    # A loader that fills a missing field with a default: resume does not trip later, it carries on from
    # a value the file never held, and the story says so.
    Row(1, "level1/w16_missing_fields_filled_with_defaults.py", "test_load_refuses_a_file_it_cannot_resume_from", "",
        ("with `task` = \"\" filled in, which the file never held", "made-up value"), ("trip over",)),
    Row(1, "level1/w07_pops_runtime_keys.py", "test_the_file_holds_exactly_the_six_fields", "",
        ("removed or replaced `client` and `startedAt`", "the loop still needs them after the save"), ("needs it",)),
    # A finished call still marked as running: both save points are reached, so the nudge must not
    # ask which one is missing, and the hint goes to task 3's ladder for this cause.
    Row(2, "level2/w10_pending_never_cleared.py", "test_the_loop_still_finishes_the_task", "pending-not-cleared",
        ("still has `publish_table` pending", "On disk after the run: checkpoint.json holds turns=3",
         "What resume would run into:", "set pendingToolUse back to None?"), ("nothing should be pending",),
        hint_task=3, hint="Once a tool's result is in `messages`, is any call still running?",
        also={"test_every_tool_call_that_starts_is_on_disk": (
            "pending-not-cleared", ("is that call still running?", "take it out of pendingToolUse",
                                    "checkpoint.json: 49,795 bytes, ending"),
            ("never reach",))}),
    # Save point B written before the result is appended: the lost result is told (TRACE, in task 3's
    # main test), not only the count that runs ahead of it.
    Row(2, "level2/w50_save_b_before_the_result_is_appended.py", "test_every_tool_call_that_starts_is_on_disk",
        "result-after-save", ("though `turns` is 1", "this save ran before its result was appended"),
        ("never reach", "counts on from turn"), hint="is the tool's result already in `messages`?"),
    Row(2, "level2/w29_pending_never_set.py", "test_every_tool_call_that_starts_is_on_disk", "pending-not-set",
        ("but pendingToolUse is null", "what does pendingToolUse hold at that save"), ("never reach",),
        hint="which call was cut off?"),
    # pendingToolUse holding only the id breaks FIELDS in task 1's test, but the cause is task 3's.
    Row(2, "level2/w30_pending_is_only_the_id.py", "test_the_loop_still_finishes_the_task", "pending-shape",
        ("`pendingToolUse` is \"toolu_", "not null or an object", "what does your loop put there?"),
        ("Save exactly version, task",), hint_task=3, hint="Which keys end up in `pendingToolUse`"),
    # A temp file in the system temp folder, another file system (as on a usual machine and in the box):
    # shutil.move copies it into checkpoint.json, which a crash tears; the story names the copy, not a
    # write in place of the learner's own, and the hint asks what a move between file systems does.
    Row(2, "level2/w06_tmp_in_system_tmp.py", "test_a_crash_mid_save_never_leaves_half_a_file", "temp-copied",
        ("into checkpoint.json and then deleted it", "copied its temp file from ", "what shutil.move does when a rename cannot cross file systems",
         "Where was the temp file when it was moved in?"),
        (TEMP_FILE_QUESTION, "This save writes checkpoint.json itself"), hint="What does `shutil.move` do",
        also={"test_the_temp_file_sits_beside_the_checkpoint": (
            "temp-copied", ("not next to checkpoint.json, and was copied into checkpoint.json itself",
                            "a crash during the copy leaves checkpoint.json"), ("on a machine where",))}),
    # os.replace from there fails with EXDEV: the loop stops, and the story says why, and what to do.
    Row(2, "level2/w07_mkstemp_default_dir.py", "test_the_loop_still_finishes_the_task", "temp-cross-device",
        ("Invalid cross-device link", "a rename cannot move a file from one file system to another",
         "pass dir=directory to tempfile.mkstemp"), ("never wrote", "on a machine where"), hint_task=2,
        hint="Which folder was the temp file made in"),
    # The same through a folder from mkdtemp() with no dir, and at level 1 (its save runs with no recorder).
    Row(2, "level2/w33_mkdtemp_then_rename.py", "test_the_loop_still_finishes_the_task", "temp-cross-device",
        ("Invalid cross-device link", "os.rename(tmp, ", "the kit refuses the rename the same way"), ("never wrote",),
        hint_task=2, hint="Which folder was the temp file made in"),
    Row(1, "level1/w14_temp_in_system_tmp.py", "test_the_file_holds_exactly_the_six_fields", "",
        ("save_checkpoint raised OSError at save point A of turn 1: [Errno 18] Invalid cross-device link",
         "What to try: make the temp file in the checkpoint's own folder"), ("write <directory>/checkpoint.json",)),
    # Level 5: a recorded call left in the list is not "how many blocks does the file list"; the
    # finished state's story says "those calls", and the re-run line comes before the question.
    # Each result in a user message of its own: the API's 400 is told with its cause, the split.
    Row(5, "level5/wrong/one_user_message_per_result.py", "test_the_loop_still_finishes_the_task", "",
        ("the real API answers this with a 400", "split across 3 user messages",
         "in the single user message right after it"), ()),
    Row(5, "level5/wrong/pending_not_shrinking.py", "test_every_call_the_model_named_is_on_disk_before_any_runs",
        "pending-not-cleared", ("1 result is recorded", "take it out of pendingToolUse", "\"name\": \"list_ticket….\n"),
        ("How many tool_use blocks", "1 results"), hint="should it still be in `pendingToolUse`?"),
    Row(5, "level5/wrong/turns_per_model_turn.py", "test_the_loop_still_finishes_the_task", "",
        ("says turns=3", "`turns` ends at 7", "On disk after the run: checkpoint.json holds turns=3",
         "once for each tool result recorded?"), ("there is no checkpoint.json",),
        also={"test_no_result_is_lost_or_doubled_and_the_counts_agree": (
            "", ("messages hold 1 tool result ",), ("1 tool results",))}),
    # Level 4 as shipped: a list of refusals that says how many it left out, and one stop per sentence.
    Row(4, "exercises/level4", "test_a_checkpoint_you_cannot_trust_is_refused", "",
        ("13 checkpoints that resume cannot trust were not refused cleanly", "  - and 9 more like these",
         "(char 0). There is no checkpoint"), ("(s)", ". there is", "?.", ").."),
        also={"test_the_turn_cap_counts_the_turns_before_the_crash": (
            "", ("CAP not judged: resuming under a turn cap broke PAIRING first", "On disk: checkpoint.json with turns=0",
                 "What is wrong: PAIRING broken",
                 "What to try:"), ("?.", "..\n"))}),
    # A resume that runs the last finished call again: no pending call is involved, so the story says its
    # result was on disk, not how to re-run a pending call; the cap check says what broke first.
    Row(4, "level4/wrong_reruns_the_last_finished_tool", "test_the_pending_call_is_answered_once", "",
        ("took effect 2 times", "though its result was already in the checkpoint's messages",
         "never one whose result is recorded"), ("Re-run a pending call",),
        also={"test_the_turn_cap_counts_the_turns_before_the_crash": (
            "", ("CAP not judged: resuming under a turn cap broke",), ("CAP broken",))}),
    # Level 4's turn cap: the same overshoot, told apart by how far resume runs under a lower cap.
    Row(4, "level4/wrong_cap_not_enforced", "test_the_turn_cap_counts_the_turns_before_the_crash",
        "cap-not-enforced", ("turn 3: one turn past the cap", "On disk: checkpoint.json said turns = 0",
                             "with MAX_TURNS = 1 it went just as far", "What to try:"),
        ("restart at zero", "E   ", "assert"), hint="Where does the resumed loop stop"),
    # Counters that carry on from the file but miss the reconciled call are not "restarted at zero".
    Row(4, "level4/wrong_pending_call_not_counted", "test_turns_and_tokens_continue_from_the_file", "",
        ("the file said turns = 0 with a call pending, and resume added 3 tool results, but turns went up by 2",
         "is the pending call it answered counted as a turn?"), ("did it restart at zero instead",),
        also={"test_the_turn_cap_counts_the_turns_before_the_crash": (
            "cap-restarted", ("its cap did not count the turn begun before the crash, the pending call it answered",
                              "or does answering the pending call add no turn?"),
            ("forgot the turns already in the file",))}),
    # A finished task resumed by asking the model again: told as the finished task it is (issue 26, the round-4
    # gap), and the question and the hint are about the final answer, not about pendingToolUse.
    Row(4, "level4/wrong_finished_task_asked_again", "test_the_pending_call_is_answered_once", "finished-asked-again",
        ("the file holds a finished task", "nothing is pending",
         "whose last message is the model's final answer say about the task?"),
        ("What does pendingToolUse tell you",), hint="say is left to do?",
        also={"test_a_b_only_checkpoint_hides_the_call_in_flight": (
            "finished-asked-again", ("the file holds a finished task",), ())}),
    Row(4, "level4/wrong_restarts_counters", "test_turns_and_tokens_continue_from_the_file", "",
        ("turns counts only those: did it restart at zero instead of continuing from the file?",),
        ("went up by",)),
    Row(4, "level4/wrong_cap_counts_from_zero", "test_the_turn_cap_counts_the_turns_before_the_crash",
        "cap-restarted", ("turn 3: one turn past the cap", "began 2 turns of its own after the crash",
                          "did the count restart at zero after the crash"),
        ("went just as far", "E   "), hint="Does your cap start from that number"),
    # A power cut rolls the file back because nothing was fsynced: no save point is to blame, and
    # the closing question is the level's own.
    # The words say what the power cut did to this code's bytes, not the kill's "before any bytes
    # reached it": the rename landed, the data had not been fsynced (or was fsynced before a flush).
    Row(3, "level3/wrong_starter_no_fsync", "test_the_data_is_on_disk_before_the_rename", "",
        ("M3, the power is cut", "reached the disk itself",
         "the rename from checkpoint.json.tmp reached the disk, but the data written into checkpoint.json.tmp had "
         "not been fsynced before the rename"),
        ("save point B)", "Count the saves", TEMP_FILE_QUESTION, "Python's buffer", "before any bytes reached it")),
    # Task 4's platform checks speak in the same story format, with a "What to try" for what was found.
    Row(3, "level3/wrong_retries_fsync", "test_a_failed_fsync_is_not_swallowed", "",
        ("When fsync of the file it wrote fails once, save_checkpoint must raise",
         "What the check did: one save, then a second", "What is wrong: fsync of the file it wrote reported",
         "What to try: after the first OSError from fsync, let it propagate", "Re-run just this check: pytest"),
        ("When file fsync fails",)),
    Row(3, "level3/wrong_crashes_on_windows", "test_saving_where_a_folder_cannot_be_opened", "",
        ("did not save on a platform where a folder cannot be opened", "What is wrong: save_checkpoint raised ",
         "What to try: open the folder inside try/except OSError", "Re-run just this check: pytest"), ()),
    Row(3, "level3/wrong_fsync_without_flush", "test_the_data_is_on_disk_before_the_rename", "",
        ("of the bytes written into checkpoint.json.tmp reached the operating system only after its last fsync",
         "still in Python's buffer when it ran", "the power cut lost all of it"), ("before any bytes reached it",)),
    # Level 6: the old journal deleted before the new snapshot lands. The loader returns an older save; the
    # loop did save, so the story does not say it never did, and the question names a file that is gone.
    Row(6, "level6/wrong/old_journal_deleted_before_the_snapshot_lands.py", "test_every_crash_state_loads_as_one_whole_save",
        "", ("load_checkpoint returned an older save", "read back no later save from the files this crash left",
             "a file your snapshot names and that is gone", "what does your loader do with it?"),
        ("Nothing was saved",)),
    # The folder fsynced only at the first save: a power cut undoes a later rename. The loop did make that
    # save, so the story says the power cut undid it, never that it was not made.
    Row(3, "level3/wrong_syncs_the_folder_only_once", "test_a_save_that_returned_is_never_undone", "",
        ("the file the power cut left breaks WHOLE: checkpoint.json is an older save",
         "A later save had been made, but the power cut undid it"), ("Nothing was saved after the tool returned",)),
    # One byte written after the fsync: the same late bytes, told without claiming they sat in the buffer.
    Row(3, "level3/wrong_fsync_before_the_last_write", "test_the_data_is_on_disk_before_the_rename", "",
        ("holds only 612 of the 613 bytes", "1 of the bytes written into checkpoint.json.tmp reached the operating "
         "system only after its last fsync (written after it", "the power cut lost the rest"), ()),
]


def run_level(level: int, submission: str, tmp_path: Path) -> tuple[Outcomes, Path]:
    """The level's tests on ``submission`` in this process, stopping at the first failure (but running
    the tests a row asks about past it)."""
    lv = manifest.load().require(level)
    source = ROOT / submission if (ROOT / submission).is_dir() else CORPUS / submission
    if source.is_dir():
        folder = source
    else:
        folder = tmp_path / "submission"
        folder.mkdir()
        shutil.copy(source, folder / lv.files[0])
    collector = Outcomes()
    # The generated conversations are the slow part and name no cause of their own in these rows.
    code = pytest.main([str(ROOT / lv.folder), "--submission", str(folder), "-q", "-p", "no:cacheprovider",
                        "-k", "not generated_conversations", "--color=no", "--import-mode=importlib"], plugins=[collector])
    assert code in (0, 1), f"pytest exit status {code}"
    return collector, folder


@pytest.mark.parametrize("row", ROWS, ids=[r.submission.rsplit("/", 1)[-1].removesuffix(".py") for r in ROWS])
def test_each_failure_names_its_cause(row, tmp_path):
    collector, _ = run_level(row.level, row.submission, tmp_path)
    tests = list(collector.tests.values())
    failed = [t for t in tests if t.status != "passed"]
    assert failed, "the submission passed every test"
    first = failed[0]
    assert first.name == row.first, f"first failing test is {first.name}, not {row.first}:\n{first.output}"
    assert (first.causes[:1] or [""])[0] == row.cause, (first.causes, first.output)
    for words in row.names:
        assert words in first.output, f"{words!r} missing from:\n{first.output}"
    for words in row.not_names:
        assert words not in first.output, f"{words!r} (a wrong cause) in:\n{first.output}"
    for name, (cause, names, not_names) in row.also.items():
        later = next(t for t in tests if t.name == name)
        assert later.status == "failed" and (later.causes[:1] or [""]) == [cause], (later.causes, later.output)
        for words in names:
            assert words in later.output, f"{name}: {words!r} missing from:\n{later.output}"
        for words in not_names:
            assert words not in later.output, f"{name}: {words!r} (a wrong cause) in:\n{later.output}"

    # The nudge and the next hint follow the recorded cause, not only the first failing task.
    lv = manifest.load().require(row.level)
    run = testrun.TestRun(1, [testrun.TestResult(t.nodeid, t.status, t.task, t.points, t.output,
                                                         t.checks, t.causes) for t in tests])
    assert testrun.hint_task(lv, run) == (row.hint_task or first.task)
    tasks = manifest.parse_hints(lv.starter_dir / lv.hints)
    _, cause, steps = hint.hint_ladder(tasks, testrun.hint_task(lv, run), run.first_causes())
    if row.hint:
        assert cause == row.cause and row.hint in steps[0] and steps[0].endswith("?"), steps[0]


def test_every_cause_a_hint_names_is_one_a_level_declares():
    from grader.engine.invariants import CAUSES
    from grader.faces.assertions import NUDGES
    from grader.levels import registry

    assert set(NUDGES) <= set(CAUSES)
    for lv in manifest.load().existing():
        lv.plugin  # noqa: B018 - the level module declares its own causes when imported
        for task in manifest.parse_hints(lv.starter_dir / lv.hints):
            assert set(task.causes) <= set(registry.causes()), (lv.number, task.number, task.causes)
    # Level 4's causes are its own: declared by its module, not in the engine's list.
    assert registry.cause_words("cap-restarted") and "cap-restarted" not in CAUSES
    assert "cap-restarted" in registry.causes("resume") and "cap-restarted" not in registry.causes("loop")
    level2 = manifest.parse_hints(manifest.load().require(2).starter_dir / "hints.md")
    covered = {c for task in level2 for c in task.causes}
    assert set(NUDGES) <= covered, "a cause level 2 can show leads to no task's hints"


def test_a_cause_means_one_thing():
    from grader.levels import registry

    registry.declare_causes("loop", {"in-place": registry.cause_words("in-place")})  # the same words: harmless
    with pytest.raises(ValueError, match="already declared"):
        registry.declare_causes("elsewhere", {"in-place": "something else entirely"})


def test_a_write_through_a_renamed_temp_file_names_the_file_it_landed_in(load_module):
    """os.replace inside the `with` block: the bytes written after the rename land in checkpoint.json,
    so a crash in the middle of that write is named by that file, not by the temp file's old name."""
    from grader.engine.explore import explore_loop
    from grader.engine.scripted import support_tickets

    module = load_module(CORPUS / "level2" / "w04_replace_inside_with.py")
    torn = [v for v in explore_loop(module.run_agent, support_tickets(0)).violations
            if v.operation.startswith("in the middle of write")]
    assert torn and all("checkpoint.json (opened as checkpoint.json.tmp, renamed before this)" in v.operation
                        for v in torn), [v.operation for v in torn[:3]]
    assert all(v.cause == "buffered-rename" for v in torn)


BROKEN = 'import json\n\n\ndef save_checkpoint(state, directory="checkpoints"):\n    with open("x" as f:\n        pass\n'


def test_a_syntax_error_is_shown_once_as_python_shows_it_under_pytest(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "agent.py").write_text(BROKEN)
    collector = Outcomes()
    pytest.main([str(ROOT / "exercises" / "level2"), "--submission", str(folder), "-q", "-p", "no:cacheprovider",
                 "--color=no", "--import-mode=importlib"], plugins=[collector])
    first, *rest = collector.tests.values()
    assert 'File "agent.py", line 5' in first.output and "SyntaxError: " in first.output, first.output
    assert "During handling" not in first.output and "Traceback" not in first.output
    assert rest and all(t.output.startswith("Not run: agent.py has a syntax error on line 5")
                        and "SyntaxError" not in t.output for t in rest), [t.output for t in rest]


def test_a_syntax_error_is_shown_once_under_check(tmp_path):
    (tmp_path / "agent.py").write_text(BROKEN)
    lines: list = []
    check.check_level(manifest.load().require(2), tmp_path, examples=1, out=lines.append)
    text = "\n".join(lines)
    assert text.count("SyntaxError: ") == 1 and text.count('File "agent.py", line 5') == 1, text
    assert "During handling" not in text


def test_a_returned_state_story_puts_the_rerun_line_before_the_question():
    """Levels 2, 3, 5 and 6 tell a wrong returned state as a crash is told: the re-run line closes the
    story and the question comes last."""
    for level in (3, 5, 6):
        text = (ROOT / "exercises" / f"level{level}" / "test_agent.py").read_text(encoding="utf-8")
        assert "finished_failure(" in text and "rerun=rerun_command(request)" in text, level
    from grader.faces.assertions import finished_failure

    text, causes = finished_failure(None, "there is no checkpoint.json in the folder", 3, "", rerun="pytest x")
    lines = text.splitlines()
    assert lines[-3] == "  Re-run just this check: pytest x" and lines[-2] == "" and lines[-1].endswith("?"), text
    assert causes == []


def test_what_run_agent_returned_is_told_as_a_story():
    """Task 1's check of the returned state: each way it can be wrong gets the what/on disk/what is
    wrong/resume lines and a question of its own; a right state gets none."""
    import json

    from grader.faces.assertions import describe_final_file, finished_problem

    done = {"version": 1, "task": "t", "turns": 3, "tokensUsed": 9, "pendingToolUse": None,
            "messages": [{"role": "user", "content": "t"}, {"role": "assistant", "content": "done"}]}
    disk = describe_final_file(json.dumps(done).encode())
    assert disk == "checkpoint.json holds turns=3, nothing pending, 2 messages, the last from the assistant"
    assert finished_problem(done, disk, 3, "three calls") is None
    cases = {
        None: ("run_agent returned None", "`return state`"),
        "turns": ("says turns=2", "once for each tool result recorded?"),
        "pending": ("still has `publish_table` pending", "back to None?"),
        "last": ("is from the user", "appended to `messages` before the loop saves and returns?"),
    }
    for case, (what, question) in cases.items():
        state = None if case is None else json.loads(json.dumps(done))
        if case == "turns":
            state["turns"] = 2
        elif case == "pending":
            state["pendingToolUse"] = {"id": "toolu_1", "name": "publish_table", "input": {}}
        elif case == "last":
            state["messages"].append({"role": "user", "content": []})
        text = finished_problem(state, disk, 3, "three calls")
        lines = text.splitlines()
        assert what in lines[0] and lines[0].startswith("The loop ran to the end without a crash"), text
        assert [line.split(":")[0].strip() for line in lines[1:4]] == [
            "On disk after the run", "What is wrong", "What resume would run into"], text
        assert lines[-1].endswith("?") and question in lines[-1], text
        assert ".." not in text and "?." not in text
    assert describe_final_file(None) == "there is no checkpoint.json in the folder"


def test_a_loop_that_raises_is_shown_once_per_run(tmp_path):
    """The tests that read one run of the loop show its traceback once: the first in full, the rest
    in a line naming the exception and the learner's line."""
    folder = tmp_path / "submission"
    folder.mkdir()
    source = (CORPUS / "level2" / "c01_pathlib_replace.py").read_text(encoding="utf-8")
    (folder / "agent.py").write_text(source.replace("def save_checkpoint(state, directory=\"checkpoints\"):\n",
                                                    "def save_checkpoint(state, directory=\"checkpoints\"):\n"
                                                    "    state[\"nope\"]\n", 1))
    collector = Outcomes()
    pytest.main([str(ROOT / "exercises" / "level2"), "--submission", str(folder), "-q", "-p", "no:cacheprovider",
                 "-k", "not generated_conversations", "--color=no", "--import-mode=importlib"], plugins=[collector])
    first, *rest = [t for t in collector.tests.values() if "generated_conversations" not in t.name]
    assert "KeyError: 'nope'" in first.output and 'agent.py", line 10, in save_checkpoint' in first.output, first.output
    assert len(rest) == 4 and all(t.status == "failed" for t in rest)
    for t in rest:
        assert t.output.startswith("Not checked: your loop did not finish this run (support-tickets): KeyError: "
                                   "'nope', on line 10 of agent.py (in save_checkpoint)."), t.output
        assert 'File "' not in t.output and "^^^" not in t.output


def test_a_run_that_wrote_elsewhere_is_told_once_and_the_rest_only_point_at_it(tmp_path):
    """A loop that never wrote into its folder: the first test tells why in full, the four that read
    the same run say only that they were not checked (not the cause again, and never '?.')."""
    folder = tmp_path / "submission"
    folder.mkdir()
    shutil.copy(CORPUS / "level2" / "w21_run_agent_forgets_the_folder.py", folder / "agent.py")
    collector = Outcomes()
    pytest.main([str(ROOT / "exercises" / "level2"), "--submission", str(folder), "-q", "-p", "no:cacheprovider",
                 "-k", "not generated_conversations", "--color=no", "--import-mode=importlib"], plugins=[collector])
    first, *rest = [t for t in collector.tests.values() if "generated_conversations" not in t.name]
    assert "does run_agent pass it on?" in first.output, first.output
    assert len(rest) == 4
    for t in rest:
        assert t.output.startswith("Not checked: your loop did not finish this run (support-tickets). The first "), t.output
        assert "pass it on" not in t.output and "?." not in t.output


def test_a_passing_pytest_run_reminds_of_the_written_answers(capsys):
    """`pytest exercises/levelN` is how a learner knows a level is done: when every test passes, it
    names the level's answers.md (where their files are), as `check` does; a level with none says nothing."""
    common = ["-q", "-p", "no:cacheprovider", "-k", "not generated_conversations", "--color=no",
              "--import-mode=importlib"]
    assert pytest.main([str(ROOT / "exercises" / "level2"), "--submission", str(ROOT / "solutions" / "level2"),
                        *common]) == 0
    said = capsys.readouterr().out
    assert "One more thing: " in said and f"{Path('solutions', 'level2', 'answers.md')} asks a few questions" in said
    assert pytest.main([str(ROOT / "exercises" / "level5"), "--submission", str(ROOT / "solutions" / "level5"),
                        *common]) == 0
    assert "One more thing" not in capsys.readouterr().out


def test_byte_counts_read_the_same_everywhere():
    """Sizes and offsets in a story use thousands separators, in the 'On disk' lines as in the
    operation a crash fell in (level 1's messages always did)."""
    from grader.engine.explore import describe_bytes
    from grader.engine.invariants import shape_finding
    from grader.engine.ops import Op

    assert describe_bytes(b"x" * 49795).startswith("49,795 bytes, ending")
    write = Op(3, "write", "write", "/w/check points/journal.jsonl", handle=1, offset=4595, data=b"y" * 49340)
    assert write.describe() == "write of 49,340 bytes to check points/journal.jsonl at offset 4,595"
    assert Op(4, "truncate", "os.truncate", "/w/s/j.jsonl", size=12345).describe() == "os.truncate of s/j.jsonl to 12,345 bytes"
    torn = shape_finding(b"{" * 1500, None, "it stops early")
    assert "holds 1,500 bytes that are not" in torn.detail


def test_a_loop_that_raises_is_shown_once_under_check(tmp_path):
    """check's matrix names the exception in a line; the traceback is the first failure's alone."""
    source = (CORPUS / "level2" / "c01_pathlib_replace.py").read_text(encoding="utf-8")
    (tmp_path / "agent.py").write_text(source.replace("def save_checkpoint(state, directory=\"checkpoints\"):\n",
                                                      "def save_checkpoint(state, directory=\"checkpoints\"):\n"
                                                      "    state[\"nope\"]\n", 1))
    lines: list = []
    check.check_level(manifest.load().require(2), tmp_path, examples=1, out=lines.append)
    text = "\n".join(lines)
    assert "KeyError: 'nope', on line 10 of agent.py (in save_checkpoint); the first failure below" in text, text
    frames = [line for line in text.splitlines() if line.strip().startswith('File "')]
    assert len(frames) == 2 and text.count("Traceback") == 0, text   # run_agent, then save_checkpoint: once
