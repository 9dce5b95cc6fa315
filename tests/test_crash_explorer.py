"""The public ``crash_explorer`` fixture, used the way a project outside the kit would use it.

The README shows it passing on an atomic save; these show the other half: a save that rewrites
the file in place is caught, and the failure says which crash leaves what.
"""

from __future__ import annotations

SAVES = '''
import json
import os


def save_in_place(path, settings):
    with open(path, "w") as f:          # truncates first: a crash here leaves an empty or half file
        json.dump(settings, f)


def save_atomically(path, settings):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(settings, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
'''

TESTS = '''
import pytest

from saves import save_atomically, save_in_place


@pytest.mark.parametrize("save", [save_in_place, save_atomically])
def test_settings_survive_a_crash(crash_explorer, tmp_path, save):
    target = tmp_path / "settings.json"
    target.write_text('{"volume": 3, "theme": "dark"}')
    crashes = crash_explorer(lambda: save(target, {"volume": 7, "theme": "light" * 2000}), target)
    crashes.assert_atomic()
'''


def test_assert_atomic_fails_on_a_torn_write_and_passes_on_an_atomic_one(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # only the kit's plugin, as a user would load it
    pytester.makepyfile(saves=SAVES, test_settings=TESTS)
    result = pytester.runpytest("-p", "grader.faces.plugin", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*crash states leave a file that is not the old version or the new one, whole*",
        # the kill right after open() emptied the file, and a torn write that left half of it
        "*M1 (the process is killed), after open() opened *settings.json for writing and emptied it: "
        "settings.json is 0 bytes (empty)*",
        "*M2 (the process is killed in the middle of a write)*bytes landed*",
        "FAILED test_settings.py::test_settings_survive_a_crash[[]save_in_place[]]*",
    ])
