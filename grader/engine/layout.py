"""Laying out a crash state as files: the one way the grader turns names from a run into paths.

A crash state names its files relative to the checkpoint folder (``checkpoint.json``,
``wal/0001.log``). Under ``crashcourse grade`` those names come from another process, the box the
submission runs in, and the judge writes them from outside the box: a name that is absolute or
climbs out with ``..`` would make the judge write a file of the submission's choosing anywhere it
may write. So every place that turns a crash state into files (second runs, level 4's resume,
level 6's loader, and anything later) goes through :class:`Layout`:

* a name must be a plain relative path inside the folder: no leading ``/``, no ``.`` or ``..``
  component, no empty component (``a//b``, a trailing ``/``), no NUL, no component longer than
  the file system allows and no path longer than :data:`MAX_NAME` (:func:`parts`);
* the folder itself is opened once, without following a link below the folder the judge made
  for it (``within``), and every file and subfolder is made relative to that descriptor
  (``dir_fd``), one component at a time, with ``O_NOFOLLOW``: a link planted in the folder is
  refused, never followed;
* anything else is an :class:`UnsafeName`, whose message tells the learner what the run reported
  and why it was refused. The caller treats it as a broken run (no verdict, no points).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Iterable, Iterator, Optional

MAX_NAME = 1024          # characters in one name, all components together
MAX_COMPONENT = 255      # bytes in one component (NAME_MAX on Linux)
MAX_DEPTH = 32           # components in one name
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafeName(Exception):
    """A crash state the grader refused to lay out: the message says which name and why, for a learner."""


def _shown(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 100 else text[:48] + "..." + text[-48:]  # both ends: where it starts, what it names


def _refuse(name: object, why: str) -> UnsafeName:
    return UnsafeName(f"this run reported a file named {_shown(name)} in its checkpoint folder, and {why}. "
                      "The grader lays out what a crash leaves only as plain names inside that folder, "
                      "so this run was treated as broken: no check that reads it can pass")


def parts(name: object) -> tuple:
    """The components of ``name``, a plain relative path inside a folder; :class:`UnsafeName` if it is not one."""
    if not isinstance(name, str):
        raise _refuse(name, "that is not text")
    if not name:
        raise _refuse(name, "an empty name is no file")
    if len(name) > MAX_NAME:
        raise _refuse(name, f"it is {len(name)} characters long (at most {MAX_NAME} are laid out)")
    if "\0" in name:
        raise _refuse(name, "it holds a NUL character, which no file name may")
    if name.startswith("/"):
        raise _refuse(name, "it is an absolute path, outside the folder")
    pieces = tuple(name.split("/"))
    for piece in pieces:
        if piece == "":
            raise _refuse(name, "it has an empty part (two slashes in a row, or a slash at the end)")
        if piece in (".", ".."):
            raise _refuse(name, f"it has a {piece!r} part" + (", which climbs out of the folder" if piece == ".."
                                                              else ", which is not a plain name"))
        try:
            size = len(os.fsencode(piece))
        except UnicodeEncodeError:
            raise _refuse(name, "it holds characters no file name on this system can") from None
        if size > MAX_COMPONENT:
            raise _refuse(name, f"one part of it is {size} bytes long (a file name holds at most {MAX_COMPONENT})")
    if len(pieces) > MAX_DEPTH:
        raise _refuse(name, f"it is {len(pieces)} folders deep (at most {MAX_DEPTH} are laid out)")
    return pieces


def check_names(files: Iterable[str], dirs: Iterable[str] = ()) -> None:
    """Refuse (:class:`UnsafeName`) the first name of ``files`` or ``dirs`` that is not a plain name."""
    for name in files:
        parts(name)
    for name in dirs:
        parts(name)


def _is_dir(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


class Layout:
    """A checkpoint folder the judge owns, open as a directory descriptor; names inside it are made safe.

    ``folder`` is made if it is missing. ``within`` (default: ``folder`` itself) is the folder the
    judge made for it, which must already exist: the part of ``folder`` below ``within`` is walked
    one component at a time without following links. Use as a context manager, or call
    :meth:`close`.
    """

    def __init__(self, folder: str, within: Optional[str] = None, make: bool = True):
        folder = os.path.abspath(folder)
        within = folder if within is None else os.path.abspath(within)
        if folder != within and not folder.startswith(within.rstrip("/") + "/"):
            raise ValueError(f"{folder} is not inside {within}")
        self.folder = folder
        fd = os.open(within, _DIR)
        try:
            below = folder[len(within):].strip("/")
            for piece in below.split("/") if below else ():
                parent, fd = fd, -1
                fd = self._enter(parent, piece, folder, make)  # (closes parent, whatever happens)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        self.fd = fd

    def __enter__(self) -> "Layout":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @staticmethod
    def _enter(parent: int, piece: str, name: str, make: bool) -> int:
        """Open folder ``piece`` under ``parent`` (made if ``make``), never through a link; closes ``parent``."""
        try:
            try:
                return os.open(piece, _DIR, dir_fd=parent)
            except FileNotFoundError:
                if not make:
                    raise
                try:
                    os.mkdir(piece, 0o777, dir_fd=parent)  # the umask applies, as for os.makedirs
                except FileExistsError:
                    pass
                return os.open(piece, _DIR, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(name, f"{piece!r} on its way is a link or a file, not a folder") from None
            raise
        finally:
            os.close(parent)

    def _parent(self, pieces: tuple, name: str, make: bool) -> int:
        """A new descriptor of the folder holding ``pieces[-1]`` (its folders made if ``make``)."""
        fd = os.dup(self.fd)
        for piece in pieces[:-1]:
            fd = self._enter(fd, piece, name, make)
        return fd

    def write(self, name: str, data: bytes, append: bool = False) -> None:
        """Write ``data`` to file ``name`` (made, with its folders, if missing; emptied first unless ``append``)."""
        pieces = parts(name)
        parent = self._parent(pieces, name, True)
        try:
            flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | \
                (os.O_APPEND if append else os.O_TRUNC)
            try:
                fd = os.open(pieces[-1], flags | os.O_NONBLOCK, 0o666, dir_fd=parent)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                    raise _refuse(name, "something that is not a plain file (a link, a folder) is already there") \
                        from None
                raise
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise _refuse(name, "something that is not a plain file is already there")
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        finally:
            os.close(parent)

    def read(self, name: str, limit: Optional[int] = None) -> Optional[bytes]:
        """The bytes of plain file ``name`` (at most ``limit``), or None if it is missing or not a plain file."""
        pieces = parts(name)
        try:
            parent = self._parent(pieces, name, False)
        except (OSError, UnsafeName):
            return None
        try:
            fd = os.open(pieces[-1], os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                         dir_fd=parent)
        except OSError:
            return None
        finally:
            os.close(parent)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            chunks, left = [], limit
            while left is None or left > 0:
                chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                if left is not None:
                    left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def make_dir(self, name: str) -> None:
        """Make folder ``name`` and the folders on its way (nothing if it is there)."""
        pieces = parts(name)
        fd = self._parent(pieces + ("",), name, True)
        os.close(fd)

    def remove(self, name: str) -> None:
        """Remove file ``name`` (a link is removed, never followed; nothing if it is missing)."""
        pieces = parts(name)
        try:
            parent = self._parent(pieces, name, False)
        except (FileNotFoundError, UnsafeName):
            return
        try:
            os.unlink(pieces[-1], dir_fd=parent)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            _remove_tree(parent, pieces[-1])
        finally:
            os.close(parent)

    def remove_tree(self, name: str) -> None:
        """Remove folder ``name`` and all it holds, without following any link in it."""
        pieces = parts(name)
        try:
            parent = self._parent(pieces, name, False)
        except (FileNotFoundError, UnsafeName):
            return
        try:
            _remove_tree(parent, pieces[-1])
        finally:
            os.close(parent)

    def walk(self) -> Iterator[tuple]:
        """``(folder, subfolders, files)`` for every folder inside, deepest first, names relative to the
        layout (``""`` for the folder itself); links are listed as files and never entered."""
        yield from _walk(os.dup(self.fd), "")


def _walk(fd: int, rel: str) -> Iterator[tuple]:
    try:
        dirs, files = [], []
        with os.scandir(fd) as entries:
            for entry in entries:
                (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
        for d in dirs:
            try:
                child = os.open(d, _DIR, dir_fd=fd)
            except OSError:
                continue
            yield from _walk(child, f"{rel}/{d}" if rel else d)
        yield rel, dirs, files
    finally:
        os.close(fd)


def _remove_tree(parent: int, piece: str) -> None:
    try:
        fd = os.open(piece, _DIR, dir_fd=parent)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            os.unlink(piece, dir_fd=parent)
            return
        raise
    try:
        with os.scandir(fd) as entries:
            listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for name, is_dir in listed:
            if is_dir:
                _remove_tree(fd, name)
            else:
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    pass
    finally:
        os.close(fd)
    try:
        os.rmdir(piece, dir_fd=parent)
    except FileNotFoundError:
        pass


def lay_out(folder: str, files: dict, dirs: Iterable[str] = (), *, within: Optional[str] = None) -> None:
    """Make ``folder`` hold ``files`` (name -> bytes) and the folders ``dirs``, all names checked first.

    ``within``: the folder the judge made, at or above ``folder`` (see :class:`Layout`). Every name
    is checked before anything is written, so a refused crash state leaves no file of its own.
    """
    check_names(files, dirs)
    with Layout(folder, within) as layout:
        for name in dirs:
            layout.make_dir(name)
        for name, data in files.items():
            layout.write(name, data)
