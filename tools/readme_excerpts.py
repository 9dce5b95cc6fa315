"""Check that every excerpt in README.md still matches what its command prints today.

An excerpt is a fenced block right after a marker line (an HTML comment, invisible on GitHub):

    <!-- excerpt: crashcourse demo 2 -->

The command runs from the kit's root with colour off and an 100-column terminal. The README may
leave lines out: a line that is only ``...`` (any indent) stands for one or more lines of output.
Everything else must be there, in order, and the lines between two ellipses must follow each
other in the output too. Runs of spaces count as one, and so do long rules (``====``), so a wider terminal does not matter.

    python tools/readme_excerpts.py            # check every excerpt; exit 1 on a mismatch
    python tools/readme_excerpts.py --show 2   # print what the second excerpt's command prints now
    python tools/readme_excerpts.py --skip selfcheck   # leave out the slow ones

``tests/test_readme_excerpts.py`` runs the quick ones on every CI run.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- excerpt: (?P<command>.+?) -->\s*$")
ELLIPSIS = "..."
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Excerpt:
    command: str
    lines: list
    line_no: int  # where the block starts in README.md, for messages


def excerpts(readme: Path = ROOT / "README.md") -> list[Excerpt]:
    """Every marked fenced block of ``readme``."""
    text = readme.read_text(encoding="utf-8").splitlines()
    out = []
    i = 0
    while i < len(text):
        m = MARKER.match(text[i])
        if m and i + 1 < len(text) and text[i + 1].startswith("```"):
            end = i + 2
            while end < len(text) and not text[end].startswith("```"):
                end += 1
            out.append(Excerpt(m.group("command"), text[i + 2:end], i + 3))
            i = end
        i += 1
    return out


def run(command: str, root: Path = ROOT, timeout: float = 600) -> str:
    """What ``command`` prints, run from ``root`` as a learner would, minus colour.

    ``crashcourse hint`` remembers what it showed in ``.crashcourse/`` of the folder it runs in, so
    it runs in a fresh folder (the kit found through CRASHCOURSE_ROOT) and always starts at hint 1.
    """
    argv = shlex.split(command)
    env = dict(os.environ, NO_COLOR="1", COLUMNS="100", CRASHCOURSE_ROOT=str(root))
    env.pop("FORCE_COLOR", None)
    exe = Path(sys.executable).parent
    if argv[0] in ("crashcourse", "pytest"):
        argv = [sys.executable, "-m", "grader" if argv[0] == "crashcourse" else "pytest", *argv[1:]]
    with tempfile.TemporaryDirectory(prefix="crashcourse-excerpt-") as fresh:
        cwd = fresh if command.startswith("crashcourse hint") else str(root)
        if argv[1:3] == ["-m", "pytest"]:
            argv += ["-p", "no:cacheprovider"]
        env["PATH"] = f"{exe}{os.pathsep}{env.get('PATH', '')}"
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return ANSI.sub("", proc.stdout + proc.stderr)


def _norm(line: str) -> str:
    # pytest's "==== FAILURES ====" and the matrix's rules stretch with the terminal.
    return re.sub(r"([=_─-])\1{2,}", r"\1\1\1", " ".join(line.split()))


def mismatch(excerpt: Excerpt, output: str) -> Optional[str]:
    """None when ``excerpt`` fits ``output``; else the first README line that does not, and why."""
    got = [_norm(line) for line in output.splitlines()]
    # Pieces of consecutive lines, split at the ellipses.
    pieces: list[list[tuple[int, str]]] = [[]]
    for n, line in enumerate(excerpt.lines):
        if line.strip() == ELLIPSIS:
            pieces.append([])
        else:
            pieces[-1].append((excerpt.line_no + n, _norm(line)))
    at = 0
    for piece in pieces:
        if not piece:
            continue
        want = [text for _, text in piece]
        found = next((i for i in range(at, len(got) - len(want) + 1) if got[i:i + len(want)] == want), None)
        if found is None:
            # Name the first line of the piece that is not where it should be.
            for k, (line_no, text) in enumerate(piece):
                hit = next((i for i in range(at, len(got) - k) if got[i:i + k + 1] == want[:k + 1]), None)
                if hit is None:
                    return f"README.md line {line_no}: {text!r} is not in what `{excerpt.command}` prints now"
            return f"README.md line {piece[0][0]}: the lines from here are not together in the output"
        at = found + len(want)
    return None


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", type=int, metavar="N", help="print what excerpt N (from 1) prints now")
    parser.add_argument("--skip", nargs="*", default=[], metavar="WORD",
                        help="leave out excerpts whose command contains WORD")
    args = parser.parse_args(argv)
    found = excerpts()
    if args.show:
        print(run(found[args.show - 1].command), end="")
        return 0
    bad = 0
    for i, excerpt in enumerate(found, 1):
        if any(word in excerpt.command for word in args.skip):
            print(f"{i}. {excerpt.command}: skipped")
            continue
        problem = mismatch(excerpt, run(excerpt.command))
        print(f"{i}. {excerpt.command}: {problem or 'matches'}")
        bad += problem is not None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
