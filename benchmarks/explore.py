"""Real programs through ``crashcourse explore``, each finding reproduced, written to benchmarks/explore.md.

    python benchmarks/explore.py                  # every program, models M1 M2 M3 M5, 2 checker jobs
    python benchmarks/explore.py --only git sqlite --jobs 1
    python benchmarks/explore.py --scale          # also: checker cost, states/s, a million writes sampled

For each program: a small folder is made, ``crashcourse explore --json`` runs the program once and
checks every crash state with the program's own checker, and each broken stretch's first broken
state is then reproduced without the explorer's model of the disk:

* the program is run again on a fresh copy of the folder under ``strace -P PATH -e inject=CALL:
  error=EIO:signal=KILL:when=N``, which kills it for real at the call after the crash point (the
  call is never made, every call before it was);
* for a power-cut state (M3, M5) the killed folder is then changed the way the lost operations
  say: a file whose unsynced data was lost is cut back to what was fsynced (a file created and
  never fsynced ends up empty, as ext4's delayed allocation leaves it); a lost unlink or rename
  puts back the file as a second real kill, just before that call, left it; a lost create removes
  the name;
* the checker runs on that folder. A finding is reported only when this reproduction breaks too.

Each program's folder gets an ``acked`` file once the program returned (``PROGRAM && echo >
acked``): the checkers accept the old state or the new one, but once ``acked`` exists, only the new.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = "M1,M2,M3,M5"


@dataclass
class Program:
    key: str
    title: str
    setup: str                      # shell run in the base folder to make ./folder (and anything else)
    run: str                        # the program, in sh, with "$1" the folder
    check: str                      # the checker script, "$1" the crash state's folder
    notes: list = field(default_factory=list)


ACK = ' && echo > "$1/acked"'

GIT_CHECK = r"""
d="$1"
rm -f "$d"/.git/index.lock "$d"/.git/HEAD.lock "$d"/.git/refs/heads/*.lock
out=$(git -C "$d" fsck --no-progress --no-dangling 2>&1) || { echo "$out" | head -5; exit 1; }
log=$(git -C "$d" log --format=%s 2>&1) || { echo "$log" | head -3; exit 1; }
if [ -e "$d/acked" ] && [ "$(echo "$log" | head -1)" != second ]; then echo "acked, but the log says: $log"; exit 1; fi
exit 0
"""

SQLITE_CHECK = r"""
d="$1"
ok=$(sqlite3 "$d/t.db" "PRAGMA integrity_check" 2>&1) || { echo "$ok"; exit 1; }
[ "$ok" = ok ] || { echo "integrity_check: $ok"; exit 1; }
n=$(sqlite3 "$d/t.db" "SELECT count(*) FROM t" 2>&1) || { echo "$n"; exit 1; }
case "$n" in 1|2) ;; *) echo "rows: $n"; exit 1;; esac
if [ -e "$d/acked" ] && [ "$n" != 2 ]; then echo "the insert returned, but its row is gone (rows: $n)"; exit 1; fi
exit 0
"""

JSON_CHECK = r"""
d="$1"
node -e '
const fs = require("fs"); const d = process.argv[1];
let s;
try { s = JSON.parse(fs.readFileSync(d + "/save.json", "utf8")); }
catch (e) { console.log("save.json does not parse: " + e.message); process.exit(1); }
if (s.turn !== 0 && s.turn !== 1) { console.log("turn is " + s.turn); process.exit(1); }
if (fs.existsSync(d + "/acked") && s.turn !== 1) { console.log("the save returned, but save.json holds turn " + s.turn); process.exit(1); }
' "$d"
"""

TEXT_CHECK = r"""
f="$1/notes.txt"
[ -f "$f" ] || { echo "notes.txt is missing"; exit 1; }
n=$(wc -l < "$f")
[ "$n" = 2000 ] || { echo "notes.txt has $n lines, not 2000"; exit 1; }
a=$(grep -c '^line [0-9]*$' "$f"); b=$(grep -c '^LINE [0-9]*$' "$f")
[ "$a" = 2000 ] || [ "$b" = 2000 ] || { echo "a mix: $a old lines, $b new"; exit 1; }
if [ -e "$1/acked" ] && [ "$b" != 2000 ]; then echo "the edit returned, but notes.txt is the old one"; exit 1; fi
exit 0
"""

STATE = "node -e 'require(\"fs\").writeFileSync(\"folder/save.json\", JSON.stringify({turn: 0, messages: []}))'"
SAVE = ("const fs = require('fs'); const d = process.argv[1];"
        "const state = {turn: 1, messages: Array.from({length: 400}, (_, i) => ({role: 'user', content: 'message ' + i}))};")

PROGRAMS = [
    Program("git", "git commit",
            "git init -q folder && cd folder && git config user.email a@example.com && git config user.name a "
            "&& echo one > a.txt && git add a.txt && git commit -qm first && echo two > b.txt && git add b.txt",
            'git -C "$1" commit -qm second' + ACK, GIT_CHECK),
    Program("sqlite", "SQLite, default journal (DELETE)",
            "mkdir folder && sqlite3 folder/t.db 'CREATE TABLE t(x); INSERT INTO t VALUES(1);'",
            'sqlite3 "$1/t.db" "INSERT INTO t VALUES(2)"' + ACK, SQLITE_CHECK),
    Program("sqlite-wal", "SQLite, WAL",
            "mkdir folder && sqlite3 folder/t.db 'PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES(1);' "
            "> /dev/null",
            'sqlite3 "$1/t.db" "INSERT INTO t VALUES(2)"' + ACK, SQLITE_CHECK),
    Program("node-inplace", "Node: writeFileSync over save.json",
            "mkdir folder && " + STATE,
            "node -e \"" + SAVE + "fs.writeFileSync(d + '/save.json', JSON.stringify(state));\" \"$1\"" + ACK, JSON_CHECK),
    Program("node-rename", "Node: temp file, then renameSync",
            "mkdir folder && " + STATE,
            "node -e \"" + SAVE + "fs.writeFileSync(d + '/save.json.tmp', JSON.stringify(state));"
            "fs.renameSync(d + '/save.json.tmp', d + '/save.json');\" \"$1\"" + ACK, JSON_CHECK),
    Program("node-durable", "Node: temp file, fsync, renameSync, fsync the folder",
            "mkdir folder && " + STATE,
            "node -e \"" + SAVE + "const fd = fs.openSync(d + '/save.json.tmp', 'w');"
            "fs.writeSync(fd, JSON.stringify(state)); fs.fsyncSync(fd); fs.closeSync(fd);"
            "fs.renameSync(d + '/save.json.tmp', d + '/save.json');"
            "const dfd = fs.openSync(d, 'r'); fs.fsyncSync(dfd); fs.closeSync(dfd);\" \"$1\"" + ACK, JSON_CHECK),
    Program("shell", "sh: echo > save.json",
            "mkdir folder && " + STATE,
            'echo \'{"turn": 1, "messages": []}\' > "$1/save.json"' + ACK, JSON_CHECK),
    Program("sed", "GNU sed -i",
            "mkdir folder && seq 1 2000 | sed 's/^/line /' > folder/notes.txt",
            'sed -i s/line/LINE/ "$1/notes.txt"' + ACK, TEXT_CHECK),
    Program("vim", "vim: :%s and :wq",
            "mkdir folder && seq 1 2000 | sed 's/^/line /' > folder/notes.txt",
            'vim -u NONE -i NONE -N -es -c "%s/line/LINE/" -c wq "$1/notes.txt"' + ACK, TEXT_CHECK,
            notes=["with `-u NONE` (no vimrc): vim's own defaults, `writebackup` on, `backup` off"]),
]


def sh(command: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, text=True, **kw)


def prepare(program: Program, base: Path) -> None:
    base.mkdir(parents=True)
    made = sh(program.setup, base)
    if made.returncode:
        raise SystemExit(f"{program.key}: setup failed: {made.stderr}")
    (base / "check.sh").write_text("#!/bin/sh\n" + program.check.lstrip())
    (base / "run.sh").write_text("#!/bin/sh\n" + program.run + "\n")
    shutil.copytree(base / "folder", base / "original", symlinks=True)


def explore(base: Path, jobs: int, models: str) -> tuple[dict, float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grader", "explore", "--json", "--watch", "folder",
                           "--check", "sh check.sh {dir}", "--models", models, "--jobs", str(jobs),
                           "--", "sh", "run.sh", "{dir}"], cwd=base, capture_output=True, text=True)
    seconds = time.monotonic() - start
    try:
        return json.loads(proc.stdout), seconds
    except json.JSONDecodeError:
        raise SystemExit(f"explore failed in {base}: {proc.stderr[-2000:]}") from None


# -- reproducing a finding without the explorer's model ------------------------------------------------

def killed_copy(base: Path, watch: str, call: dict | None, into: Path) -> tuple[Path, str]:
    """A fresh copy of the original folder after a real run of the program, killed at ``call`` (None: not killed)."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(base / "original", into, symlinks=True)
    argv = ["sh", str(base / "run.sh"), str(into)]
    if call is None:
        proc = subprocess.run(argv, cwd=base, capture_output=True, text=True)
        return into, f"ran to the end (exit {proc.returncode})"
    path = str(into) + call["path"][len(watch):]
    inject = f"{call['call']}:error=EIO:signal=KILL:when={call['nth']}"
    # strace -P matches a path as the program writes it: the absolute one, and the one relative to
    # the folder the program was in (git names .git/... from the repository's top).
    relative = ["-P", call["relative"]] if call.get("relative") and not call["relative"].startswith("..") else []
    proc = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-P", path, *relative,
                           "-e", f"trace={call['call']}",
                           "-e", f"inject={inject}", "--"] + argv, cwd=base, capture_output=True, text=True)
    return into, f"killed by SIGKILL at {call['call']} #{call['nth']} of {os.path.relpath(path, into)}"


def reproduce(base: Path, report: dict, first: dict, table: dict) -> dict:
    """Reproduce one broken state by a real kill (and, for a power cut, the losses applied by hand)."""
    watch = report["watch"]
    work = base / "repro"
    folder, how = killed_copy(base, watch, first["kill_before"], work / "state")
    steps = [how]
    if first["model"] == "M2":
        return {"reproduced": False, "how": "a write torn inside one call: a kill between calls cannot make it"}
    if first["model"] != "M1":
        for loss in first["losses"]:
            target = folder / loss["name"]
            if loss["kind"] == "data" and loss["size"] is not None and target.is_file():
                data = target.read_bytes()
                target.write_bytes(data[:loss["size"]])
                steps.append(f"{loss['name']} cut back to {loss['size']:,} of its {len(data):,} bytes, as the lost "
                             "unsynced writes leave it")
            elif loss["kind"] == "entry" and loss["size"] is None:
                if target.exists():
                    target.unlink()
                    steps.append(f"{loss['name']} removed (its create never reached the disk)")
            elif loss["kind"] == "entry" and loss["op"] is not None:
                call = table.get(loss["op"])
                before, _ = killed_copy(base, watch, call, work / "before")
                if (before / loss["name"]).is_file():
                    shutil.copyfile(before / loss["name"], target)
                    steps.append(f"{loss['name']} put back as a kill just before the call that changed it left it")
            elif loss["kind"] == "kill":
                continue
            else:
                steps.append(f"({loss['kind']} loss of {loss['name']} not applied)")
    proc = subprocess.run(["sh", str(base / "check.sh"), str(folder)], cwd=base, capture_output=True, text=True)
    said = (proc.stdout + proc.stderr).strip().splitlines()
    return {"reproduced": proc.returncode != 0, "how": "; ".join(steps), "checker": said[0] if said else ""}


# -- the table -------------------------------------------------------------------------------------

def run_one(program: Program, root: Path, jobs: int, models: str) -> dict:
    base = root / program.key
    prepare(program, base)
    report, seconds = explore(base, jobs, models)
    # The call after each crash point, for aiming a second kill (a lost unlink or rename names the
    # operation it undid: the call after point ``index``).
    table = {int(k): v for k, v in report["calls"].items()}
    findings = []
    for s in report["stretches"]:
        fb = s.get("first_broken")
        if not fb:
            continue
        repro = reproduce(base, report, fb, table)
        findings.append({"stretch": [s["first"], s["last"]], "model": fb["model"], "mistake": fb["mistake"],
                         "what": fb["what"][:2], "checker": fb["output"].strip().splitlines()[:1], **repro})
    shutil.rmtree(base / "repro", ignore_errors=True)
    return {"key": program.key, "title": program.title, "report": report, "seconds": seconds,
            "findings": findings, "program": program}


# ALICE (Pillai et al., OSDI 2014) beside the table: written from the paper, not from a run, so it is
# kept as text; its two one-off runs (git core.fsync=all, SQLite synchronous=EXTRA) are dated in it.
ALICE = """\
## Beside ALICE

**The paper.** Thanumalayan Sankaranarayana Pillai, Vijay Chidambaram, Ramnatthan Alagappan, Samer
Al-Kiswany, Andrea C. Arpaci-Dusseau and Remzi H. Arpaci-Dusseau, "All File Systems Are Not Created
Equal: On the Complexity of Crafting Crash-Consistent Applications", *11th USENIX Symposium on Operating
Systems Design and Implementation (OSDI '14)*, Broomfield, CO, October 2014, pp. 433–448
(<https://www.usenix.org/conference/osdi14/technical-sessions/presentation/pillai>). Read for this
section in a plain-text extraction of the USENIX PDF; the section, table and figure numbers below are
the paper's. Two programs appear on both sides: SQLite (both journal modes) and Git.

**What ALICE counted.** Eleven applications (§4) and 60 *static* vulnerabilities, a static one being a
source line (found through stack traces) whose system calls need some persistence property to hold;
the 60 stand for 156 dynamic ones (§3.4, §4.3). Configurations sharing one protocol were counted
once, in the safest of them; SQLite's two journal modes and LevelDB's two versions are kept apart
(§4.3). The crash states come from a default abstract persistence model (APM, §3.2 and
Table 2) that is weaker than any real file system on purpose: a rename is split into separate steps
(the target's entry removed, the new entry made, the old one removed), an append may grow the file
before its data lands (the new bytes are random), and the only order it keeps is that what was done
to a file before an fsync of it lands before anything issued after that fsync, and that printed
output lands before what follows it. Table 3(c) then counts again under models of five real configurations
(ext3 writeback, ordered and data-journal, ext4 ordered, btrfs; Table 3(d)).

| program | ALICE, OSDI 2014 | this kit, the table above |
|---|---|---|
| SQLite, rollback journal (DELETE) | 1 static vulnerability (Table 3(a)), a durability one that needs a directory fsync SQLite does not issue (§4.4.4; in Figure 4(F) the journal's unlink is the last step before the result is printed); marked as going beyond SQLite's documented promise (Table 3(b), ∗); exposed under all five real configurations (Table 3(c): 1 each) | M5: the journal's unlink is lost with the folder unsynced, the journal rolls the committed row back; reproduced |
| SQLite, WAL | 0 (Table 3(a)); none under any configuration of Table 3(c) | nothing under M1, M2, M3, M5 |
| Git | 9 static vulnerabilities (Table 3(a)). Consequences (Table 3(b)): 1 data loss, 3 cannot open, 5 failed reads or writes, 3 other (2 seen only by fsck, 1 only in the reflog). Under real configurations (Table 3(c)): 2 each on ext3 writeback, ext3 ordered, ext3 data-journal and ext4 ordered; 5 on btrfs | one kind: a new object's name reaches the disk before its bytes (M3), so the object is empty; reproduced |

**SQLite: the same weakness twelve years on.** ALICE's diagram of SQLite's rollback protocol (Figure
4(F)) fsyncs the journal and its directory, writes and fsyncs the database, then unlinks the journal
with no directory fsync after it. SQLite 3.40.1 as run here (its default `synchronous=FULL`, seen with
strace) has the same shape, and the kit's M5 state is that one: the unlink never reached the disk, the
journal is back, and opening the database undoes a commit the command had reported. SQLite has since
added `PRAGMA synchronous=EXTRA`, which fsyncs the folder after the unlink (seen with strace here);
with it, `explore` finds nothing under M1, M2, M3 and M5 (one run on 2026-12-01, not in the table).
The paper reports that SQLite's developers did not see durability as promised in this mode (§4.3,
§4.7); ALICE's checker and the kit's both expect the row once the command has returned.

**Git: why nine there and one here.**

- *What is counted.* ALICE counts source lines; the kit names kinds of mistake per stretch of crash
  points and reproduces the first broken state of each. A count of 9 beside a count of 1 is not a gap
  of 8 mistakes.
- *Models.* The table ran M1, M2, M3 and M5. They keep a rename whole and keep metadata in program
  order; M4, the kit's reordering model, was not run. ALICE found many ordering dependencies in Git
  (§4.2.2) and 27 ordering vulnerabilities over all applications (§4.4.3); models that keep metadata
  in order cannot produce those. ALICE's counts under real file systems (2 on
  ext3 and ext4, 5 on btrfs) are the nearer comparison.
- *Configuration.* In Figure 4(G)(i) ALICE's Git fsyncs each temporary object before linking it into
  place. Git 2.39.5, run here with its defaults, hardens objects except loose ones (`core.fsync`
  defaults to `committed,-loose-object`, says its git-config(1)), so a new loose object is never
  fsynced: that is the kit's M3 finding. Run as `git -c core.fsync=all commit` (one run on 2026-12-01,
  not in the table, through the same script's explore and reproduce steps), M3 finds nothing and M5
  remains: the object's entry in `.git/objects/66/`, a folder never fsynced, is lost while the
  renamed index still names it, and `git fsck` reports an invalid sha1 pointer in cache-tree;
  reproduced by a kill after the index rename with that entry removed by hand. It is the kind of
  dependency ALICE's Figure 4(G)(ii) draws from the object's mkdir and link (lines 0 and 4 of its
  store-object module) to later steps.
- *Workload and checker.* ALICE's workload adds two files and commits them; its checker (about 500
  lines) uses git-log, git-fsck and git-commit, removes leftover lock files and runs the recovery
  steps a user would (§4.1). Here the file is added during setup and only `git commit` is explored;
  the checker removes lock files, runs `git fsck` and `git log`, and asks for the new commit once the
  command returned. The example shipped in ALICE's repository (madthanu/alice) is different again:
  `git add .`, checked by `git status`, `git add` and `git commit`.
- *Versions.* The paper names no Git or SQLite version; the ones here are listed at the top.

**Only on one side.** ALICE also studied LevelDB (1.10 and 1.15), LMDB, GDBM, HSQLDB, PostgreSQL,
Mercurial, VMware Player, HDFS and ZooKeeper; none of them is in the table above. Node, the shell's
`>`, `sed -i` and vim are not in the paper.

**What could not be read.** The text extraction kept each row's numbers of Tables 3(a) and 3(b) but
not the column each sits in. Certain: every row's total in 3(a) and the totals row, and every cell of
3(c) for the rows above. Git's split in 3(b) is deduced: its row holds four numbers, "silent errors"
is ruled out by §4.3 (only LevelDB and HSQLDB had those), which leaves four columns, and the last
cell carries the footnote on Git's 2 fsck-only and 1 reflog-only errors. How Git's 9 spread over the
types of 3(a) is not claimed beyond the prose: one needs atomicity across system calls (the reflog,
§4.4.1), one is among the three "safe rename" ordering cases (§4.4.3), one or more are durability
cases needing a directory fsync (§4.4.4), and many are ordering dependencies (§4.2.2). The detailed
descriptions on the authors' web page (the paper's reference [2]) were not read.

**How far the table's own claims are backed** (checked 2026-12-01):

- Each stretch is backed by one reproduction, of its first broken state. The rest of a stretch (git's
  crash points 7–39, for one) is the model's word.
- A power-cut reproduction is a real SIGKILL and then the model's loss applied by hand. It shows the
  checker rejects that folder; it does not show that a given file system leaves it. ALICE's BOB did
  that half for the file systems of 2014 (Table 1); nothing here repeats it.
- The git row under-reports. For the same run, explore's summary also names a folder never fsynced
  after a create or rename (55 states under M5, the first after the rename of `.git/index.lock`), but
  none of those states was the first of a stretch, so none was reproduced and the row leaves it out.
  The `core.fsync=all` run above is where that kind was reproduced.
- "nothing" means nothing under M1, M2, M3 and M5; M4 was not run.
"""


KIND_WORDS = {
    "in-place": "file rewritten in place", "rename-before-data": "rename before its data",
    "unsynced-data": "data never fsynced", "dir-not-fsynced": "folder not fsynced after create/rename",
    "append": "append torn or reordered", "reordered": "steps reordered", "torn-write": "torn write",
    "not-atomic": "update not atomic",
}


def markdown(results: list, args, started: str, load: str) -> str:
    lines = ["# `crashcourse explore` on real programs", "",
             f"Generated by `python benchmarks/explore.py` on {started} ({platform.node() or 'this machine'}, "
             f"{os.cpu_count()} cores, load average before the run: {load}); models {args.models}, "
             f"{args.jobs} checker runs at a time, each program and each checker in a bubblewrap box.", "",
             "Versions: " + "; ".join(versions()), "",
             "A finding is listed only when a real kill (and, for a power cut, the lost operations applied by "
             "hand to the killed folder) breaks the checker too; see the script's docstring.", "",
             "| program | file ops | crash points | states (distinct) | explore s | states/s | found (reproduced) |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in results:
        rep = r["report"]
        found = {}
        for f in r["findings"]:
            if f["reproduced"]:
                found.setdefault(KIND_WORDS[f["mistake"]], set()).add(f["model"])
        text = "; ".join(f"{k} ({', '.join(sorted(v))})" for k, v in found.items()) or "nothing"
        unrepro = [f for f in r["findings"] if not f["reproduced"]]
        if unrepro:
            text += f"; {len(unrepro)} broken stretch(es) not reproduced, so not reported"
        lines.append(f"| {r['title']} | {rep['operations']} | {rep['crash_points']} | {rep['states']} "
                     f"({rep['distinct_states']}) | {rep['seconds']:.1f} | {rep['states_per_second']} | {text} |")
    lines += ["", "## Each finding and its reproduction", ""]
    for r in results:
        lines.append(f"### {r['title']}")
        lines.append("")
        lines.append(f"`{r['program'].run}`")
        lines.append("")
        for note in r["program"].notes:
            lines.append(f"- note: {note}")
        if not r["findings"]:
            lines.append("- no crash state the checker rejects")
        for f in r["findings"]:
            mark = "reproduced" if f["reproduced"] else "NOT reproduced (not reported)"
            lines.append(f"- crash points {f['stretch'][0]}–{f['stretch'][1]}, {f['model']}: "
                         f"{KIND_WORDS[f['mistake']]}. {'; '.join(f['what'])}. Checker: "
                         f"{(f['checker'] or ['?'])[0] if isinstance(f['checker'], list) else f['checker']}")
            lines.append(f"  - {mark}: {f['how']}" + (f"; checker: {f.get('checker')}"
                                                       if isinstance(f.get('checker'), str) else ""))
        lines.append("")
    lines += ALICE.splitlines()
    return "\n".join(lines) + "\n"


def versions() -> list:
    out = []
    for cmd in (["git", "--version"], ["sqlite3", "--version"], ["node", "--version"], ["sed", "--version"],
                ["vim", "--version"], ["strace", "-V"], ["bwrap", "--version"]):
        try:
            first = subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            continue
        out.append(first.strip()[:60])
    out.append(f"Linux {platform.release()}")
    return out


# -- speed and scale ---------------------------------------------------------------------------------

APPENDS = ("import os, sys\nfd = os.open(os.path.join(sys.argv[1], 'log'), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\n"
           "for i in range(int(sys.argv[2])): os.write(fd, b'record %d\\n' % i)\n")
LOG_CHECK = r"""[ ! -s "$1/log" ] || [ "$(tail -c 1 "$1/log" | od -An -tx1 | tr -d ' ')" = 0a ] || { echo "the log ends in a torn record"; exit 1; }"""
PEAK = ("import resource, sys\nfrom grader.faces import cli\ncode = cli.main(sys.argv[1:])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(code)\n")


def checker_cost(root: Path, rounds: int = 20) -> list:
    """One checker run on a folder, plain and in the box, best and median of ``rounds`` (seconds)."""
    from grader.grading import program_trace

    rows = []
    for program in (p for p in PROGRAMS if p.key in ("sqlite", "git", "node-rename")):
        base = root / ("cost-" + program.key)
        prepare(program, base)
        folder = str(base / "original")
        for boxed in (False, True):
            times = []
            for _ in range(rounds):
                start = time.monotonic()
                program_trace.run_checker("sh check.sh {dir}", folder, box=boxed, timeout=60, tmp=str(base),
                                          cwd=str(base))
                times.append(time.monotonic() - start)
            times.sort()
            rows.append((program.title, "bubblewrap" if boxed else "none", times[0], times[len(times) // 2]))
    return rows


def appends(root: Path, count: int, points: int, seed: int) -> dict:
    """A program making ``count`` appends, explored on ``points`` sampled crash points: time and peak memory."""
    base = root / f"appends-{count}"
    (base / "folder").mkdir(parents=True)
    (base / "appends.py").write_text(APPENDS)
    (base / "check.sh").write_text(LOG_CHECK + "\n")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", PEAK, "explore", "--json", "--watch", "folder", "--check",
                           "sh check.sh {dir}", "--models", "M1,M2,M3", "--max-points", str(points), "--seed",
                           str(seed), "--", sys.executable, "appends.py", "{dir}", str(count)],
                          cwd=base, capture_output=True, text=True)
    seconds = time.monotonic() - start
    report = json.loads(proc.stdout)
    peak_kb = int(proc.stderr.strip().splitlines()[-1])
    return {"appends": count, "operations": report["operations"], "explored": report["explored_points"],
            "distinct": report["distinct_states"], "broken": report["broken_states"], "seconds": seconds,
            "program_seconds": report["program_seconds"], "peak_mb": peak_kb / 1024, "seed": seed}


def scale(args) -> None:
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    with tempfile.TemporaryDirectory(prefix="crashcourse-bench-scale-") as tmp:
        cost = checker_cost(Path(tmp))
        runs = [appends(Path(tmp), n, args.points, args.seed) for n in args.appends]
    print(f"load average before: {load}")
    print("\nchecker cost, one run on the original folder (best / median of 20):")
    print(f"  {'program':50} {'box':11} {'best ms':>8} {'median ms':>10}")
    for title, box, best, median in cost:
        print(f"  {title:50} {box:11} {best * 1000:8.1f} {median * 1000:10.1f}")
    print(f"\nappends explored by sampling ({args.points} crash points, seed {args.seed}; models M1 M2 M3):")
    print(f"  {'appends':>9} {'file ops':>9} {'explored':>8} {'distinct':>8} {'broken':>6} {'program s':>9} "
          f"{'total s':>8} {'peak MB':>8}")
    for r in runs:
        print(f"  {r['appends']:>9,} {r['operations']:>9,} {r['explored']:>8} {r['distinct']:>8} {r['broken']:>6} "
              f"{r['program_seconds']:>9.1f} {r['seconds']:>8.1f} {r['peak_mb']:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="program keys: " + " ".join(p.key for p in PROGRAMS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--out", default=str(HERE / "explore.md"))
    parser.add_argument("--json", default=str(HERE / "explore.json"))
    parser.add_argument("--scale", action="store_true", help="checker cost and a long run sampled, printed")
    parser.add_argument("--appends", type=int, nargs="*", default=[1000, 1_000_000])
    parser.add_argument("--points", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.scale:
        scale(args)
        return
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    results = []
    with tempfile.TemporaryDirectory(prefix="crashcourse-bench-explore-") as tmp:
        for program in PROGRAMS:
            if args.only and program.key not in args.only:
                continue
            r = run_one(program, Path(tmp), args.jobs, args.models)
            print(f"{program.title}: {r['report']['distinct_states']} distinct states in {r['seconds']:.1f} s, "
                  f"{sum(f['reproduced'] for f in r['findings'])}/{len(r['findings'])} findings reproduced",
                  file=sys.stderr)
            results.append(r)
    Path(args.out).write_text(markdown(results, args, started, load))
    Path(args.json).write_text(json.dumps([{k: v for k, v in r.items() if k != "program"} for r in results],
                                          indent=1, default=str))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
