"""The lesson's own code passes the kit's own grader.

The spine's ``save_checkpoint``, ``load_checkpoint`` and ``run_agent`` are taken out of the Markdown
(top-level imports, classes, functions and upper-case constants, nothing that runs) and graded as a
learner's folder is: ``pytest exercises/levelN --submission DIR``. Level 1 grades the loader and the
six fields, level 2 the loop and the temp-then-rename save, level 3 the deeper page's durable save
in the same loop. A lesson that teaches code its own grader fails is the first thing a careful
learner notices, so this fails the moment the text and the grader part ways.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
SPINE = ROOT / "lessons" / "02-checkpoints.md"
DEEPER = ROOT / "lessons" / "02-checkpoints-deeper.md"
# What level 3 takes from the deeper page: the durable save and the helpers it calls.
DURABLE = ("sync_to_device", "fsync_folder", "make_folder", "save_checkpoint")


def _blocks(path):
    return "\n".join(re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S))


def definitions(source, names=None):
    """The imports, classes, functions and UPPER_CASE constants of ``source``, in order; with
    ``names``, only the classes and functions so named (imports always come along)."""
    tree = ast.parse(source)
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and (names is None or node.name in names):
            kept.append(node)
        elif (names is None and isinstance(node, ast.Assign)
              and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)):
            kept.append(node)
    return "\n\n\n".join(ast.get_source_segment(source, node) for node in kept) + "\n"


def spine_code():
    return definitions(_blocks(SPINE))


def durable_code():
    """The spine's code with the deeper page's durable save (and its helpers) after it, replacing its save."""
    return spine_code() + "\n\n" + definitions(_blocks(DEEPER), DURABLE)


def grade(level, code, folder, filename):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONDONTWRITEBYTECODE="1", COLUMNS="120")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"exercises/level{level}",
                           "--submission", str(folder)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_extracted_code_is_the_lessons_functions():
    names = {node.name for node in ast.parse(spine_code()).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert {"save_checkpoint", "load_checkpoint", "run_agent", "spend", "CheckpointError",
            "UnsupportedVersion"} <= names
    durable = durable_code()
    assert durable.count("def save_checkpoint(") == 2 and "os.fsync" in durable
    # The later definition wins when the module is imported: level 3 grades the durable one.
    assert durable.rindex("def save_checkpoint(") > durable.index("def fsync_folder(")


def test_the_spines_loader_and_fields_pass_level_1(tmp_path):
    code, out = grade(1, spine_code(), tmp_path / "spine", "checkpoint.py")
    assert code == 0, out[-4000:]
    assert "13 of 13 points" in out, out[-2000:]


def test_a_loader_that_lets_true_through_fails_level_1(tmp_path):
    """The control: the check the lesson warns about, taken out, is caught by the same grading."""
    source = spine_code()
    weakened = source.replace("type(version) is not int or version != 1", "version != 1")
    assert weakened != source, "the spine's version check changed; update this control"
    code, out = grade(1, weakened, tmp_path / "weak", "checkpoint.py")
    assert code == 1 and "test_load_refuses_versions_it_does_not_know" in out, out[-3000:]


def test_the_spines_loop_and_save_pass_level_2(tmp_path):
    code, out = grade(2, spine_code(), tmp_path / "spine", "agent.py")
    assert code == 0, out[-4000:]


def test_the_deeper_pages_durable_save_passes_level_3(tmp_path):
    code, out = grade(3, durable_code(), tmp_path / "durable", "agent.py")
    assert code == 0, out[-4000:]


def test_the_spines_save_is_not_durable(tmp_path):
    """Level 3 fails the spine's own save: the lesson's table says it does not survive a power cut."""
    code, out = grade(3, spine_code(), tmp_path / "spine", "agent.py")
    assert code == 1 and "test_the_data_is_on_disk_before_the_rename" in out, out[-3000:]


def test_the_loop_says_why_a_turn_has_one_call():
    text = SPINE.read_text(encoding="utf-8")
    section3 = text.split("\n## 3.", 1)[1].split("\n## 4.", 1)[0]
    assert '"disable_parallel_tool_use": True' in section3
    assert "level 5" in section3
