"""benchmarks/fidelity.py run on a part of the corpus (``--only``) replaces those rows of the table and
keeps the others: a partial run never overwrites the whole table. The measurement is stood in for
(the real one kills processes for minutes): this is about the table, not the kills."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT / "benchmarks"))

import fidelity  # noqa: E402
import fidelity_harness as harness  # noqa: E402


def _stand_in(level, name, path, most):
    return harness.Agreement(level, name, engine={"PARSE"}, kills=most, same_folder=most, real={"PARSE"})


def _rows(table: str) -> dict:
    return {line.split(" | ")[1]: line for line in table.splitlines() if line.startswith("| 2 | ")}


def test_a_partial_run_replaces_its_rows_and_keeps_the_others(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "measure", _stand_in)
    for name in ("fidelity.md", "fidelity.json"):
        shutil.copy(KIT / "benchmarks" / name, tmp_path / name)
    before = (tmp_path / "fidelity.md").read_text()
    out = str(tmp_path / "fidelity.md")
    assert fidelity.main(["--only", "2/w06", "--only", "2/w07_", "--jobs", "1", "--output", out]) == 0
    after = (tmp_path / "fidelity.md").read_text()
    old, new = _rows(before), _rows(after)
    changed = {name for name in old if old[name] != new[name]}
    assert changed == {"w06_tmp_in_system_tmp", "w07_mkstemp_default_dir"}
    kills = json.loads((tmp_path / "fidelity.json").read_text())["run"]["kills"]
    assert new["w06_tmp_in_system_tmp"].startswith(f"| 2 | w06_tmp_in_system_tmp | PARSE | {kills} | {kills} |")
    assert len(json.loads((tmp_path / "fidelity.json").read_text())["rows"]) == before.count("\n| ") - 1  # the header too
    assert "## Rows run again" in after and "level 2 w06_tmp_in_system_tmp, level 2 w07_mkstemp_default_dir" in after
    # Once more: the first update is still listed, and the rows it made are kept.
    assert fidelity.main(["--only", "2/c01_", "--jobs", "1", "--output", out]) == 0
    again = (tmp_path / "fidelity.md").read_text()
    assert _rows(again)["w06_tmp_in_system_tmp"] == new["w06_tmp_in_system_tmp"]
    assert again.count("\n- 20") == before.count("\n- 20") + 2


def test_a_partial_run_to_a_new_table_writes_its_rows_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "measure", _stand_in)
    out = str(tmp_path / "part.md")
    assert fidelity.main(["--only", "2/w06", "--jobs", "1", "--kills", "3", "--output", out]) == 0
    table = (tmp_path / "part.md").read_text()
    assert list(_rows(table)) == ["w06_tmp_in_system_tmp"]
    assert "--kills 3 --only 2/w06" in table and "Rows run again" not in table
