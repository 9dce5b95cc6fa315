"""The learner's own helper: a durable, atomic replace of one file, used by agent.py."""

import os
import warnings


def fsync_folder(folder):
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        warnings.warn(f"cannot open {folder} to fsync it on this platform", RuntimeWarning)
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_folder(folder):
    folder = os.path.abspath(folder)
    if os.path.isdir(folder):
        return
    ensure_folder(os.path.dirname(folder))
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    fsync_folder(os.path.dirname(folder))


def replace_durably(path, data: bytes):
    folder = os.path.dirname(path) or "."
    ensure_folder(folder)
    temp = path + ".inflight"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_folder(folder)
