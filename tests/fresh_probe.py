"""A job for a fresh child that says what its process had loaded (tests/test_fresh.py). Kept apart
from the test modules, which import pytest: a child imports the module its job comes from."""

import sys


def loaded(_fn, *names):
    return {name: name in sys.modules for name in names}
