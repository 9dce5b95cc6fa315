"""The pieces of ``crashcourse grade`` that need no sandbox: wire decoding, argument sync, zips, reports."""

from __future__ import annotations

import json
import zipfile

import pytest
from pathlib import Path

from grader.grading import judge
from grader.grading import reports
from grader.grading import stand_in, wire
from grader.grading.batch import unpack
from grader.grading.gradescope import build_package
from grader.engine.recorder import Op

KIT = Path(__file__).resolve().parent.parent


def roundtrip(value, objects=None):
    return wire.unframe(wire.frame({"value": wire.encode(value)}), objects)["value"]


def from_worker(message, objects):
    """What the judge reads when the worker sends ``message`` exactly as written (JSON, tags and all)."""
    return wire.unframe(wire.frame({"value": message}), objects)["value"]


def test_worker_data_comes_back_as_the_same_values():
    value = {"a": [1, 2.5, None, True], "b": b"\x00\xff", "t": (1, "x"), 3: "int key", "$x": "dollar key"}
    assert roundtrip(value) == value


def test_a_message_that_points_outside_itself_or_lies_about_its_length_is_refused():
    def framed(body: dict, blob: bytes) -> bytes:
        text = json.dumps(body).encode()
        return b"%010d%010d" % (len(text), len(blob)) + text + blob

    assert wire.unframe(framed({"v": {"$B": [1, 2]}}, b"abc")) == {"v": b"bc"}
    assert wire.unframe(framed({"v": {"$B": [0, 99]}}, b"abc")) is None, "bytes past the end of the message"
    assert wire.unframe(framed({"v": {"$B": [-1, 2]}}, b"abc")) is None
    assert wire.unframe(framed({"v": 1}, b"")[:-1]) is None, "a message shorter than its header says"
    assert wire.unframe(b"\x00\x00\x00\x02{}") is None
    assert wire.unframe(b"+000000002000000000{}") is None, "a length that is not ten digits"
    assert wire.reply_size(b" 00000000200000000000") > wire.MAX_MESSAGE, "so the worker that sent it is stopped"


def test_an_object_the_worker_cannot_send_comes_back_as_a_description_not_code():
    class Sneaky:
        def __repr__(self):
            return "Sneaky()"
    got = roundtrip([Sneaky()])[0]
    assert isinstance(got, wire.RemoteObject) and repr(got) == "Sneaky()"


def test_loop_events_from_the_worker_are_dropped_and_file_operations_kept():
    ops = [Op(0, "model_end", payload=(1, {})), Op(1, "write", api="write", path="/x/c.json", handle=1, offset=0,
                                                     data=b"{}", flags=frozenset({"create"}))]
    got = roundtrip(ops)
    assert isinstance(got[1].data, bytes), "written bytes travel raw beside the JSON"
    assert got[0] is None, "only the judge may record model and tool calls"
    assert got[1].kind == "write" and got[1].data == b"{}" and got[1].path == "/x/c.json"


def test_an_argument_the_function_changed_is_brought_back_keeping_what_did_not_change():
    client = object()
    started = 12.5
    state = {"turns": 1, "client": client, "startedAt": started, "messages": [{"role": "user"}]}
    objects: dict = {}
    sent = stand_in.prepare(state, objects)
    assert isinstance(sent["client"], wire.Stand)
    changed = {"turns": 2, "client": {"$o": id(client)}, "startedAt": 12.5, "messages": [{"role": "user"}, {"x": 1}]}
    stand_in.merge(state, from_worker(changed, objects))
    assert state["turns"] == 2 and state["client"] is client and state["startedAt"] is started
    assert state["messages"][-1] == {"x": 1}
    removed = {"turns": 2, "startedAt": 12.5, "messages": []}
    stand_in.merge(state, from_worker(removed, objects))
    assert "client" not in state


def test_a_zip_that_reaches_outside_its_folder_is_refused(tmp_path):
    bad = tmp_path / "mallory.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("../evil.py", "x = 1")
    assert "will not unpack" in unpack(bad, tmp_path / "out")
    assert not (tmp_path / "evil.py").exists()


def test_a_zip_of_the_folder_is_looked_into(tmp_path):
    good = tmp_path / "alice.zip"
    with zipfile.ZipFile(good, "w") as z:
        z.writestr("alice/agent.py", "x = 1")
    assert unpack(good, tmp_path / "out") is None
    assert (tmp_path / "out" / "agent.py").read_text() == "x = 1"


@pytest.mark.parametrize("shape", ["folder", "zip"])
def test_a_whole_workspace_handed_in_is_found_at_any_depth(tmp_path, shape):
    """student/exercises/level2/agent.py (with level 1's files beside it) grades level 2's file, as a
    zip with a nested folder already did; answers.md comes from the same folder."""
    files = {"student/exercises/level2/agent.py": "x = 2", "student/exercises/level2/answers.md": "mine",
             "student/exercises/level1/checkpoint.py": "x = 1", "student/README.md": "workspace",
             "student/exercises/level3/agent.py": "x = 3"}
    if shape == "zip":
        source = tmp_path / "ada.zip"
        with zipfile.ZipFile(source, "w") as z:
            for name, text in files.items():
                z.writestr(name, text)
    else:
        source = tmp_path / "ada"
        for name, text in files.items():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_text(text)
    out = tmp_path / "out"
    assert unpack(source, out, ("agent.py",), "level2") is None
    assert (out / "agent.py").read_text() == "x = 2" and (out / "answers.md").read_text() == "mine"
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(p.name for p in [source, out])


def test_a_submission_with_two_candidates_and_none_named_for_the_level_is_left_as_it_is(tmp_path):
    source = tmp_path / "bo"
    for folder in ("a", "b"):
        (source / folder).mkdir(parents=True)
        (source / folder / "agent.py").write_text(folder)
    (source / "notes.txt").write_text("x")
    assert unpack(source, tmp_path / "out", ("agent.py",), "level2") is None
    assert not (tmp_path / "out" / "agent.py").exists()  # the tests then say there is no agent.py


def test_the_written_part_of_a_readme_is_found(tmp_path):
    (tmp_path / "README.md").write_text("# L\n## 1. Save\ntext\n## 2. Explain why (manual review)\n## 3. Load\n")
    assert judge.written_tasks(tmp_path) == {2}


def test_checks_are_read_from_the_ids_a_test_recorded_never_from_its_text():
    test = {"output": "9 of 122 crash states break PARSE, WHOLE.\n\nTRACE broken: every tool call...",
            "checks": ["loop/TRACE", "resume/CAP", "fields/turns", "loop/NOPE", "magic/TRACE", 7]}
    assert reports.tripped(test) == {("loop", "TRACE"), ("resume", "CAP"), ("fields", "turns")}
    assert reports.tripped({"output": test["output"]}) == set()


def test_the_markdown_report_counts_students_per_invariant():
    fail = {"name": "t", "status": "failed", "score": 0.0, "max_score": 1.0, "output": "x", "checks": ["loop/PARSE"]}
    ok = {"name": "t", "status": "passed", "score": 1.0, "max_score": 1.0, "output": ""}
    batch = {"level": 2, "submissions": [
        {"id": "a", "score": 0.0, "max_score": 1.0, "status": "failed", "error": None, "tests": [fail]},
        {"id": "b", "score": 1.0, "max_score": 1.0, "status": "passed", "error": None, "tests": [ok]}]}
    md = reports.to_markdown(batch)
    assert "| PARSE | 1 (50%) |" in md
    assert reports.to_csv(batch).splitlines()[1:] == ["a,failed,0,1,,t,t: x,0", "b,passed,1,1,,,,1"]


def test_the_gradescope_package_has_its_scripts_and_no_solutions(tmp_path):
    out = build_package(2, str(tmp_path / "ag.zip"), seed=7)
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "kit/pyproject.toml", "kit/grader/grading/judge.py",
                "kit/grader/kit/exercises/level2/test_agent.py", "kit/grader/kit/exercises/manifest.json"} <= names
        assert not any("solutions" in n.split("/") for n in names)
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111
        # The seed is in private.json, root's alone (not on run_autograder's command line).
        assert "--seed" not in z.read("run_autograder").decode()
        assert "--private /autograder/source/private.json" in z.read("run_autograder").decode()
        assert (z.getinfo("private.json").external_attr >> 16) & 0o777 == 0o600


def test_links_in_a_submission_are_dropped(tmp_path):
    source = tmp_path / "bob"
    source.mkdir()
    (source / "agent.py").write_text("x = 1")
    (source / "answers.md").symlink_to("/etc/hostname")
    assert unpack(source, tmp_path / "out") is None
    assert (tmp_path / "out" / "agent.py").exists() and not (tmp_path / "out" / "answers.md").exists()


def test_the_packaged_kit_grades_a_submission_the_way_gradescope_runs_it(tmp_path, grading_env):
    """run_autograder's command, run from the unzipped package (not this repository), on a starter."""
    import subprocess
    import sys

    out = build_package(2, str(tmp_path / "ag.zip"))
    source = tmp_path / "source"
    with zipfile.ZipFile(out) as z:
        z.extractall(source)
    script = (source / "run_autograder").read_text()
    assert "cd /autograder/source/kit" in script and "gradescope-run --level 2" in script
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "agent.py").write_bytes((KIT / "exercises" / "level2" / "agent.py").read_bytes())
    results = tmp_path / "results" / "results.json"
    # `python -m` puts the working folder first on the path: the packaged grader/, not this repository's.
    where = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"], cwd=source / "kit",
                           capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(source / "kit" / "grader" / "__init__.py"), where.stdout + where.stderr
    proc = subprocess.run([sys.executable, "-m", "grader", "gradescope-run", "--level", "2", "--timeout", "30",
                           "--submission", str(tmp_path / "submission"), "--results", str(results)],
                          cwd=source / "kit", capture_output=True, text=True, timeout=300,
                          env=grading_env(tmp_path / "grading-tmp"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(results.read_text())
    assert result["score"] == 3.0, result["output"]
    assert {t["name"] for t in result["tests"] if t.get("score") == t.get("max_score") and t["max_score"]} == {
        "test_the_loop_still_finishes_the_task", "test_the_temp_file_sits_beside_the_checkpoint",
        "test_the_file_is_current_when_the_model_is_called"}


JUDGE_BOTH_WAYS = """
import json, os, shutil, sys, tempfile, uuid
sys.path.insert(0, {kit!r})
from grader.grading import judge
level = os.path.join({kit!r}, "exercises", "level2")
config = judge.prepare_config(level, examples=1) if {reuse!r} else None
root = tempfile.mkdtemp(prefix="crashcourse-grade-")
shutil.copytree({folder!r}, os.path.join(root, "submission"))
result = judge.run_judge(level, os.path.join(root, "submission"), root, uuid.uuid4().hex, examples=1,
                         config=config, read_only=False)
shutil.rmtree(root, ignore_errors=True)
sys.__stdout__.write("RESULT " + json.dumps([(t["name"], t["status"]) for t in result["tests"]]) + "\\n")
"""


def test_a_judge_gives_the_same_verdicts_with_a_configuration_parsed_ahead_or_its_own(tmp_path, grading_env):
    import subprocess
    import sys

    folder = tmp_path / "starter"
    folder.mkdir()
    (folder / "agent.py").write_bytes((KIT / "exercises" / "level2" / "agent.py").read_bytes())
    got = []
    for reuse in (True, False):
        code = JUDGE_BOTH_WAYS.format(kit=str(KIT), reuse=reuse, folder=str(folder))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env=grading_env(tmp_path / "grading-tmp"))
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        assert lines, proc.stderr[-2000:]
        got.append(json.loads(lines[-1][len("RESULT "):]))
    assert got[0] == got[1]
    assert ["test_a_crash_mid_save_never_leaves_half_a_file", "failed"] in got[0]
    assert ["test_the_loop_still_finishes_the_task", "passed"] in got[0]


def test_a_worker_passes_on_only_the_output_the_judge_keeps(monkeypatch):
    """Past the first 64 KiB a submission's prints are counted, not written: the kernel trace would
    print every byte written to the pipe, for a judge that keeps only the first 64 KiB."""
    import io

    from grader.grading import worker

    monkeypatch.setattr(worker._Capped, "written", 0)
    monkeypatch.setattr(worker._Capped, "dropped", 0)
    out, err = io.StringIO(), io.StringIO()
    stdout, stderr = worker._Capped(out), worker._Capped(err)
    print("é" * 1000, file=stdout)  # 2001 bytes in UTF-8
    print("x" * 4_000_000, file=stderr)
    print("after", file=stdout)
    kept = worker._Capped.KEPT
    assert len(out.getvalue().encode()) + len(err.getvalue().encode()) == kept
    assert err.getvalue() == "x" * (kept - 2001)
    assert worker._Capped.dropped == 2001 + 4_000_001 + 6 - kept
    assert stdout.encoding == out.encoding and stdout.getvalue is not None  # anything else is the stream's


def test_a_built_in_exception_crosses_from_the_box_as_itself_whatever_its_constructor():
    """The judge rebuilds what the worker raised from its own arguments: a UnicodeDecodeError takes five
    (rebuilt from its message alone it was 'TypeError: function takes exactly 5 arguments'), an
    OSError keeps its errno and file name, a KeyError its key."""
    from grader.grading import worker
    module = type("Module", (), {"_module_name": "submission.resume", "_exceptions": {}, "_box": None})()
    made = []
    for raise_it in (lambda: b"{\"a\": \"\xc3".decode("utf-8"), lambda: open("/no/such/folder/checkpoint.json"),
                     lambda: {}["turns"], lambda: int("x")):
        try:
            raise_it()
        except Exception as exc:  # noqa: BLE001 - each is sent as the worker sends it
            sent = wire.unframe(wire.frame({"error": worker.describe_exception(exc, "resume.py")}))["error"]
            got = stand_in.RemoteModule._exception(module, sent)
            assert type(got) is type(exc) and str(got) == str(exc) and got.args == exc.args, (got, exc)
            made.append(got)
    assert made[0].reason == "unexpected end of data" and made[1].errno == 2 and made[1].filename.endswith(".json")


def test_an_exception_whose_arguments_cannot_cross_keeps_its_type_and_its_message():
    module = type("Module", (), {"_module_name": "submission.resume", "_exceptions": {}, "_box": None})()
    got = stand_in.RemoteModule._exception(module, {"type": "UnicodeDecodeError", "mro": ["UnicodeDecodeError",
                                                    "UnicodeError", "ValueError", "Exception", "BaseException", "object"],
                                                    "message": "'utf-8' codec can't decode byte 0xff", "args": None})
    assert isinstance(got, UnicodeDecodeError) and str(got) == "'utf-8' codec can't decode byte 0xff"


def test_a_sweep_removes_what_a_run_made_and_names_what_it_changed(tmp_path):
    """Between the runs of a fault check's steps (grader.grading.box.sweep): what a run made anywhere
    in the box's folder goes, what it changed of the files before it is named, the skipped folders
    are left alone."""
    from grader.grading.box import listing, sweep
    (tmp_path / "kept").write_text("as handed in")
    (tmp_path / "changed").write_text("before")
    (tmp_path / "skipped").mkdir()
    (tmp_path / "old").mkdir()
    before = listing(str(tmp_path), (str(tmp_path / "skipped"),))
    assert set(before) == {"kept", "changed", "old"}
    (tmp_path / "note").write_text("run 1")
    (tmp_path / "old" / "note").write_text("run 1")
    (tmp_path / "made" / "deep").mkdir(parents=True)
    (tmp_path / "made" / "deep" / "note").write_text("run 1")
    (tmp_path / "skipped" / "note").write_text("run 1")
    (tmp_path / "changed").write_text("after, and longer")
    assert sweep(str(tmp_path), before, (str(tmp_path / "skipped"),)) == ["changed"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["changed", "kept", "old", "skipped"]
    assert list((tmp_path / "old").iterdir()) == [] and (tmp_path / "skipped" / "note").exists()
