"""The exercise manifest: one ordered list of levels that every student command reads."""

import json

import pytest

from grader.levels import manifest


def write_manifest(root, levels):
    (root / "exercises").mkdir(parents=True, exist_ok=True)
    (root / "exercises" / "manifest.json").write_text(json.dumps({"version": 1, "levels": levels}))
    return manifest.load(root)


def entry(number, name=None, **extra):
    data = {"number": number, "name": name or f"level-{number}", "title": f"Title {number}",
            "folder": f"exercises/level{number}", "solution": f"solutions/level{number}", "files": ["agent.py"],
            "tests": ["test_agent.py"], "readme": "README.md", "hints": "hints.md", "module": "grader.levels.loop",
            "function": "run_agent", "planted": ["PARSE"], "crash_models": ["M1", "M2"]}
    data.update(extra)
    return data


def test_the_kits_manifest_is_in_order():
    kit = manifest.load()
    assert manifest.problems(kit) == []
    # The course's six levels come first; a level added after them needs no edit here.
    assert [level.number for level in kit.levels][:6] == [1, 2, 3, 4, 5, 6]


def test_the_manifest_names_the_contract_files_of_design_section_4():
    kit = manifest.load()
    files = {level.number: (level.files, level.function) for level in kit.levels}
    assert files[1] == (("checkpoint.py",), "save_checkpoint")
    assert files[4] == (("resume.py",), "resume_agent")
    for number in (2, 3, 5, 6):
        assert files[number] == (("agent.py",), "run_agent")


def test_problems_finds_disorder_duplicates_and_unknown_level_modules(tmp_path):
    kit = write_manifest(tmp_path, [entry(1), entry(3, name="level-1"), entry(2, module="grader.levels.magic"),
                                    entry(4, name="level-4", module="grader.levels.registry")])
    found = "\n".join(manifest.problems(kit))
    assert "numbered 1, 2, 3" in found
    assert "share a name: level-1" in found
    assert "'grader.levels.magic' cannot be imported" in found
    assert "'grader.levels.registry' defines no LEVEL" in found


def test_each_level_module_declares_its_checks_in_the_registry():
    from grader.levels import registry
    from grader.levels.interface import LevelModule

    kit = manifest.load()
    for level in kit.levels:
        assert isinstance(level.plugin, LevelModule)
        declared = {c.id for c in registry.checks(level.plugin.namespace)}
        # What the starter is planted to break are checks of the level's own namespace.
        assert set(level.planted) <= declared, (level.number, set(level.planted) - declared)


def test_a_level_whose_folder_is_missing_says_so(tmp_path):
    kit = write_manifest(tmp_path, [entry(1)])
    with pytest.raises(manifest.LevelMissing) as caught:
        kit.require(1)
    assert "exercises/level1/" in str(caught.value)
    with pytest.raises(manifest.ManifestError, match="There is no level 7"):
        kit.level(7)


def test_a_level_exists_once_its_contract_files_are_there(tmp_path):
    kit = write_manifest(tmp_path, [entry(1)])
    folder = tmp_path / "exercises" / "level1"
    folder.mkdir()
    assert not kit.level(1).exists()
    assert "has no agent.py" in kit.level(1).missing_message()
    (folder / "agent.py").write_text("")
    assert kit.require(1).starter_dir == folder


def test_the_root_is_found_from_a_subfolder(tmp_path, monkeypatch):
    write_manifest(tmp_path, [entry(1)])
    deep = tmp_path / "exercises" / "level1" / "notes"
    deep.mkdir(parents=True)
    monkeypatch.delenv("CRASHCOURSE_ROOT", raising=False)
    assert manifest.find_root(deep) == tmp_path.resolve()


def test_hints_parse_into_three_steps_per_task(tmp_path):
    path = tmp_path / "hints.md"
    path.write_text("# Level 2 hints\n\n## 1. Keep the file whole\n- What is on disk half-way through a write?\n"
                    "- Compare the file's name while the bytes go in\n  with its name afterwards.\n"
                    "- `os.replace`\n\n## 2. Save before the tool runs\n- Which call could vanish?\n- a\n- b\n")
    tasks = manifest.parse_hints(path)
    assert [(t.number, t.title) for t in tasks] == [(1, "Keep the file whole"), (2, "Save before the tool runs")]
    assert tasks[0].steps[1] == "Compare the file's name while the bytes go in with its name afterwards."
    assert len(tasks[0].steps) == 3 and tasks[0].steps[2] == "`os.replace`"


def test_readme_tasks_and_test_markers_are_read(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Level\n\nIntro\n\n## 1. First\n\ntext\n\n## 2. Second thing\n")
    assert manifest.readme_tasks(readme) == [(1, "First"), (2, "Second thing")]
    test = tmp_path / "test_x.py"
    test.write_text("@pytest.mark.task(taskno=1)\ndef a(): pass\n@pytest.mark.task(taskno=3)\ndef b(): pass\n")
    assert manifest.test_task_numbers([test]) == {1, 3}


def test_every_level_that_ships_answers_declares_them(tmp_path):
    """check's reminder reads the manifest's "answers"; grade's manual-review item reads the file in the
    level folder. Every level of the kit agrees, and a level that ships one undeclared is a problem."""
    for level in manifest.load().existing():
        shipped = (level.starter_dir / "answers.md").is_file()
        assert (level.answers == "answers.md") == shipped, (level.number, level.answers, shipped)
    kit = write_manifest(tmp_path, [entry(1), entry(2, answers="answers.md")])
    for number in (1, 2):
        (tmp_path / "exercises" / f"level{number}").mkdir()
    (tmp_path / "exercises" / "level1" / "answers.md").write_text("1. Why?\n")
    found = manifest.problems(kit)
    assert any("level 1 ships answers.md" in p for p in found), found
    assert any("level 2 names 'answers.md'" in p and "no such file" in p for p in found), found
