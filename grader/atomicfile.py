"""Writing a file so that a crash leaves the old version or the new one, never a mix.

This is the lesson's own recipe, used by the kit for every file it writes for a student or an
instructor (reports, Gradescope results, the hints state, a grading journal's header)::

    write_atomic("class.md", text)

1. Create a temporary file in the *same* folder as the target. A rename is only atomic inside one
   file system, and a temp file in ``/tmp`` may sit on another one (then "rename" is a copy).
2. Write all the bytes into it, flush Python's buffer, and ``fsync`` it, so the data is on the
   disk before any name points at it. Skip this and a power cut can leave the new name pointing
   at an empty file (the ext4 episode of 2009).
3. ``os.replace`` it over the target. Up to this moment the old file was untouched; from this
   moment the name points at the new, complete one.
4. ``fsync`` the folder, where losing the new file after a power cut would hurt: the rename is
   an entry in the folder, and only the folder's own fsync makes that entry durable.

If anything fails before step 3, the temp file is removed and the target is as it was. A kill
between steps 1 and 3 leaves a hidden ``.NAME.*.tmp`` beside the target; nothing ever reads it,
and it can be deleted.

This module imports nothing from the kit, so any part of it (and any learner) can use it.
"""

from __future__ import annotations

import errno
import os
import secrets
from typing import Union

__all__ = ["write_atomic", "make_folder", "fsync_folder"]


def write_atomic(path: Union[str, os.PathLike], data: Union[bytes, str], *, durable: bool = True) -> None:
    """Replace the file at ``path`` with ``data`` (``str`` is written as UTF-8), all or nothing.

    ``durable=True`` also fsyncs the folder, so the new file survives a power cut once this
    returns. With ``durable=False`` a power cut may bring back the old file (never a torn one):
    right for state that only saves a learner a little repetition, such as which hints were shown.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    # Write beside the real file when ``path`` is a symbolic link, so the link stays a link.
    target = os.path.realpath(os.fspath(path))
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    # O_EXCL: never reuse a leftover temp file from an earlier crash (or someone else's file).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            _keep_mode(f.fileno(), target)
            f.write(data)
            f.flush()             # Python's buffer to the operating system...
            os.fsync(f.fileno())  # ...and the operating system's cache to the disk
        os.replace(tmp, target)   # after the with block: the temp file is closed and complete
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_folder(folder)


def fsync_folder(folder: Union[str, os.PathLike]) -> None:
    """Make the entries of ``folder`` (a create, a rename) survive a power cut."""
    fd = os.open(os.fspath(folder) or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        # A few file systems cannot fsync a folder at all; there is nothing more to do on them.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def make_folder(path: Union[str, os.PathLike], *, durable: bool = True) -> None:
    """``os.makedirs(path, exist_ok=True)``, fsyncing each parent a new folder was made in."""
    path = os.path.abspath(os.fspath(path))
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
            continue
        if durable:
            fsync_folder(os.path.dirname(folder))


def _keep_mode(fd: int, target: str) -> None:
    """Give the new file the permissions of the one it replaces (a report someone made private)."""
    try:
        mode = os.stat(target).st_mode & 0o7777
    except OSError:
        return
    try:
        os.fchmod(fd, mode)
    except OSError:
        pass
