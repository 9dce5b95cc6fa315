"""An instructor's own scenarios (kept out of the student kit), graded like one more level test each."""

from __future__ import annotations

import json
from pathlib import Path

from grader.engine import loader
from grader.grading.box import Box, Incident
from grader.grading.stand_in import RemoteSubmission


def run_scenarios(path: str, box: Box) -> list:
    """The instructor's own scenarios (not shipped to students), each explored like a level test."""
    from grader.engine.explore import explore_loop
    spec = load_scenarios(path)
    out = []
    submission = RemoteSubmission(Path(box.folder), box)
    for scenario, points, invariants in spec["scenarios"]:
        nodeid = f"instructor::{scenario.name}"
        box.current = nodeid
        entry = {"nodeid": nodeid, "name": f"instructor scenario: {scenario.name}", "max_score": float(points),
                 "task": None, "status": "failed", "output": ""}
        try:
            module = submission.load(spec["file"])
            fn = getattr(module, spec["function"], None)
            if not callable(fn):
                raise Incident(box.incident(f"{spec['file']} has no function `{spec['function']}`"))
            found = explore_loop(fn, scenario, models=spec["models"], timeout=min(20.0, max(box.time_left(), 0.1)))
            bad = found.error or found.unseen or [v for v in found.violations
                                                   if not invariants or v.invariant in invariants]
            entry.update(status="failed" if bad else "passed", output=found.report() if bad else "")
        except BaseException as exc:  # noqa: BLE001 - pytest.fail raises an outcome, not an Exception
            entry.update(status="failed", output=str(exc) or type(exc).__name__)
        out.append(entry)
    return out


def load_scenarios(path: str) -> dict:
    """Read an instructor's scenario file (JSON, or Python defining SCENARIOS). Kept out of the student kit.

    JSON::

        {"file": "agent.py", "function": "run_agent", "models": ["M1", "M2"], "points": 1,
         "scenarios": [{"name": "refund audit", "task": "Total the refunds", "points": 2,
                        "invariants": ["PARSE", "WHOLE"],
                        "turns": [["read_report", {"week": 1}, "refunds: 40 EUR"], ...]}]}

    Python: a module with ``SCENARIOS`` (a list of :class:`grader.engine.scripted.Scenario` or of dicts as
    above) and optionally ``FILE``, ``FUNCTION``, ``MODELS``, ``POINTS``. Each scenario becomes one
    more check worth ``points``: the function runs once in the sandbox, and every crash state under
    ``models`` must keep ``invariants`` (all of them when the list is empty or absent).
    """
    from grader.engine.scripted import Scenario, from_turns
    p = Path(path)
    if p.suffix == ".py":
        mod = loader.import_file(p, name="crashcourse_instructor_scenarios")
        data = {k.lower(): getattr(mod, k) for k in ("FILE", "FUNCTION", "MODELS", "POINTS", "SCENARIOS")
                if hasattr(mod, k)}
    else:
        data = json.loads(p.read_text(encoding="utf-8"))
    items = []
    for i, item in enumerate(data.get("scenarios", [])):
        if isinstance(item, Scenario):
            items.append((item, data.get("points", 1), []))
            continue
        turns = [tuple(t) for t in item.get("turns", [])]
        scenario = from_turns(item.get("task", "the instructor's task"), turns, item.get("final_text", "Done."),
                              seed=int(item.get("seed", 0)), name=item.get("name", f"scenario {i + 1}"))
        items.append((scenario, item.get("points", data.get("points", 1)), list(item.get("invariants", []))))
    return {"file": data.get("file", "agent.py"), "function": data.get("function", "run_agent"),
            "models": tuple(data.get("models", ("M1", "M2"))), "scenarios": items}
