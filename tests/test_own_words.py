"""The kit's code comments are in its own words: no run of eight words shared with the seed lesson.

``/work/shared/tools/verbatim_check.py`` looks for runs of ten words in prose, comments and long
strings. Comments are short and sit right next to code that follows the seed's protocol, so a
paraphrase there shows sooner: this test holds every comment in the kit's Python (the package,
the starters and solutions, the notebook and its builder, the lesson's scripts) to eight. The seed
is not part of the repository; point ``CRASHCOURSE_SEED`` at it, or the test is skipped.
"""

import io
import json
import os
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The seed sits in shared/, beside the clone (as the developers and CI lay it out), or where
# CRASHCOURSE_SEED says.
_SEEDS = [ROOT.parent / "shared", Path("/work/shared")]
SEED = Path(os.environ.get("CRASHCOURSE_SEED") or next(
    (str(s / "source" / "lesson-2-checkpoints.txt") for s in _SEEDS if (s / "source").is_dir()),
    "shared/source/lesson-2-checkpoints.txt"))
RUN = 8
FOLDERS = ("grader", "exercises", "solutions", "notebooks", "lessons", "tools")
WORD = re.compile(r"[a-z0-9']+")


def words(text):
    return WORD.findall(text.lower().replace("\u2019", "'"))


def comments(source):
    """The text of every ``#`` comment in ``source`` (nothing, if it does not tokenize)."""
    try:
        return [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def comment_text(path):
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        cells = json.loads(raw).get("cells", [])
        return "\n".join(c for cell in cells if cell.get("cell_type") == "code"
                         for c in comments("".join(cell.get("source", ""))))
    return "\n".join(comments(raw))


def shared_runs(text, grams):
    w = words(text)
    return [" ".join(w[i:i + RUN]) for i in range(len(w) - RUN + 1) if tuple(w[i:i + RUN]) in grams]


@pytest.fixture(scope="module")
def grams():
    if not SEED.is_file():
        pytest.skip(f"the seed lesson is not at {SEED}; set CRASHCOURSE_SEED to check comments against it")
    src = words(SEED.read_text(encoding="utf-8"))
    return {tuple(src[i:i + RUN]) for i in range(len(src) - RUN + 1)}


def kit_files():
    return [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*"))
            if p.suffix in (".py", ".ipynb") and p.is_file() and "kit" not in p.relative_to(ROOT).parts[1:2]]


def test_no_comment_shares_eight_words_with_the_seed(grams):
    found = {}
    for path in kit_files():
        runs = shared_runs(comment_text(path), grams)
        if runs:
            found[str(path.relative_to(ROOT))] = runs[0]
    assert not found, "comments that follow the seed word for word (reword them):\n" + "\n".join(
        f"  {name}: ... {run} ..." for name, run in found.items())


def test_the_check_finds_a_paraphrase_in_a_comment(grams):
    source = ("state = {}\n"
              "# Save point A: the model has named a tool and it has not run yet.\n"
              "x = 'the model has named a tool and it has not run yet'  # a string is not a comment\n")
    assert shared_runs(comment_text_of(source), grams) == ["save point a the model has named a",
                                                           "point a the model has named a tool"]


def comment_text_of(source):
    return "\n".join(comments(source))


def test_the_kit_files_include_the_starters_solutions_and_notebook():
    names = {str(p.relative_to(ROOT)) for p in kit_files()}
    assert {"exercises/level2/agent.py", "solutions/level3/agent.py", "notebooks/build_walkthrough.py",
            "notebooks/02-checkpoints-walkthrough.ipynb", "grader/faces/pictures.py"} <= names
