"""``crashcourse explore``: small programs in shell, Python and JavaScript with known verdicts.

The engine's whole-folder crash states (:mod:`grader.engine.folder_crash`) are tested on operations
written by hand; the command is tested end to end on real programs under strace (and bubblewrap
where it starts), each with a checker whose verdict is known: a file rewritten in place breaks
under a kill, a temp file fsynced and renamed, with its folder fsynced, survives every model.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from grader.engine import crash_models
from grader.engine.folder_crash import folder_states
from grader.engine.ops import Op
from grader.faces import cli
from grader.grading import kernel_trace, program_trace

D = "/w/state"

needs_strace = pytest.mark.skipif(kernel_trace.problem() is not None,
                                  reason=f"no kernel trace here: {kernel_trace.problem()}")
needs_box = pytest.mark.skipif(kernel_trace.problem() is not None or program_trace.box_problem() is not None,
                               reason="needs strace and bubblewrap")
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _open(path, handle, *flags):
    return Op(0, "open", api="openat", path=path, handle=handle, flags=frozenset(flags))


def _write(path, handle, data, offset=0):
    return Op(0, "write", api="write", path=path, handle=handle, offset=offset, data=data, size=len(data))


def _atomic(fsync_file=True, fsync_dir=True):
    ops = [_open(D + "/s.tmp", 1, "create", "trunc"), _write(D + "/s.tmp", 1, b"new")]
    if fsync_file:
        ops.append(Op(0, "fsync", api="fsync", path=D + "/s.tmp", handle=1))
    ops += [Op(0, "close", path=D + "/s.tmp", handle=1), Op(0, "rename", api="rename", path=D + "/s.tmp", dest=D + "/s")]
    if fsync_dir:
        ops.append(Op(0, "fsync", api="fsync", path=D))
    return ops


def _saves(ops, models):
    """What ``s`` may hold after a crash, by model, over every point (None: absent)."""
    out: dict = {}
    for state in folder_states(ops, {D + "/s": b"old"}, D, models):
        out.setdefault(state.model, set()).add(state.files.get("s"))
    return out


# -- the engine: whole-folder crash states ------------------------------------------------------------

def test_a_file_rewritten_in_place_is_seen_empty_and_torn_and_named_in_place():
    ops = [_open(D + "/s", 1, "trunc"), _write(D + "/s", 1, b"x" * 10000), Op(0, "close", path=D + "/s", handle=1)]
    states = list(folder_states(ops, {D + "/s": b"old"}, D, ("M1", "M2", "M3")))
    m1 = {s.files["s"] for s in states if s.model == "M1"}
    assert m1 == {b"old", b"", b"x" * 10000}
    torn = [s for s in states if s.model == "M2"]
    assert [len(s.files["s"]) for s in torn] == [4096, 8192]
    assert {s.losses[0].mistake for s in states if s.files["s"] != b"old"} == {"in-place"}


def test_temp_fsync_rename_fsync_folder_leaves_only_old_or_new_under_every_model():
    saves = _saves(_atomic(), ("M1", "M2", "M3", "M4", "M5"))
    assert set().union(*saves.values()) == {b"old", b"new"}


def test_a_rename_before_fsync_can_leave_an_empty_file_under_power_cut_only():
    saves = _saves(_atomic(fsync_file=False), ("M1", "M3"))
    assert saves["M1"] == {b"old", b"new"}
    assert b"" in saves["M3"]
    kinds = {s.losses[0].mistake for s in folder_states(_atomic(fsync_file=False), {D + "/s": b"old"}, D, ("M3",))
             if s.files.get("s") == b""}
    assert kinds == {"rename-before-data"}


def test_without_a_folder_fsync_the_rename_is_lost_under_m5_only():
    ops = _atomic(fsync_dir=False)
    assert _saves(ops, ("M3",))["M3"] == {b"old", b"new"}
    last = [s for s in folder_states(ops, {D + "/s": b"old"}, D, ("M5",)) if s.point == len(ops)]
    assert any(s.files.get("s") == b"old" and s.losses[0].mistake == "dir-not-fsynced" for s in last)
    # and the same run with the folder fsynced keeps the new save at the end
    ops = _atomic()
    last = [s for s in folder_states(ops, {D + "/s": b"old"}, D, ("M5",)) if s.point == len(ops)]
    assert {s.files.get("s") for s in last} == {b"new"}


def test_a_new_folder_vanishes_with_its_files_until_its_parent_is_fsynced():
    ops = [Op(0, "mkdir", api="mkdir", path=D + "/sub"), _open(D + "/sub/f", 1, "create"),
           _write(D + "/sub/f", 1, b"data"), Op(0, "fsync", api="fsync", path=D + "/sub/f", handle=1)]
    gone = [s for s in folder_states(ops, {}, D, ("M5",)) if s.point == len(ops) and "sub/f" not in s.files]
    assert gone and "sub" not in gone[0].dirs
    ops.append(Op(0, "fsync", api="fsync", path=D))
    ops.append(Op(0, "fsync", api="fsync", path=D + "/sub"))
    last = [s for s in folder_states(ops, {}, D, ("M5",)) if s.point == len(ops)]
    assert all(s.files.get("sub/f") == b"data" for s in last)


def test_an_unsynced_append_can_be_missing_while_a_later_one_landed_under_m4():
    ops = [_open(D + "/log", 1, "append"), _write(D + "/log", 1, b"A", offset=-1), _write(D + "/log", 1, b"B", offset=-1)]
    states = list(folder_states(ops, {D + "/log": b"0"}, D, ("M4",)))
    hole = [s for s in states if s.losses and s.losses[0].kind == "hole"]
    assert {s.files["log"] for s in hole} == {b"0\0B"} or {s.files["log"] for s in hole} == {b"0B"}
    assert {s.losses[0].mistake for s in hole} == {"append"}


def test_sampled_points_build_only_those_states():
    ops = [_open(D + "/log", 1, "create")] + [_write(D + "/log", 1, b"x", offset=i) for i in range(1000)]
    points = {0, 10, 500, 1001}
    states = list(folder_states(iter(ops), {}, D, ("M1", "M3"), points=points))
    assert {s.point for s in states} == points
    assert max(len(s.files.get("log", b"")) for s in states) == 1000


def test_lay_out_refuses_any_name_that_would_leave_the_folder(tmp_path):
    target = tmp_path / "state"
    target.mkdir()
    refused = program_trace.lay_out({"ok/a": b"1", "../escape": b"2", "/etc/x": b"3", "a/./b": b"4"},
                                    ("ok", "../up"), str(target))
    assert (target / "ok" / "a").read_bytes() == b"1"
    assert {name for name, _ in refused} == {"../escape", "/etc/x", "a/./b", "../up"}
    assert not (tmp_path / "escape").exists() and not (tmp_path / "up").exists()


# -- the command, on real programs ---------------------------------------------------------------------

def _explore(tmp_path, capsys, program, check, models="M1,M2,M3,M5", *extra):
    code = cli.main(["explore", "--watch", str(tmp_path / "state"), "--check", check, "--models", models,
                     "--json", "--jobs", "2", *extra, "--", *program])
    out = capsys.readouterr().out
    return code, json.loads(out)


def _state(tmp_path, text='{"turn": 0}'):
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "save.json").write_text(text)


PY_CHECK = f"{sys.executable} -c 'import json,sys; json.load(open(sys.argv[1] + \"/save.json\"))' {{dir}}"


@needs_box
@pytest.mark.strace
@pytest.mark.bubblewrap
def test_a_shell_echo_over_a_file_is_broken_by_a_kill_and_the_real_folder_is_untouched(tmp_path, capsys):
    _state(tmp_path)
    code, report = _explore(tmp_path, capsys, ["sh", "-c", 'echo \'{"turn": 1}\' > "$1/save.json"', "sh", "{dir}"],
                            PY_CHECK, "M1")
    assert code == 1
    assert report["box"] == "bubblewrap"
    assert report["mistakes"][0]["kind"] == "in-place"
    broken = [s for s in report["stretches"] if s["broken"]]
    assert "O_TRUNC" in broken[0]["first_op"] and "JSONDecodeError" in broken[0]["first_broken"]["output"]
    assert (tmp_path / "state" / "save.json").read_text() == '{"turn": 0}'


ATOMIC_PY = """
import json, os, sys
d = sys.argv[1]
with open(os.path.join(d, "save.json.tmp"), "w") as f:
    json.dump({"turn": 1, "pad": "x" * 10000}, f)
    f.flush()
    os.fsync(f.fileno())
os.replace(os.path.join(d, "save.json.tmp"), os.path.join(d, "save.json"))
fd = os.open(d, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
"""


@needs_box
@pytest.mark.strace
@pytest.mark.bubblewrap
def test_python_temp_fsync_rename_fsync_folder_is_clean_under_every_model(tmp_path, capsys):
    _state(tmp_path)
    (tmp_path / "save.py").write_text(ATOMIC_PY)
    code, report = _explore(tmp_path, capsys, [sys.executable, str(tmp_path / "save.py"), "{dir}"], PY_CHECK,
                            "M1,M2,M3,M4,M5")
    assert (code, report["broken_states"]) == (0, 0), report
    assert report["operations"] >= 6 and report["distinct_states"] >= 3


@needs_box
@pytest.mark.strace
@pytest.mark.bubblewrap
def test_python_without_the_folder_fsync_is_broken_under_m5_only(tmp_path, capsys):
    _state(tmp_path)
    (tmp_path / "save.py").write_text(ATOMIC_PY.split("fd = os.open")[0])
    check = (f"{sys.executable} -c 'import json,sys; assert json.load(open(sys.argv[1] + \"/save.json\"))"
             f"[\"turn\"] == 1' {{dir}}")
    # The checker here wants the new save: only the states after the rename returned are asked about.
    code, report = _explore(tmp_path, capsys, [sys.executable, str(tmp_path / "save.py"), "{dir}"], check,
                            "M3,M5")
    last = report["stretches"][-1]
    assert last["cells"]["M3"] == "ok" and last["cells"]["M5"].startswith("broken")
    assert "dir-not-fsynced" in {m["kind"] for m in report["mistakes"]}


NODE_CHECK = "node -e 'JSON.parse(require(\"fs\").readFileSync(process.argv[1] + \"/save.json\", \"utf8\"))' {dir}"


@needs_box
@pytest.mark.strace
@pytest.mark.bubblewrap
@needs_node
def test_node_write_file_sync_in_place_is_broken_and_temp_rename_is_clean_under_m1(tmp_path, capsys):
    _state(tmp_path)
    (tmp_path / "inplace.js").write_text(
        "require('fs').writeFileSync(process.argv[2] + '/save.json', JSON.stringify({turn: 1, pad: 'x'.repeat(9000)}))")
    code, report = _explore(tmp_path, capsys, ["node", str(tmp_path / "inplace.js"), "{dir}"], NODE_CHECK, "M1,M2")
    assert code == 1 and report["mistakes"][0]["kind"] == "in-place"
    (tmp_path / "rename.js").write_text(
        "const fs = require('fs'); const d = process.argv[2];"
        "fs.writeFileSync(d + '/save.json.tmp', JSON.stringify({turn: 1, pad: 'x'.repeat(9000)}));"
        "fs.renameSync(d + '/save.json.tmp', d + '/save.json');")
    code, report = _explore(tmp_path, capsys, ["node", str(tmp_path / "rename.js"), "{dir}"], NODE_CHECK, "M1,M2")
    assert (code, report["broken_states"]) == (0, 0)
    # ... but the rename without an fsync is the ext4 story under a power cut
    code, report = _explore(tmp_path, capsys, ["node", str(tmp_path / "rename.js"), "{dir}"], NODE_CHECK, "M3")
    assert code == 1 and report["mistakes"][0]["kind"] in ("unsynced-data", "rename-before-data")


@needs_strace
@pytest.mark.strace
@pytest.mark.skipif(os.geteuid() != 0, reason="without a box, only root can mount the copy over the folder")
def test_no_box_runs_on_a_copy_and_says_so(tmp_path, capsys, monkeypatch):
    _state(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, report = _explore(tmp_path, capsys, ["sh", "-c", 'echo \'{"turn": 1}\' > state/save.json'], PY_CHECK, "M1",
                            "--no-box")
    assert code == 1 and report["box"] == "none (--no-box)"
    assert any(note.startswith("no box") for note in report["notes"])
    assert (tmp_path / "state" / "save.json").read_text() == '{"turn": 0}'


@needs_strace
@pytest.mark.strace
def test_sampling_a_long_run_is_bounded_and_repeatable(tmp_path, capsys):
    _state(tmp_path)
    program = [sys.executable, "-c", "import os,sys\nfd=os.open(sys.argv[1]+'/log', os.O_WRONLY|os.O_CREAT|os.O_APPEND)\n"
               "for i in range(3000): os.write(fd, b'%d\\n' % i)", "{dir}"]
    first = _explore(tmp_path, capsys, program, "true", "M1,M3", "--max-points", "50", "--seed", "7", "--no-box")[1]
    again = _explore(tmp_path, capsys, program, "true", "M1,M3", "--max-points", "50", "--seed", "7", "--no-box")[1]
    assert first["operations"] >= 3000 and first["explored_points"] == 50
    assert first["sampled"] == {"seed": 7, "points": 50}
    assert [s["first"] for s in first["stretches"]] == [s["first"] for s in again["stretches"]]


def test_usage_errors_exit_2(tmp_path, capsys):
    assert cli.main(["explore", "--watch", str(tmp_path / "nope"), "--check", "true", "--", "true"]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert cli.main(["explore", "--watch", str(tmp_path), "--check", "true", "--models", "M9", "--", "true"]) == 2
    assert cli.main(["explore", "--watch", str(tmp_path), "--check", "true"]) == 2
    assert cli.main(["explore", "--watch", str(tmp_path), "--check", "true", "--", "no-such-program-here"]) == 2
    assert "no such program" in capsys.readouterr().err


def test_explore_lifts_the_replays_cap_only_while_it_runs(tmp_path):
    """A program of the user's own may hold large files, so explore lifts the judge's cap on what a replay
    holds; afterwards the process keeps the cap (a grade, or a test of the cap, run after it in one process)."""
    assert crash_models.HELD_LIMIT == crash_models.JUDGE_HELD_LIMIT
    assert cli.main(["explore", "--watch", str(tmp_path), "--check", "true", "--", "no-such-program-here"]) == 2
    assert crash_models.HELD_LIMIT == crash_models.JUDGE_HELD_LIMIT


@needs_box
@pytest.mark.strace
@pytest.mark.bubblewrap
def test_a_checker_that_rejects_the_finished_run_is_a_run_error(tmp_path, capsys):
    _state(tmp_path)
    code, report = _explore(tmp_path, capsys, ["true"], "false", "M1")
    assert code == 2 and any("finished program" in n for n in report["notes"])


def test_the_real_folder_is_never_the_one_written(tmp_path):
    """The box binds the copy at the real path; without a box, arguments naming the folder move to the copy."""
    real = str(tmp_path / "state")
    assert program_trace._moved(real + "/save.json", real, "/copy") == "/copy/save.json"
    assert program_trace._moved("other", real, "/copy") == "other"
    assert os.path.basename(program_trace.box_command(["x"], binds=[("/c", real)], cwd="/")[0]) == "bwrap"


def test_a_python_programs_own_line_names_the_calls_after_it(tmp_path):
    """--stacks: the sitecustomize's mark (a refused write to fd -1) names the program's line for what follows."""
    trace = tmp_path / "trace"
    trace.write_text(
        f'7 write(-1, "{program_trace.MARK}/home/me/save.py:12 in save", 40) = -1 EBADF (Bad file descriptor)\n'
        '7 openat(AT_FDCWD</w>, "/w/state/s", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3</w/state/s>\n'
        '7 write(3</w/state/s>, "{}", 2) = 2\n'
        ' > /usr/lib/x86_64-linux-gnu/libc.so.6(__write+0x4d) [0x10e04d]\n'
        ' > /usr/bin/prog(main+0x20) [0x1140]\n'
        '8 rename("/w/state/a", "/w/state/b") = 0\n'
        ' > /usr/lib/x86_64-linux-gnu/libc.so.6(rename+0x7) [0x58a87]\n'
        ' > /usr/bin/prog() [0x1234]\n')
    ops = list(program_trace.operations(str(trace), "/w", "/w/state"))
    assert [op.kind for op in ops] == ["open", "write", "rename"]
    assert [op.payload for op in ops] == ["/home/me/save.py:12 in save"] * 2 + ["0x1234 in prog"]
    assert [op.note for op in ops] == ["pid 7", "pid 7", "pid 8"]


@needs_box
@pytest.mark.strace
@pytest.mark.bubblewrap
def test_stacks_name_the_native_frame_of_each_call(tmp_path, capsys):
    _state(tmp_path)
    code, report = _explore(tmp_path, capsys, ["sh", "-c", 'echo \'{"turn": 1}\' > "$1/save.json"', "sh", "{dir}"],
                            PY_CHECK, "M1", "--stacks")
    assert code == 1 and report["stacks"]
    assert all(" in " in s["first_op"] for s in report["stretches"][1:]), report["stretches"]


@pytest.mark.strace
@pytest.mark.bubblewrap
@needs_box
def test_a_shared_writable_map_in_the_folder_is_said_to_be_unseen(tmp_path, capsys):
    _state(tmp_path)
    program = [sys.executable, "-c", "import mmap, os, sys\nfd = os.open(sys.argv[1] + '/save.json', os.O_RDWR)\n"
               "m = mmap.mmap(fd, 0)\nm[0:1] = b'['\nm.flush()", "{dir}"]
    code, report = _explore(tmp_path, capsys, program, "true", "M1")
    assert any("mmap" in note and "save.json" in note for note in report["notes"]), report["notes"]


@pytest.mark.strace
@pytest.mark.bubblewrap
@needs_box
def test_the_first_broken_state_is_reproduced_by_a_real_kill_at_the_call_it_names(tmp_path, capsys):
    """The report's kill_before aims strace's fault injection: killed there for real, the program leaves
    the same broken file the explorer rebuilt (an emptied save.json)."""
    _state(tmp_path)
    script = 'printf \'{"turn": 1, "messages": []}\' > "$1/save.json"'
    code, report = _explore(tmp_path, capsys, ["sh", "-c", script, "sh", "{dir}"], PY_CHECK, "M1")
    first = next(s for s in report["stretches"] if s["broken"])["first_broken"]
    call = first["kill_before"]
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "state", copy)
    path = str(copy) + call["path"][len(report["watch"]):]
    import subprocess
    subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-P", path, "-e", f"trace={call['call']}",
                    "-e", f"inject={call['call']}:error=EIO:signal=KILL:when={call['nth']}", "--",
                    "sh", "-c", script, "sh", str(copy)], check=False)
    assert (copy / "save.json").read_bytes() == b""  # the kill landed where the explorer said: after O_TRUNC
    assert (tmp_path / "state" / "save.json").read_text() == '{"turn": 0}'


@pytest.mark.strace
@pytest.mark.bubblewrap
@needs_box
def test_bytes_copied_inside_the_kernel_are_said_to_be_unseen(tmp_path, capsys):
    _state(tmp_path)
    (tmp_path / "src").write_bytes(b"x" * 100)
    program = [sys.executable, "-c", "import os, sys\nsrc = os.open(sys.argv[2], os.O_RDONLY)\n"
               "dst = os.open(sys.argv[1] + '/copy', os.O_WRONLY | os.O_CREAT)\nos.copy_file_range(src, dst, 100)",
               "{dir}", str(tmp_path / "src")]
    code, report = _explore(tmp_path, capsys, program, "true", "M1")
    assert any("copy_file_range" in note and "zeros" in note for note in report["notes"]), report["notes"]
