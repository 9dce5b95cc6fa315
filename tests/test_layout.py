"""The one way a crash state becomes files (grader.engine.layout): only plain names inside the folder.

Under ``crashcourse grade`` the names of a crash state come from the box, and the judge lays them
out from outside it: every bad name is refused, and nothing is written outside the folder.
"""

from __future__ import annotations

import os

import pytest

from grader.engine import layout
from grader.engine.layout import Layout, UnsafeName, lay_out

BAD_NAMES = [
    "/etc/passwd",                 # absolute
    "..",                          # the parent itself
    "../outside.txt",              # climbs out
    "a/../../outside.txt",         # climbs out after a step in
    "a/..",                        # ends on a climb
    "",                            # empty
    ".",                           # the folder itself
    "./checkpoint.json",           # a '.' part: not normalised
    "a/./b",
    "a//b",                        # empty part
    "a/",                          # trailing slash
    "checkpoint.json\0.tmp",       # NUL
    "x" * 256,                     # one part too long for a file name
    "/".join(["d"] * 40),          # too deep
    "a/" * 600 + "b",              # too long altogether
    "\ud800.tmp",                  # a lone surrogate no file system name can hold
]


@pytest.fixture
def judge(tmp_path):
    """A judge's temp folder with a checkpoint folder inside, and a file beside it that must not change."""
    work = tmp_path / "work"
    (work / "checkpoints").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"the instructor's file")
    return work, outside


def _everything(root) -> dict:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = None if os.path.isdir(path) else open(path, "rb").read() \
                if not os.path.islink(path) else ("link", os.readlink(path))
    return found


@pytest.mark.parametrize("name", BAD_NAMES, ids=lambda n: repr(n)[:40])
def test_every_bad_name_is_refused_and_nothing_is_written(judge, name, tmp_path):
    work, outside = judge
    before = _everything(tmp_path)
    with pytest.raises(UnsafeName) as raised:
        lay_out(str(work / "checkpoints"), {"checkpoint.json": b"{}", name: b"planted"}, within=str(work))
    # Every name is checked before anything is written: the refused state leaves nothing behind.
    assert _everything(tmp_path) == before
    said = str(raised.value)
    assert "checkpoint folder" in said and "broken" in said and repr(name)[:40] in said and repr(name)[-40:] in said
    # The same name as a folder of the state is refused too.
    with pytest.raises(UnsafeName):
        lay_out(str(work / "checkpoints"), {}, dirs=[name], within=str(work))
    assert outside.read_bytes() == b"the instructor's file"


@pytest.mark.parametrize("name", [7, b"checkpoint.json", None])
def test_a_name_that_is_not_text_is_refused(judge, name):
    work, _ = judge
    with pytest.raises(UnsafeName):
        lay_out(str(work / "checkpoints"), {name: b"x"}, within=str(work))


def test_plain_names_are_laid_out_at_any_depth(judge):
    work, _ = judge
    files = {"checkpoint.json": b"{}", ".checkpoint.json.tmp": b"{\"ver", "wal/0001.log": b"line\n",
             "wal/deep/er/x": b"", "a..b": b"dots inside a name are fine", "...": b"so is this",
             "ü n i c ø d e": b"\xff"}
    lay_out(str(work / "checkpoints"), files, dirs=["empty", "wal/deep"], within=str(work))
    for name, data in files.items():
        assert (work / "checkpoints" / name).read_bytes() == data
    assert (work / "checkpoints" / "empty").is_dir()


def test_the_folder_and_its_parents_below_the_judges_folder_are_made(judge):
    work, _ = judge
    lay_out(str(work / "run data" / "check points"), {"checkpoint.json": b"1"}, within=str(work))
    assert (work / "run data" / "check points" / "checkpoint.json").read_bytes() == b"1"
    with pytest.raises(ValueError):
        lay_out(str(work.parent / "elsewhere"), {"checkpoint.json": b"1"}, within=str(work))


@pytest.mark.parametrize("planted", ["checkpoint.json", "wal"])
def test_a_link_planted_in_the_folder_is_never_followed(judge, tmp_path, planted):
    """A link where the state puts a file, or a folder on the way to one, is refused, not followed."""
    work, outside = judge
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(outside if planted == "checkpoint.json" else target, work / "checkpoints" / planted)
    with pytest.raises(UnsafeName) as raised:
        lay_out(str(work / "checkpoints"), {"checkpoint.json": b"{}", "wal/0001.log": b"x"}, within=str(work))
    assert "link" in str(raised.value)
    assert outside.read_bytes() == b"the instructor's file"
    assert list(target.iterdir()) == []


def test_a_link_in_place_of_the_folder_itself_is_never_followed(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, work / "checkpoints")
    with pytest.raises(UnsafeName):
        lay_out(str(work / "checkpoints"), {"checkpoint.json": b"{}"}, within=str(work))
    assert list(target.iterdir()) == []


def test_a_fifo_planted_where_a_file_goes_does_not_hang_the_judge(judge):
    work, _ = judge
    os.mkfifo(work / "checkpoints" / "checkpoint.json")
    with pytest.raises(UnsafeName):
        lay_out(str(work / "checkpoints"), {"checkpoint.json": b"{}"}, within=str(work))


def test_remove_walk_and_read_never_follow_links(judge, tmp_path):
    """What level 6's reader does between two crash states: remove, remove a tree, walk, read back."""
    work, outside = judge
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_bytes(b"keep me")
    folder = work / "checkpoints"
    (folder / "sub").mkdir()
    (folder / "sub" / "f").write_bytes(b"1")
    os.symlink(keep, folder / "sub" / "link-to-folder")
    os.symlink(outside, folder / "link-to-file")
    with Layout(str(folder), within=str(work)) as lay:
        walked = {rel: (sorted(dirs), sorted(files)) for rel, dirs, files in lay.walk()}
        assert walked == {"": (["sub"], ["link-to-file"]), "sub": ([], ["f", "link-to-folder"])}
        assert lay.read("link-to-file") is None
        assert lay.read("sub/f") == b"1"
        assert lay.read("missing") is None
        lay.remove("link-to-file")
        lay.remove_tree("sub")
        lay.remove("not/there")
        lay.write("j", b"ab")
        lay.write("j", b"cd", append=True)
        assert lay.read("j") == b"abcd"
        with pytest.raises(UnsafeName):
            lay.remove("../outside.txt")
    assert sorted(os.listdir(folder)) == ["j"]
    assert (keep / "precious").read_bytes() == b"keep me"
    assert outside.read_bytes() == b"the instructor's file"


def test_every_place_that_lays_out_a_crash_state_goes_through_the_layout():
    """No level or engine module writes a crash state's names with open(os.path.join(folder, name))."""
    import grader
    root = os.path.dirname(grader.__file__)
    offenders = []
    for sub in ("engine", "levels", "grading"):
        for dirpath, _dirs, files in os.walk(os.path.join(root, sub)):
            for file in files:
                if not file.endswith(".py") or file == "layout.py":
                    continue
                text = open(os.path.join(dirpath, file), encoding="utf-8").read()
                for needle in ("state.files.items()", "files.items():\n            if os.sep in name",
                               "os.path.join(folder, name), \"wb\"", "os.path.join(directory, name), \"wb\""):
                    if needle in text:
                        offenders.append(f"{sub}/{file}: {needle}")
    assert offenders == []
    assert layout.MAX_COMPONENT == 255


def test_a_run_that_reports_a_temp_file_outside_its_folder_is_refused_not_laid_out(load_module, tmp_path):
    """The hostile corpus's lays_out_outside, run in-process: it tells the recorder of a temp file
    whose name climbs out of the folder (and removes it again, so the final files agree). The crash
    that leaves it is the start of a second run: the judge refuses to lay it out, and says why."""
    from pathlib import Path

    from grader.engine.explore import NESTED_FOLDER, explore_loop
    from grader.engine.scripted import support_tickets

    escaped = Path("/tmp/crashcourse-escaped.txt")
    escaped.unlink(missing_ok=True)
    corpus = Path(__file__).parent / "corpus" / "hostile" / "lays_out_outside.py"
    module = load_module(corpus)
    result = explore_loop(module.run_agent, support_tickets(0), models=("M1", "M2"), directory=NESTED_FOLDER,
                          rerun=True, workdir=str(tmp_path))
    assert not escaped.exists(), escaped.read_text()
    assert not result.ok
    assert result.error is not None and "tmp/crashcourse-escaped.txt" in result.error
    assert "'..' part, which climbs out of the folder" in result.error


def test_level_6s_reader_never_follows_a_link_its_loader_planted(tmp_path):
    """A loader (the learner's code, which may run without a box) swaps the journal's folder for a link
    to somewhere else: the reader lays the next crash state out inside its own folder or refuses it,
    never writing through the link; a state that names a file outside is refused before anything."""
    from grader.engine.crash_models import CrashState
    from grader.levels.journal import LoaderReader

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def load(directory):
        wal = os.path.join(directory, "wal")
        if os.path.isdir(wal) and not os.path.islink(wal):
            import shutil
            shutil.rmtree(wal)
            os.symlink(elsewhere, wal)
        return {"n": 1}

    reader = LoaderReader(load, str(tmp_path / "scratch"))
    reader(CrashState(0, "M1", {"checkpoint.json": b"{}", "wal/0001.log": b"a\n"}))
    try:
        reader(CrashState(1, "M1", {"checkpoint.json": b"{}", "wal/0001.log": b"a\nb\n", "wal/0002.log": b"c"}))
    except UnsafeName as exc:
        assert "link" in str(exc)
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(UnsafeName):
        reader(CrashState(2, "M1", {"checkpoint.json": b"{}", "../../escaped": b"x"}))
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "scratch" / "escaped").exists()
