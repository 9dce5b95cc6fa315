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
    for number, (scenario, points, invariants) in enumerate(spec["scenarios"], 1):
        # The student sees this entry: it names the scenario by number, and says what broke without
        # quoting the scenario (its task, its tools' results, the file they made) or anything the code
        # said while it ran on it (an exception's message could carry the task out).
        nodeid = f"instructor::{number}"
        box.current = nodeid
        entry = {"nodeid": nodeid, "name": f"instructor scenario {number}", "max_score": float(points),
                 "task": None, "status": "failed", "output": ""}
        try:
            module = submission.load(spec["file"])
            fn = getattr(module, spec["function"], None)
            if not callable(fn):
                raise Incident(box.incident(f"{spec['file']} has no function `{spec['function']}`"))
            found = explore_loop(fn, scenario, models=spec["models"], timeout=min(20.0, max(box.time_left(), 0.1)))
            bad = [v for v in found.violations if not invariants or v.invariant in invariants]
            failed = bool(found.error or found.unseen or bad)
            entry.update(status="failed" if failed else "passed", output=_untold(found, bad) if failed else "")
        except Incident as exc:  # the judge's own words (a hang, a missing function, the box's time)
            entry.update(status="failed", output=str(exc))
        except BaseException as exc:  # noqa: BLE001 - pytest.fail raises an outcome, not an Exception
            entry.update(status="failed", output=f"your code raised {type(exc).__name__} on this scenario")
        out.append(entry)
    return out


def _untold(found, bad: list) -> str:
    """What broke in an instructor's scenario, in words that quote nothing of it."""
    if found.stuck is not None:
        return "your loop got stuck on this scenario and was stopped"
    if found.error:
        first = found.error.splitlines()[0] if found.error else ""
        kind = first.split(":", 1)[0] if ":" in first and " " not in first.split(":", 1)[0] else "an error"
        return f"your loop did not finish this scenario (it stopped with {kind})"
    if found.unseen:
        return "the grader could not see everything your code did to the disk on this scenario"
    kinds = sorted({v.invariant for v in bad})
    models = sorted({v.model for v in bad})
    return (f"{len(bad)} of {found.states} crash states break {', '.join(kinds)} (crash models {', '.join(models)}). "
            "The scenario is the instructor's and is not shown; the same invariants are checked by the level's "
            "own tests, whose failures say more.")


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
