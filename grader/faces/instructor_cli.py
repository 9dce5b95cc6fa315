"""The instructor's commands: ``grade``, ``gradescope-package``, ``gradescope-run``, ``prairielearn-run``.

What the instructor types and reads lives here (arguments, messages, the progress bar, which
report goes where); the grading itself is :mod:`grader.grading.batch`, the fleets' formats are
:mod:`grader.grading.gradescope` and :mod:`grader.grading.prairielearn`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Optional

from grader.grading import batch as batch_mod
from grader.grading import batch_journal, bubblewrap, reports

GRADE_HELP = """\
Grade a folder of submissions with a level's tests, each one isolated and time-boxed.

SUBMISSIONS holds one folder or .zip per student; its name (without .zip) is the student id.
Each submission is copied into a fresh temporary folder, and its code runs in a bubblewrap box
(install the `bubblewrap` package): no network, no other student's files, none of the kit but the
grader itself, a small disk of its own, caps on time, memory and processes. The tests run in
another process, which the student's code cannot reach: printing fake results, exiting early or
patching pytest earns what the code really earned. Where no box can start, grade says what to
install or enable and stops; --no-box grades anyway, and every report then says the grades are
not tamper-proof.

examples:
  crashcourse grade submissions/ --level 2                     JSON on stdout
  crashcourse grade submissions/ --level 2 --format md --output class.md
  crashcourse grade submissions/ --level 2 --format md --format csv --output class
                                                               class.md and class.csv, one grading run
  crashcourse grade submissions/ --level 2 --format gradescope --output results/
  crashcourse grade submissions/ --level 2 --seed 7 --scenarios private/extra.json

One journal of finished submissions is kept per batch, in .crashcourse-grade/ beside SUBMISSIONS.
Run the same command again after a stop and only the submissions not in it, or whose files
changed, are graded; ask for another --format later and the report is written from the journal
without grading anyone again. --fresh grades everything again.
"""

PACKAGE_HELP = """\
Build the autograder zip for Gradescope (setup.sh, run_autograder, the kit and the level's tests).
Upload it as a "Zip file upload" autograder; students then submit the level's file(s).
Seeds and scenarios you pass here go into the zip, which students never see.
"""

PRAIRIELEARN_HELP = """\
Grade the one submission in GRADE_ROOT/student and write GRADE_ROOT/results/results.json in
PrairieLearn's external-grader format (score from 0 to 1, one row per test).

GRADE_ROOT is /grade inside the container; set CRASHCOURSE_GRADE_ROOT or --grade-root to try it
anywhere else. The level comes from --level or CRASHCOURSE_LEVEL (the Dockerfile sets it).
Where the container lets no box start, the code runs in the container without one and
results.json says the grade is not tamper-proof; it also says whether strace's account of the
file operations was taken. A results.json is written whatever happens.
"""

IMAGE_HELP = """\
Write DIR/Dockerfile and DIR/kit/ (the grader and the level's tests, from the installed package):
`docker build -t crashcourse-grader DIR` then builds PrairieLearn's external-grader image, which
installs bubblewrap and strace and runs `crashcourse prairielearn-run`. Works from a wheel.
"""

# Where several formats share one --output stem: the extension each gets (gradescope: a folder).
SUFFIX = {"json": ".json", "csv": ".csv", "md": ".md", "gradescope": "-gradescope"}


def register(sub) -> None:
    grade = sub.add_parser("grade", help="(instructors) grade a folder of submissions, isolated, with reports",
                           description=GRADE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    grade.add_argument("submissions", metavar="SUBMISSIONS", help="folder with one folder or .zip per student")
    grade.add_argument("--level", type=int, required=True, help="the level to grade (its tests in exercises/levelN)")
    grade.add_argument("--format", choices=reports.FORMATS, action="append", default=None,
                       help="report format (default json); give it more than once for several reports "
                            "from one grading run")
    grade.add_argument("--output", metavar="PATH", action="append", default=None,
                       help="write the report here (for gradescope: a folder); default stdout "
                            "(gradescope: ./gradescope-results). With several formats: one --output per "
                            "--format, in the same order, or one stem that each format's extension is added to")
    grade.add_argument("--jobs", type=int, default=None, metavar="K",
                       help="submissions graded at once (default: two per core, at most 8 and one per GiB "
                            "of memory: a submission's judge and its code take turns, so one keeps a core "
                            "busy only part of the time)")
    grade.add_argument("--timeout", type=float, default=60.0, metavar="S",
                       help="wall-clock seconds one submission's code may run in total (default 60)")
    grade.add_argument("--seed", type=int, default=None, metavar="N",
                       help="seed for the scripted model and generated conversations (instructor-only)")
    grade.add_argument("--scenarios", metavar="PATH", default=None,
                       help="extra instructor-only scenarios, a JSON or Python file (see grader.grading.scenarios.load_scenarios)")
    grade.add_argument("--examples", type=int, default=None, metavar="N",
                       help="generated conversations per property test (default: the level's own)")
    grade.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    grade.add_argument("--fresh", action="store_true",
                       help="grade every submission again, ignoring (and replacing) the journal of an earlier run")
    grade.add_argument("--no-box", action="store_true",
                       help="grade even where no bubblewrap box can start: the code then runs without one, "
                            "and every report says the grades are not tamper-proof")
    grade.set_defaults(handler=cmd_grade)

    package = sub.add_parser("gradescope-package", help="(instructors) build the Gradescope autograder zip",
                             description=PACKAGE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    package.add_argument("--level", type=int, required=True)
    package.add_argument("--output", metavar="PATH", default=None, help="zip to write (default "
                         "crashcourse-levelN-autograder.zip)")
    package.add_argument("--seed", type=int, default=None)
    package.add_argument("--scenarios", default=None, metavar="PATH")
    package.add_argument("--timeout", type=float, default=120.0)
    package.set_defaults(handler=cmd_package)

    run = sub.add_parser("gradescope-run")  # no help: hidden from `crashcourse --help`
    run.add_argument("--level", type=int, required=True)
    run.add_argument("--submission", default="/autograder/submission")
    run.add_argument("--results", default="/autograder/results/results.json")
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--scenarios", default=None)
    run.add_argument("--private", default=None, metavar="PATH",
                     help="the package's private.json (its seed): read, then removed, before any code runs")
    run.add_argument("--timeout", type=float, default=120.0)
    run.set_defaults(handler=cmd_gradescope_run)

    pl = sub.add_parser("prairielearn-run", help="(instructors) grade one submission in PrairieLearn's /grade layout",
                        description=PRAIRIELEARN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    pl.add_argument("--level", type=int, default=None)
    pl.add_argument("--grade-root", default=None, metavar="DIR", help="default $CRASHCOURSE_GRADE_ROOT, else /grade")
    pl.add_argument("--timeout", type=float, default=120.0)
    pl.add_argument("--seed", type=int, default=None)
    pl.add_argument("--scenarios", default=None, metavar="PATH")
    pl.set_defaults(handler=cmd_prairielearn_run)

    image = sub.add_parser("prairielearn-image", help="(instructors) write PrairieLearn's grader image (Dockerfile)",
                           description=IMAGE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    image.add_argument("dir", metavar="DIR", help="folder to write the Dockerfile and kit/ into (made if missing)")
    image.add_argument("--level", type=int, required=True, help="the level the image grades by default")
    image.set_defaults(handler=cmd_prairielearn_image)


# -- grade ---------------------------------------------------------------------------------------

def _complain(text: str) -> int:
    print(f"crashcourse grade: {text}", file=sys.stderr)
    return 2


def report_targets(formats: Optional[list], outputs: Optional[list]) -> list:
    """``[(format, path or None for stdout)]`` for the formats and outputs asked for.

    Raises ValueError (its text says what to write instead) when they do not pair up."""
    formats = list(dict.fromkeys(formats or ["json"]))
    outputs = list(outputs or [])
    if len(formats) == 1:
        if len(outputs) > 1:
            raise ValueError("one --format takes one --output")
        default = "gradescope-results" if formats[0] == "gradescope" else None
        return [(formats[0], outputs[0] if outputs else default)]
    if len(outputs) == len(formats):
        return list(zip(formats, outputs))
    if len(outputs) == 1:
        stem = outputs[0].rstrip(os.sep)
        return [(fmt, stem + SUFFIX[fmt]) for fmt in formats]
    raise ValueError(f"{len(formats)} formats need one --output each (in the same order), or one --output "
                     "used as a stem (class -> class.md, class.csv, class.json, class-gradescope/)")


PRIVATE_ENV = "CRASHCOURSE_PRIVATE_OPTIONS"
_PRIVATE = ("--seed", "--scenarios")


def keep_private(args) -> None:
    """Take the instructor's ``--seed`` and ``--scenarios`` off this process's command line.

    Any process can read any other's command line (/proc/PID/cmdline), and without a box a
    submission's code runs beside this one. So when they were typed, this process starts itself
    again without them, carrying them in its environment instead, which no other process may read
    once grade has made itself undumpable (before any submission runs); the new process takes them
    out of its environment at once, so nothing it starts inherits them.
    """
    import json
    carried = os.environ.pop(PRIVATE_ENV, None)
    if carried is not None:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            data = json.loads(carried)
            args.seed, args.scenarios = data["seed"], data["scenarios"]
        return
    typed = getattr(sys, "orig_argv", None) or []
    if not any(_private(w) for w in typed[1:]):
        return  # called from Python (a test, another tool): nothing on a command line
    if args.scenarios:
        args.scenarios = os.path.abspath(args.scenarios)
    kept, skip = [], False
    for word in typed[1:]:
        if skip:
            skip = False
        elif _private(word):
            skip = "=" not in word
        else:
            kept.append(word)
    env = dict(os.environ, **{PRIVATE_ENV: json.dumps({"seed": args.seed, "scenarios": args.scenarios})})
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + kept, env)


def _private(word: str) -> bool:
    """``--seed``, ``--scenarios`` or a prefix argparse takes for one of them (``--se 7``, ``--scen=x``)."""
    name = word.split("=", 1)[0]
    return len(name) >= 4 and name.startswith("--") and any(p.startswith(name) for p in _PRIVATE)


def cmd_grade(args) -> int:
    keep_private(args)
    if not os.path.isdir(args.submissions):
        return _complain(f"{args.submissions} is not a folder. Point it at a folder that holds one folder "
                         "or .zip per student.")
    if args.scenarios and not os.path.isfile(args.scenarios):
        return _complain(f"--scenarios {args.scenarios}: no such file")
    if args.jobs is None:
        args.jobs = batch_mod.default_jobs()
    if args.jobs < 1 or args.timeout <= 0:
        return _complain("--jobs must be at least 1 and --timeout above 0")
    try:
        targets = report_targets(args.format, args.output)
    except ValueError as exc:
        return _complain(str(exc))
    boxed = box_or_refusal(args.no_box)
    if boxed is None:
        return 2
    journal, refused = open_journal(args, "bubblewrap" if boxed else "none")
    if refused:
        return 2
    progress = Progress() if sys.stderr.isatty() and not args.no_progress else ResumeNote()
    try:
        batch = batch_mod.grade_batch(args.submissions, args.level, jobs=args.jobs, timeout=args.timeout,
                                      seed=args.seed, scenarios=args.scenarios, examples=args.examples,
                                      progress=progress, protect=[p for _, p in targets if p], journal=journal,
                                      boxed=boxed)
    except KeyboardInterrupt:
        if journal is not None:
            print(f"\ncrashcourse grade: stopped. The submissions that finished are in {journal.path}; run the same "
                  "command again to grade only the rest.", file=sys.stderr)
        return 130
    for fmt, output in targets:
        write_one(batch, fmt, output)
    for note in batch.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    if journal is not None:
        close_journal(journal, batch)
    return 0


def write_one(batch: dict, fmt: str, output: Optional[str]) -> None:
    if fmt == "gradescope":
        written = reports.write_gradescope(batch, output)
        print(f"wrote {len(written)} results.json file(s) under {output.rstrip(os.sep)}/", file=sys.stderr)
    elif output:
        reports.write_report(batch, fmt, output)
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(reports.render(batch, fmt))


def open_journal(args, isolation: str = "none") -> tuple:
    """``(journal, refused)``: the batch's journal (None if none can be kept here), and whether an
    untrusted one is in the way (then the batch must not start)."""
    path = batch_journal.journal_path(args.submissions, args.level)
    wanted = batch_journal.settings(args.level, batch_mod.level_folder(args.level), seed=args.seed,
                                    timeout=args.timeout, examples=args.examples, scenarios=args.scenarios)
    wanted["isolation"] = isolation  # a grade from an unboxed run is not one a boxed run may take over
    try:
        journal = batch_journal.BatchJournal.open(path, wanted, fresh=args.fresh, submissions=args.submissions)
    except batch_journal.JournalRefused as exc:
        print(f"crashcourse grade: {exc}", file=sys.stderr)
        return None, True
    except OSError as exc:
        print(f"note: no journal can be kept at {path} ({exc.strerror}), so if this batch is stopped, a rerun "
              "grades everything again.", file=sys.stderr)
        return None, False
    for note in journal.notes:
        print(f"note: {note}", file=sys.stderr)
    return journal, False


def close_journal(journal, batch: dict) -> None:
    total = len(batch["submissions"])
    if journal.changed_by_others():
        # Only this process writes the journal; anything else in it could be planted results.
        journal.discard()
        print(f"note: the journal {journal.path} changed while this batch ran, by something other than the grader. "
              "It has been deleted, so the next run grades everything again.", file=sys.stderr)
    elif journal.resumed:
        print(f"resumed {journal.resumed} of {total} submission(s) from the journal {journal.path}; graded "
              f"{total - journal.resumed}. Add --fresh to grade all of them again.", file=sys.stderr)
    else:
        print(f"graded {total} submission(s); the journal {journal.path} keeps their results, so a stopped "
              "or repeated run grades only what changed.", file=sys.stderr)
    journal.close()


def box_or_refusal(no_box: bool) -> Optional[bool]:
    """True if a bubblewrap box works here; False if not but the instructor passed ``--no-box``;
    None (after saying why, and what to do) if grading must not start."""
    bubblewrap.not_dumpable()  # nothing on this machine may read grade's memory or environment
    problem = bubblewrap.check()
    if problem is None:
        if no_box:
            print("crashcourse grade: note: a bubblewrap box works here, so every submission runs in one; "
                  "--no-box only matters where none can start.", file=sys.stderr)
        return True
    if no_box:
        print(f"crashcourse grade: warning: grading without a box, as --no-box asks. {problem}\n"
              "Every report will say these grades are not tamper-proof.", file=sys.stderr)
        return False
    print(f"crashcourse grade: no box for the submissions' code. {problem}\n"
          "Without a box, a submission could change its own grade or another student's. Fix the above, "
          "or grade anyway with --no-box (every report then says the grades are not tamper-proof).",
          file=sys.stderr)
    return None


class ResumeNote:
    """What a batch says on stderr without a terminal: a CI log hears up front what was resumed."""

    def start(self, total: int, resumed: list, journal_path: Optional[str]) -> None:
        if resumed:
            print(f"resuming: {len(resumed)} of {total} submission(s) are in the journal {journal_path}; "
                  f"grading the other {total - len(resumed)}", file=sys.stderr)

    def step(self, result: dict) -> None:
        pass

    def close(self) -> None:
        pass


class Progress:
    """A one-line progress bar on stderr (only used when stderr is a terminal)."""

    def __init__(self, total: int = 0, resumed: list = ()):
        self.start(total, resumed)

    def start(self, total: int, resumed: list = (), journal_path: Optional[str] = None) -> None:
        self.total, self.resumed = total, len(resumed)
        self.count = self.resumed
        self.failed = sum(r["status"] == "failed" for r in resumed)
        self.errors = sum(r["status"] == "error" for r in resumed)
        self.started = time.monotonic()
        if total:
            self.draw()

    def step(self, result: dict) -> None:
        self.count += 1
        self.failed += result["status"] == "failed"
        self.errors += result["status"] == "error"
        self.draw()

    def draw(self) -> None:
        width = 30
        filled = int(width * self.count / self.total) if self.total else width
        elapsed = time.monotonic() - self.started
        resumed = f" ({self.resumed} from the journal)" if self.resumed else ""
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total} done{resumed}, "
                         f"{self.failed} failed, {self.errors} could not be graded, {elapsed:.0f} s")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


# -- the fleets ----------------------------------------------------------------------------------

def cmd_package(args) -> int:
    from grader.grading.gradescope import build_package
    batch_mod.level_folder(args.level)
    output = args.output or f"crashcourse-level{args.level}-autograder.zip"
    from grader.grading.gradescope import packaged_seed
    build_package(args.level, output, seed=args.seed, scenarios=args.scenarios, timeout=args.timeout)
    print(f"wrote {output}: upload it as the assignment's autograder (setup.sh and run_autograder at its root)")
    if args.seed is not None:
        print(f"it grades with seed {packaged_seed(output)}, drawn from your --seed {args.seed} and a random salt "
              "(a submission cannot search for it); `crashcourse grade --seed` with that number draws the same "
              "conversations")
    return 0


def cmd_gradescope_run(args) -> int:
    keep_private(args)
    from grader.grading.gradescope import read_private, run_on_gradescope
    if args.private:
        try:
            args.seed = read_private(args.private)["seed"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Removed after its first read: a second run in the same container has no seed to grade with.
            return _complain(f"--private {args.private}: cannot read the package's seed ({exc}); it is removed "
                             "once read, so each container grades once (Gradescope starts one per submission)")
    return run_on_gradescope(args.level, args.submission, args.results, grade_batch=batch_mod.grade_batch,
                             seed=args.seed, scenarios=args.scenarios, timeout=args.timeout)


def cmd_prairielearn_run(args: argparse.Namespace) -> int:
    keep_private(args)
    from pathlib import Path

    from grader.grading import prairielearn
    level = args.level if args.level is not None else os.environ.get("CRASHCOURSE_LEVEL")
    if level is None or not str(level).isdigit():
        print("crashcourse prairielearn-run: say which level to grade, with --level N or CRASHCOURSE_LEVEL=N",
              file=sys.stderr)
        return 2
    root = args.grade_root or os.environ.get("CRASHCOURSE_GRADE_ROOT") or "/grade"
    result = prairielearn.run_on_prairielearn(int(level), root, timeout=args.timeout, seed=args.seed,
                                              scenarios=args.scenarios)
    if result.get("gradable"):
        shown = f"score {result['score']:.2f}"
    else:
        shown = "not gradable: " + "; ".join(result["format_errors"])
    print(f"wrote {Path(root) / 'results' / 'results.json'} ({shown})", file=sys.stderr)
    return 0


def cmd_prairielearn_image(args) -> int:
    from grader.grading import prairielearn
    batch_mod.level_folder(args.level)
    written = prairielearn.write_image(args.dir, args.level)
    print(f"wrote {os.path.join(args.dir, 'Dockerfile')} and {len(written) - 1} file(s) under "
          f"{os.path.join(args.dir, 'kit')}/. Build it with: docker build -t crashcourse-grader {args.dir}  "
          "(the Dockerfile's first lines say what to put in a question's info.json)")
    return 0
