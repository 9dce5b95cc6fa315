"""The lesson's four pictures are what the kit's own code draws, and say what the kit's crashes show.

``python -m grader.faces.pictures --lesson`` writes them to ``lessons/pictures/``. A committed
picture that differs from a fresh drawing (its words, its colours, its size) fails here, so a
change to the grader's outcomes, the protocol's fields or the drawing code cannot leave an old
picture in the lesson. The facts the pictures show are also checked where they come from: the
crash verdicts of the three save methods and of the two loops on the timeline.
"""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from grader.engine.checkpoint import FIELDS  # noqa: E402
from grader.faces import pictures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "lessons" / "pictures"
SPINE = ROOT / "lessons" / "02-checkpoints.md"
REDRAW = "python -m grader.faces.pictures --lesson"


def structure(svg: bytes) -> dict:
    """What a reader sees in an SVG: its size, every text in order, and the colours it fills with."""
    root = ET.fromstring(svg)
    texts = ["".join(el.itertext()).strip() for el in root.iter() if el.tag.endswith("}text")]
    colours = set(re.findall(rb"fill[:=]\s*\"?(#[0-9a-fA-F]{6})", svg))
    return {"size": (root.get("width"), root.get("height")), "texts": [t for t in texts if t],
            "colours": sorted(colours)}


@pytest.fixture(scope="module")
def fresh():
    return {name: pictures.lesson_svg(name) for name in pictures.LESSON_PICTURES}


@pytest.mark.parametrize("name", pictures.LESSON_PICTURES)
def test_the_committed_picture_is_what_the_code_draws(name, fresh):
    path = FOLDER / f"{name}.svg"
    assert path.exists(), f"{path.relative_to(ROOT)} is missing; run {REDRAW}"
    assert structure(path.read_bytes()) == structure(fresh[name]), \
        f"{path.relative_to(ROOT)} differs from what the kit draws now; run {REDRAW}"


def test_drawing_twice_gives_the_same_bytes(fresh):
    name = "six-fields"
    again = pictures.lesson_svg(name)
    assert again == fresh[name]
    assert b"<dc:date>" not in again and b"Matplotlib v" not in again  # no date, no version in the file


def test_a_changed_picture_is_caught(fresh):
    svg = fresh["six-fields"]
    edited = svg.replace(b"pendingToolUse", b"pendingToolCall", 1)
    assert edited != svg and structure(edited) != structure(svg)


def test_the_spine_shows_all_four_pictures():
    text = SPINE.read_text(encoding="utf-8")
    shown = re.findall(r"!\[[^\]]{40,}\]\(pictures/([a-z-]+)\.svg\)", text)  # with alt text a reader can use
    assert sorted(shown) == sorted(pictures.LESSON_PICTURES)


def test_the_fields_table_has_the_protocols_fields_and_level_1s_words():
    rows = pictures.field_rows()
    assert [r[0] for r in rows] == list(FIELDS)
    assert all(r[1] and r[2] and r[3] for r in rows)
    assert "None" in rows[-1][1] and rows[0][1].startswith("int")


def test_the_timeline_shows_what_save_point_a_buys():
    stretches = {s.key[-1]: s for s in pictures.turn_timeline(2)}
    both, b_only = (name for name, _ in pictures.TIMELINE_ROWS)
    tool = stretches["tool"]
    # With A, a kill while the tool runs leaves the call on disk; with B alone, nothing mentions it.
    assert tool.outcomes[both] == "ok" and "pending: classify_tickets" in tool.files[both][0]
    assert tool.outcomes[b_only] == "untraced" and tool.files[b_only] == ["turns: 1\npending: none"]
    # Save point A is the moment the file changes from the previous turn's to one naming the call.
    assert stretches["A"].files[both] == ["turns: 1\npending: none", "turns: 1\npending: classify_tickets"]
    assert all(s.outcomes[both] == "ok" for s in stretches.values())


def test_the_save_methods_survive_what_the_lessons_table_says():
    verdicts = pictures.save_method_verdicts()
    survives = {label.split()[0] + " " + label.split()[2]: [c.bad == 0 for c in cells]
                for label, cells in verdicts.items()}
    assert list(survives.values()) == [
        [False, False, False, False, False],  # in place: broken by a kill and by a power cut
        [True, True, False, False, False],    # temp and rename: survives a kill, not a power cut
        [True, True, True, True, True],       # with fsync of the file and the folder: survives both
    ]
    text = SPINE.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| ") and "|---" not in line]
    rows = [line for line in table if "save_checkpoint" not in line]
    assert len(rows) == 3 and "the task is lost" in rows[0]
    assert "older save" in rows[1].split("|")[3] and "a save that returned stays" in rows[2].split("|")[3]


def test_the_pictures_ship_with_the_lesson():
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8")
    assert "graft lessons" in manifest
    assert '"lessons"' in (ROOT / "setup.py").read_text(encoding="utf-8")  # setup.py copies lessons/ whole
