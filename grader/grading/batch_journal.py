"""The journal of a grading batch: each finished submission on disk, so a stopped batch resumes.

``crashcourse grade`` appends one record to the journal as soon as a submission's result is
known. Run the same command again after a Ctrl-C, a closed laptop lid or a killed CI job, and the
submissions whose records are there (with the same files) are taken from the journal; only the
rest are graded. ``--fresh`` ignores the journal and starts a new one.

Where it lives: one journal per batch (a submissions folder and a level), in a
``.crashcourse-grade/`` folder beside the submissions folder (``subs/`` ->
``.crashcourse-grade/subs-level2.journal``), whatever reports are asked for: a report in another
format later is written from it without grading anyone again. Never inside the submissions folder
(the grader checks that nothing there changes while it grades) and never inside a report's folder
(an instructor may upload that folder as it is).

The format, one record per line::

    <sha256 of the JSON, in hex> <JSON>\\n

The first record is the header: the format version, and every setting that changes a verdict
(level, seed, timeout, generated examples, a hash of the instructor's scenarios, the kit's
version and a hash of the grader's code and the level's tests). Each later record is one
finished submission: its id, a hash of its files, and its result as the report needs it.

Why append, rather than rewrite the whole journal atomically after each submission: a rewrite
costs the whole journal every time, which for a class of 200 with a few KiB of feedback each is
over a hundred megabytes of writing, and grows with the square of the class. An append costs one
line. Its price is that a kill can cut the last line short, so every line carries a checksum and
only a line that is whole, newline included, with a matching checksum, counts.

What is trusted, the same rule as a level-4 loader: nothing silently.

* A missing or different header, an unknown format version or other settings: refused, with a
  message that says what differs and to add ``--fresh``.
* A complete line whose checksum does not match, anywhere: refused. A crash cannot produce that
  (each line is written by one append and synced before the next starts), so something else
  changed the file, and none of it is trusted.
* A cut-short *last* line is what a kill in the middle of an append leaves. It is dropped, the
  run says so, the file is cut back to its last whole line before anything is appended, and that
  one submission is graded again. Refusing the whole journal for it would throw away every other
  finished submission, which is the work the journal exists to keep.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Iterable, Optional

from grader.atomicfile import fsync_folder, make_folder, write_atomic

FORMAT = 1
KIND = "crashcourse grade journal"
FOLDER = ".crashcourse-grade"
_FRESH = "add --fresh to the same command to grade every submission again (the journal is then replaced)."


class JournalRefused(Exception):
    """The journal cannot be trusted for this run; the message says why and what to do."""


def journal_path(submissions: str, level: int) -> str:
    """Where the journal of a batch lives (see the module's docstring)."""
    submissions = os.path.abspath(submissions).rstrip(os.sep)
    return os.path.join(os.path.dirname(submissions), FOLDER,
                        f"{os.path.basename(submissions)}-level{level}.journal")


def settings(level: int, level_dir: Path, *, seed: Optional[int], timeout: float, examples: Optional[int],
             scenarios: Optional[str]) -> dict:
    """Everything that changes a verdict; a journal written under other settings is not this batch's."""
    from grader import __version__

    code = hashlib.sha256()
    grader_dir = Path(__file__).resolve().parents[1]
    level_dir = Path(level_dir)
    files = [(grader_dir, p) for p in sorted(grader_dir.rglob("*.py"))]
    files += [(level_dir, p) for p in sorted(level_dir.rglob("*")) if p.is_file()]
    for root, path in files:
        if any(part == "__pycache__" or part.startswith(".") for part in path.relative_to(root).parts):
            continue  # caches and tools' state, not the grader
        # Names relative to their folder: the same kit checked out elsewhere is the same grader.
        code.update(path.relative_to(root).as_posix().encode() + b"\0")
        code.update(path.read_bytes())
    return {
        "level": level,
        "seed": seed,
        "timeout": float(timeout),
        "examples": examples,
        "scenarios": _file_hash(scenarios) if scenarios else None,
        "kit": __version__,
        "grader": code.hexdigest()[:16],
    }


def _file_hash(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fingerprint(source: Path) -> str:
    """A hash of a submission's files (a folder's names and contents, or a zip's bytes)."""
    digest = hashlib.sha256()
    source = Path(source)
    if not source.is_dir():
        with open(source, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames.sort()
        rel = os.path.relpath(dirpath, source)
        digest.update(b"D " + rel.encode("utf-8", "surrogateescape") + b"\0")
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            digest.update(b"F " + os.path.join(rel, name).encode("utf-8", "surrogateescape") + b"\0")
            if os.path.islink(path):
                digest.update(b"link " + os.readlink(path).encode("utf-8", "surrogateescape") + b"\0")
                continue
            try:
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
            except OSError as exc:
                digest.update(f"unreadable {exc.errno}".encode())
            digest.update(b"\0")
    return digest.hexdigest()


# -- one line -------------------------------------------------------------------------------------

def encode(record: dict) -> bytes:
    body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(body).hexdigest().encode() + b" " + body + b"\n"


def decode(line: bytes) -> dict:
    """One whole line (without its newline) back to its record; ValueError says what is wrong."""
    check, _, body = line.partition(b" ")
    if len(check) != 64 or hashlib.sha256(body).hexdigest().encode() != check:
        raise ValueError("its checksum does not match its contents")
    record = json.loads(body)
    if not isinstance(record, dict):
        raise ValueError("it is not a JSON object")
    return record


class Contents:
    """A journal file read back: the header, the records in order, and a cut-short tail if any."""

    def __init__(self, header: dict, records: list, whole_length: int, torn: int):
        self.header, self.records, self.whole_length, self.torn = header, records, whole_length, torn


def read(data: bytes, where: str = "the journal") -> Contents:
    """Parse a journal's bytes, or raise :class:`JournalRefused` with what is wrong and what to do."""
    end = data.rfind(b"\n") + 1          # everything after the last newline is a cut-short line
    lines = data[:end].split(b"\n")[:-1]
    if not lines:
        raise JournalRefused(f"{where} holds no whole header line ({len(data)} bytes), so it cannot say which batch "
                             f"it belongs to; {_FRESH}")
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(decode(line))
        except ValueError as exc:
            raise JournalRefused(f"line {number} of {where} cannot be trusted: {exc}. Only a kill while the last "
                                 "line was being written is expected to leave damage, and this is not the last line, "
                                 f"so the file was changed by something else. Nothing in it is used; {_FRESH}") \
                from None
    header = records[0]
    if header.get("journal") != KIND:
        raise JournalRefused(f"{where} is not a crashcourse grade journal; move it away, or {_FRESH}")
    if header.get("format") != FORMAT:
        raise JournalRefused(f"{where} is in journal format {header.get('format')!r}, written by another version "
                             f"of the kit; this one reads format {FORMAT}. {_FRESH[0].upper() + _FRESH[1:]}")
    for number, record in enumerate(records[1:], 2):
        if not isinstance(record.get("id"), str) or not isinstance(record.get("files"), str) \
                or not isinstance(record.get("result"), dict):
            raise JournalRefused(f"line {number} of {where} is not a finished submission's record; {_FRESH}")
    return Contents(header, records[1:], end, len(data) - end)


def _differences(found: dict, wanted: dict) -> list[str]:
    out = []
    for key in sorted(set(found) | set(wanted)):
        if found.get(key) != wanted.get(key):
            if key == "grader":
                out.append("the grader's code or the level's tests have changed since")
            elif key == "scenarios":
                out.append("the --scenarios file differs")
            else:
                out.append(f"{key} was {_shown(found.get(key))}, now {_shown(wanted.get(key))}")
    return out


def _shown(value) -> str:
    return "the default" if value is None else json.dumps(value)


# -- the journal of one batch --------------------------------------------------------------------

class BatchJournal:
    """The finished submissions of one batch, kept on disk as they finish."""

    def __init__(self, path: str, header: dict, finished: dict, size: int, notes: list):
        self.path, self.header, self.finished, self.size = path, header, finished, size
        self.notes = notes                      # what the instructor should hear about the journal
        self.resumed = 0
        self._files: dict = {}                  # id -> hash of the files being graded in this run
        self._written = hashlib.sha256()        # every byte this run wrote since opening the file
        self._lock = -1

    @property
    def folder(self) -> str:
        return os.path.dirname(self.path)

    @classmethod
    def open(cls, path: str, wanted: dict, *, fresh: bool = False, submissions: str = "") -> "BatchJournal":
        """Resume the journal at ``path``, or start one. Raises :class:`JournalRefused` for a foreign one."""
        header = {"journal": KIND, "format": FORMAT, "settings": wanted}
        notes: list = []
        make_folder(os.path.dirname(path))
        lock = _lock(path)
        try:
            journal = cls._open(path, header, wanted, fresh, submissions, notes)
        except BaseException:
            os.close(lock)
            raise
        journal._lock = lock
        return journal

    @classmethod
    def _open(cls, path: str, header: dict, wanted: dict, fresh: bool, submissions: str,
              notes: list) -> "BatchJournal":
        data = None
        if not fresh:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = None
        if data is None:
            start = dict(header, submissions=os.path.abspath(submissions) if submissions else None,
                         started=time.strftime("%Y-%m-%d %H:%M:%S"))
            first = encode(start)
            write_atomic(path, first)
            journal = cls(path, start, {}, len(first), notes)
            journal._written.update(first)
            return journal
        where = f"the journal {path}"
        contents = read(data, where)
        found = contents.header.get("settings")
        if not isinstance(found, dict) or found != wanted:
            what = _differences(found if isinstance(found, dict) else {}, wanted)
            raise JournalRefused(f"{where} belongs to another batch: {'; '.join(what)}. Its results are not what this "
                                 f"run would give. Run the command that wrote it to carry on, or {_FRESH}")
        finished = {}
        for record in contents.records:
            finished[record["id"]] = (record["files"], record["result"])  # a later record replaces an earlier one
        if contents.torn:
            notes.append(f"the last line of {where} was cut short ({contents.torn} bytes: the batch was stopped while "
                         "writing it). That line was dropped and its submission is graded again.")
            _cut(path, contents.whole_length)
        journal = cls(path, contents.header, finished, contents.whole_length, notes)
        journal._written.update(data[:contents.whole_length])
        return journal

    def split(self, entries: Iterable[tuple]) -> tuple[list, list]:
        """``(entries still to grade, results taken from the journal)``: a result is reused only when
        the submission's files hash the same as when it was graded."""
        pending, resumed = [], []
        for student, source in entries:
            files = fingerprint(source)
            self._files[student] = files
            known = self.finished.get(student)
            if known is not None and known[0] == files:
                resumed.append(dict(known[1], id=student))
            else:
                pending.append((student, source))
        self.resumed = len(resumed)
        return pending, resumed

    def record(self, result: dict) -> None:
        """Append one finished submission and fsync it, before the batch goes on."""
        student = result["id"]
        files = self._files.get(student)
        if files is None:
            return
        line = encode({"id": student, "files": files, "result": result})
        append_line(self.path, line)
        self.size += len(line)
        self._written.update(line)

    def changed_by_others(self) -> bool:
        """Whether the file now holds anything but what this run read and appended (a submission
        that can write outside its folder could plant results for the next run)."""
        try:
            with open(self.path, "rb") as f:
                return hashlib.sha256(f.read()).digest() != self._written.digest()
        except OSError:
            return True

    def close(self) -> None:
        """Let another batch use this journal (the lock also goes when the process ends)."""
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1

    def discard(self) -> None:
        """Remove a journal this run found tampered with, so the next run starts clean."""
        try:
            os.unlink(self.path)
            fsync_folder(self.folder)
        except OSError:
            pass


def _lock(path: str) -> int:
    """Hold ``NAME.lock`` beside the journal for the whole batch: two batches appending to one
    journal at once would interleave their lines."""
    import fcntl

    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        # A POSIX record lock, not flock: forked judges do not inherit it, so a judge still
        # dying after its batch was killed never keeps the rerun out.
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise JournalRefused(f"another crashcourse grade is using the journal {path} right now. Wait for it to "
                             "finish, or write this run's report somewhere else with --output.") from None
    return fd


def append_line(path: str, line: bytes) -> None:
    """Append ``line`` with one write and make it durable before returning.

    O_APPEND puts it at the end even if the file grew; the fsync means a power cut after this
    returns keeps it, and that at most the line being written can be lost or cut short.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _cut(path: str, length: int) -> None:
    """Cut the file back to its last whole line, durably, so the next append starts a fresh line."""
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.ftruncate(fd, length)
        os.fsync(fd)
    finally:
        os.close(fd)
