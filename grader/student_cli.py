"""Student commands: demo, check, hint, watch, selfcheck, run. (Being built: issue 5.)"""

from __future__ import annotations


def register(sub) -> None:
    demo = sub.add_parser("demo", help="the crash matrix of each level's starter beside its solution")
    demo.set_defaults(handler=_demo)


def _demo(args) -> int:
    from .explore import explore_loop
    from .plugin import Submission  # noqa: F401  (kept light: the full demo lands with issue 5)
    from .scripted import support_tickets
    import importlib.util
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent
    for label, folder in (("starter", "exercises/level2"), ("solution", "solutions/level2")):
        spec = importlib.util.spec_from_file_location(f"demo_{label}", root / folder / "agent.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        result = explore_loop(module.run_agent, support_tickets())
        verdict = "survives every crash" if result.ok else "breaks " + ", ".join(sorted(result.tripped))
        print(f"level 2 {label}: {result.states} crash states at {result.points} points: {verdict}")
    return 0
