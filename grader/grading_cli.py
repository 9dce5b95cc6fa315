"""Instructor commands: grade, gradescope-package. (Being built: issue 4.)"""

from __future__ import annotations


def register(sub) -> None:
    return None
