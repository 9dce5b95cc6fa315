"""The lesson's text: its generated tables match the grader, its links resolve, its code runs, its spine stays short.

The crash-model and check tables in ``lessons/`` are rendered by ``lessons/make_tables.py`` from the
grader's own definitions; a check added to the grader and not to the lesson fails here. Every Python
block of the lesson and its deeper page runs, in order, in a scratch folder, so a claim the code
asserts (a buffer size, what is on disk inside a ``with`` block) is checked on the Python running the
tests, and on every other supported Python found under ``~/.pyenv``.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
SPINE = LESSONS / "02-checkpoints.md"
DEEPER = LESSONS / "02-checkpoints-deeper.md"
LESSON_FILES = sorted(LESSONS.glob("*.md"))
# Markdown outside lessons/ that links into it: its links must survive the lesson being reorganised.
LINKING_FILES = [ROOT / "README.md", *sorted((ROOT / "exercises").glob("level*/*.md"))]


def _load_make_tables():
    spec = importlib.util.spec_from_file_location("lesson_make_tables", LESSONS / "make_tables.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


make_tables = _load_make_tables()


# -- generated tables ----------------------------------------------------------------------------------

def _generated(text):
    return {m.group("name"): m.group("body") for m in make_tables.MARKER.finditer(text)}


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.name)
def test_generated_tables_are_what_the_grader_says(path):
    text = path.read_text(encoding="utf-8")
    assert make_tables.fill(text) == text, (
        f"{path.name}: a generated table differs from the grader's definitions; run python lessons/make_tables.py")


def test_the_deeper_page_carries_both_tables():
    tables = _generated(DEEPER.read_text(encoding="utf-8"))
    assert set(tables) == {"crash-models", "checks"}
    assert all(body.strip() for body in tables.values())


def test_every_crash_model_and_check_id_has_a_row():
    from grader.engine.crash_models import MODELS
    from grader.engine.invariants import INVARIANTS
    from grader.levels.fields import LEVEL1_CHECKS
    from grader.levels.resume import CHECKS

    tables = _generated(DEEPER.read_text(encoding="utf-8"))
    model_ids = re.findall(r"^\| (M\d) \|", tables["crash-models"], re.M)
    assert model_ids == list(MODELS)
    check_ids = set(re.findall(r"^\| `([^`]+)` \|", tables["checks"], re.M))
    assert set(LEVEL1_CHECKS) | set(CHECKS) | (set(INVARIANTS) - {"RESUME"}) <= check_ids


def test_a_table_that_drifted_from_the_grader_is_found():
    text = DEEPER.read_text(encoding="utf-8")
    drifted = text.replace("| M3 |", "| M3 (edited by hand) |", 1)
    assert drifted != text
    assert make_tables.fill(drifted) == text


def test_the_levels_of_a_check_come_from_the_manifest():
    rows = {(c.id, c.levels) for c in make_tables.check_catalogue()}
    assert ("DURABLE", (3,)) in rows          # only level 3 crashes under the power-cut models
    assert ("KEPT", (5,)) in rows and ("BYTES", (6,)) in rows
    assert ("REFUSE", (4,)) in rows and ("tokensUsed", (1,)) in rows
    assert ("PARSE", (2, 3, 5, 6)) in rows


# -- links ---------------------------------------------------------------------------------------------

LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading):
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())  # backticks, colons, quotes, dots go
    return text.replace(" ", "-")


def _anchors(path):
    seen, out = {}, set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"^(#{1,6})\s+(.*)$", line)
        if m and not in_code:
            slug = _slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(path):
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [m.group(1) for m in LINK.finditer(text)]


def test_the_anchor_rule_matches_githubs():
    assert _slug("Detail 2: `os.replace`, not `os.rename`, and what \"atomic\" promises") == \
        "detail-2-osreplace-not-osrename-and-what-atomic-promises"
    assert _slug("`tokensUsed` measures spend, not context size") == "tokensused-measures-spend-not-context-size"
    assert _slug("What `turns` counts when a turn calls several tools") == "what-turns-counts-when-a-turn-calls-several-tools"


@pytest.mark.parametrize("path", LESSON_FILES + LINKING_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path):
    broken = []
    for target in _links(path):
        if re.match(r"^[a-z]+:", target):
            continue  # an absolute URL: not checked offline
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: {dest.name} has no heading with anchor #{anchor}")
    assert not broken, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(broken)


def test_a_broken_anchor_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nSee [there](page.md#no-such-heading) and [here](#title).\n", encoding="utf-8")
    assert _links(page) == ["page.md#no-such-heading", "#title"]
    assert "no-such-heading" not in _anchors(page) and "title" in _anchors(page)


# -- shape of the spine ----------------------------------------------------------------------------------

def _prose_and_code_lines(path):
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_spine_reads_in_under_fifteen_minutes():
    lines = _prose_and_code_lines(SPINE)
    words = len(SPINE.read_text(encoding="utf-8").split())
    assert len(lines) <= 150, f"the lesson's spine has {len(lines)} non-blank lines; move detail to the deeper page"
    assert words <= 3000, f"the lesson's spine has {words} words (15 minutes is about 3,000)"


def test_the_three_goals_come_first_and_a_self_check_follows_the_atomic_write():
    text = SPINE.read_text(encoding="utf-8")
    before_first_section = text.split("\n## ", 1)[0]
    assert len(re.findall(r"^\d\. ", before_first_section, re.M)) == 3
    section4 = text.split("\n## 4.", 1)[1].split("\n## 5.", 1)[0]
    assert "**Check yourself.**" in section4 and "<details>" in section4


# -- the code runs -----------------------------------------------------------------------------------------

RUNNER = r"""
import os, re, sys, tempfile
src = ""
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        src += "\n".join(re.findall(r"```python\n(.*?)```", f.read(), re.S)) + "\n"
os.chdir(tempfile.mkdtemp(prefix="crashcourse-lesson-"))
exec(compile(src, "the lesson's code blocks", "exec"), {"__name__": "__lesson__"})
print("lesson code ran on", sys.version.split()[0])
"""


def _pythons():
    """This interpreter, plus any other supported CPython under ~/.pyenv (3.10 to 3.13)."""
    found = {sys.version_info[:2]: sys.executable}
    base = Path.home() / ".pyenv" / "versions"
    if base.is_dir():
        for folder in sorted(base.iterdir()):
            m = re.match(r"^3\.(1[0-3])\.\d+$", folder.name)
            exe = folder / "bin" / "python"
            if m and exe.exists():
                found.setdefault((3, int(m.group(1))), str(exe))
    return [found[v] for v in sorted(found)]


@pytest.mark.parametrize("python", _pythons(), ids=lambda p: Path(p).parts[-3] if ".pyenv" in p else "this-python")
def test_the_lessons_code_blocks_run_in_order(python):
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    proc = subprocess.run([python, "-c", RUNNER, str(SPINE), str(DEEPER)], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "inside the with block: 0 bytes" in proc.stdout
