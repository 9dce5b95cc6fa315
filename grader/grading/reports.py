"""Reports of a graded batch: ``json`` (the contract), ``gradescope``, ``csv`` and ``md``.

Every writer takes the batch as :func:`grader.grading.batch.grade_batch` returns it::

    {"level": 2, "submissions": [{"id", "score", "max_score", "status", "error", "tests": [...]}, ...]}

where each test is ``{"name", "status", "score", "max_score", "output"}`` (plus ``reason``, the
sandbox's own account of a hang or a crash, which the writers fold into the output, and ``checks``,
the qualified ids of :mod:`grader.levels.registry` the failing test recorded as tripped).

A batch from ``grade_batch`` also says under which ``isolation`` the code ran (``"bubblewrap"``, or
``"none"`` when the instructor graded with ``--no-box``); every format carries it, and says plainly
when the grades are not tamper-proof. Everything a submission controls (its id above all) is
escaped where a format gives characters a meaning: table cells in Markdown, formulas in CSV.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from typing import Optional

from grader.atomicfile import make_folder, write_atomic
from grader.levels import registry

FORMATS = ("json", "gradescope", "csv", "md")


BOXED = "bubblewrap"


def isolation_note(isolation: str) -> str:
    """One sentence on what held while the code ran, for every report."""
    if isolation == BOXED:
        return ("Isolation: each submission's code ran in its own bubblewrap box (no network, no other "
                "student's files, no kit or instructor files but the grader itself, verdicts computed outside).")
    if isolation.endswith("container only"):
        return (f"NOT TAMPER-PROOF (isolation: {isolation}): this code ran in its own container but without a "
                "box, beside the grader, so it could have changed its own grade. The instructor's seed, if any, "
                "was read from a file removed before the code ran; the grader's own files and any scenarios file "
                "were within its reach.")
    return (f"NOT TAMPER-PROOF (isolation: {isolation}): the submissions' code ran without a box, so a "
            "submission could have changed its own grade or another student's, or read files it should not.")


def kernel_note(problem: Optional[str]) -> str:
    """One sentence on whether the kernel's account of the file operations was checked."""
    if problem is None:
        return ("Kernel trace: each submission's file operations were checked against strace's account of its "
                "system calls.")
    return (f"NOT CHECKED on this machine: the kernel's account of the file operations ({problem}). The scores "
            "rest on what each submission's own process recorded, which its code could have changed.")


def checked_lines(batch: dict) -> list:
    """What held while this batch ran and what was not checked, one sentence each, for every report."""
    lines = [isolation_note(batch["isolation"])] if "isolation" in batch else []
    if "kernel_trace" in batch:
        lines.append(kernel_note(batch["kernel_trace"]))
    return lines


def contract(batch: dict) -> dict:
    """Exactly the shape DESIGN.md section 7 fixes, plus ``isolation`` beside ``level`` when the batch says it."""
    subs = []
    for s in batch["submissions"]:
        tests = []
        for t in s.get("tests", []):
            output = t.get("output") or ""
            if t.get("reason") and t["reason"] not in output:
                output = (t["reason"] + ("\n\n" + output if output else "")).strip()
            tests.append({"name": t["name"], "status": t["status"], "score": float(t["score"]),
                          "max_score": float(t["max_score"]), "output": output})
        subs.append({"id": s["id"], "score": float(s["score"]), "max_score": float(s["max_score"]),
                     "status": s["status"], "error": s.get("error"), "tests": tests})
    out = {"level": batch["level"], "submissions": subs}
    if "isolation" in batch:
        out = {"level": batch["level"], "isolation": batch["isolation"], "submissions": subs}
    if isinstance(batch.get("kernel_trace"), str):
        # Like isolation: said only when it matters, beside level and submissions (which keep their shape).
        out["not_checked"] = [f"the kernel's account of the file operations ({batch['kernel_trace']})"]
    return out


def to_json(batch: dict) -> str:
    return json.dumps(contract(batch), indent=2, ensure_ascii=False) + "\n"


def gradescope_result(submission: dict, seconds: float = 0.0, isolation: Optional[str] = None,
                      kernel_trace=False) -> dict:
    """One student's results.json in Gradescope's autograder format (``isolation``, and ``kernel_trace``
    when it is None or a problem's words: a line each in its output, saying what held)."""
    tests = []
    for i, t in enumerate(contract({"level": 0, "submissions": [submission]})["submissions"][0]["tests"], 1):
        entry = {"name": t["name"], "number": str(i), "score": t["score"], "max_score": t["max_score"],
                 "output": t["output"], "visibility": "visible"}
        if t["status"] in ("passed", "failed"):
            entry["status"] = t["status"]
        elif t["status"] == "error":
            entry["status"] = "failed"
        else:
            entry["output"] = "Marked for the instructor's manual review (no automatic points).\n\n" + t["output"]
        tests.append(entry)
    if submission["status"] == "error":
        summary = f"The grader could not run your code: {submission.get('error')}"
    else:
        summary = f"{submission['score']:g} of {submission['max_score']:g} points from the automatic checks."
        if failing(submission):
            summary += f"\nNot passed: {', '.join(failing(submission))}.\nFirst reason: {reason(submission)}"
    if isolation is not None:
        summary += "\n" + isolation_note(isolation)
    if kernel_trace is None or isinstance(kernel_trace, str):
        summary += "\n" + kernel_note(kernel_trace)
    return {"score": float(submission["score"]), "execution_time": round(seconds), "output": summary,
            "stdout_visibility": "hidden", "visibility": "visible", "tests": tests}


def write_gradescope(batch: dict, folder: str) -> list[str]:
    """One ``results.json`` per student under ``folder``, each replaced whole (see :mod:`grader.atomicfile`)."""
    written = []
    for s in batch["submissions"]:
        target = os.path.join(folder, _safe(s["id"]))
        make_folder(target)
        path = os.path.join(target, "results.json")
        write_gradescope_result(path, gradescope_result(s, s.get("seconds", 0.0), batch.get("isolation"),
                                                        batch.get("kernel_trace", False)))
        written.append(path)
    return written


def write_gradescope_result(path: str, result: dict) -> None:
    """Write one student's results.json: a kill or a power cut leaves the old file or this one."""
    write_atomic(path, json.dumps(result, indent=2, ensure_ascii=False))


def write_report(batch: dict, fmt: str, path: str) -> None:
    """Write the report in ``fmt`` (json, csv or md) to ``path``, replacing any earlier one whole."""
    text = render(batch, fmt)
    make_folder(os.path.dirname(os.path.abspath(path)))
    write_atomic(path, text)


def safe_folder_name(name: str) -> str:
    """The folder a student's Gradescope results.json goes in (the batch refuses two ids that share one)."""
    return re.sub(r"[^A-Za-z0-9._@-]", "_", name) or "_"


_safe = safe_folder_name


def test_names(batch: dict) -> list[str]:
    names: list[str] = []
    for s in batch["submissions"]:
        for t in s.get("tests", []):
            if t["name"] not in names:
                names.append(t["name"])
    return names


def failing(submission: dict) -> list:
    """The names of the tests a submission failed (or that broke), in the report's order."""
    return [t["name"] for t in submission.get("tests", []) if t["status"] in ("failed", "error")]


def _first_line(text: str) -> str:
    """The first line that says something; one that only introduces a list takes its first item along."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:
        first = f"{first} {lines[1].lstrip('- ')}"
    return first[:240]


def reason(submission: dict) -> str:
    """One line on why a submission lost points: the error (a hang, a file that would not import), or
    the first failing test's first line. Empty for a submission that lost none."""
    if submission.get("error"):
        return _first_line(submission["error"])
    for t in submission.get("tests", []):
        if t["status"] in ("failed", "error"):
            line = _first_line(t.get("reason") or "") or _first_line(t.get("output") or "")
            return f"{t['name']}: {line}" if line else t["name"]
    return ""


def cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: one line, and never read as a formula."""
    text = " ".join(str(text).split())
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def to_csv(batch: dict) -> str:
    """A row per student, a column per test (its points, or ``manual review``), and the isolation last."""
    names = test_names(batch)
    out = io.StringIO()
    writer = csv.writer(out)
    isolation = batch.get("isolation")
    kernel = batch.get("kernel_trace", False)
    writer.writerow(["id", "status", "score", "max_score", "error", "failing", "reason"] + [cell(n) for n in names]
                    + (["isolation"] if isolation is not None else [])
                    + (["kernel_trace"] if kernel is None or isinstance(kernel, str) else []))
    for s in batch["submissions"]:
        by_name = {t["name"]: t for t in s.get("tests", [])}
        row = [cell(s["id"]), s["status"], f"{s['score']:g}", f"{s['max_score']:g}",
               cell((s.get("error") or "").splitlines()[0]) if s.get("error") else "",
               cell("; ".join(failing(s))), cell(reason(s))]
        for name in names:
            t = by_name.get(name)
            row.append("" if t is None else ("manual review" if t["status"] == "manual review" else f"{t['score']:g}"))
        if isolation is not None:
            row.append(isolation if isolation == BOXED else f"{isolation} (not tamper-proof)")
        if kernel is None or isinstance(kernel, str):
            row.append("checked" if kernel is None else cell(f"not checked: {kernel}"))
        writer.writerow(row)
    return out.getvalue()


def md(text: str) -> str:
    """Text a submission controls, safe inside a Markdown table cell or list item: one line, no markup."""
    text = " ".join(str(text).split())
    return re.sub(r"([\\`*_{}\[\]<>|~])", r"\\\1", text)


def tripped(test: dict) -> set:
    """The registry checks a graded test recorded as tripped: ``{(namespace, id)}``.

    Only ids the registry declares count (the list may have travelled from a process beside the
    submission's code, so it is read as data and checked, never trusted as text).
    """
    found = set()
    for name in test.get("checks") or ():
        if isinstance(name, str):
            namespace, check_id = registry.split(name)
            if namespace in registry.namespaces() and registry.check(namespace, check_id) is not None:
                found.add((namespace, check_id))
    return found


def to_markdown(batch: dict) -> str:
    """Class-wide: scores, each test's pass rate, how often each invariant tripped, and per student
    the score, the failing checks and one line of why."""
    subs = batch["submissions"]
    n = len(subs)
    lines = [f"# Level {batch['level']}: {n} submission{'s' if n != 1 else ''}", ""]
    for line in checked_lines(batch):
        loud = line.startswith(("NOT TAMPER-PROOF", "NOT CHECKED"))
        lines += [("**" if loud else "") + line + ("**" if loud else ""), ""]
    if not n:
        return "\n".join(lines + ["Nothing to grade."]) + "\n"
    lines += _md_summary(subs) + _md_invariants(subs) + _md_checks(batch) + _md_problems(subs) + _md_students(subs)
    return "\n".join(lines) + "\n"


def _md_summary(subs: list) -> list:
    n = len(subs)
    status = Counter(s["status"] for s in subs)
    scores = sorted(s["score"] for s in subs)
    top = max((s["max_score"] for s in subs), default=0)
    mean = sum(scores) / n
    median = scores[n // 2] if n % 2 else (scores[n // 2 - 1] + scores[n // 2]) / 2
    return [f"- passed: {status['passed']}, failed: {status['failed']}, could not be graded: {status['error']}",
            f"- score: mean {mean:.1f}, median {median:g}, out of {top:g}", ""]


def _md_invariants(subs: list) -> list:
    lines = ["## Where the class struggles: invariants that tripped", "",
             "Each count is the number of students with at least one failing check that names the invariant.", "",
             "| invariant | students | what it guards |", "|---|---|---|"]
    per_invariant: Counter = Counter()
    for s in subs:
        seen = set()
        for t in s.get("tests", []):
            if t["status"] in ("failed", "error"):
                seen |= tripped(t)
        per_invariant.update(seen)
    # Most students first; ties in the registry's order, so the table reads the same every time.
    order = {(ns, c.id): i for i, (ns, c) in enumerate((ns, c) for ns in registry.namespaces()
                                                        for c in registry.checks(ns))}
    for (namespace, check_id), count in sorted(per_invariant.items(), key=lambda kv: (-kv[1], order[kv[0]])):
        lines.append(f"| {check_id} | {count} ({100 * count / len(subs):.0f}%) | "
                     f"{registry.check(namespace, check_id).words} |")
    if not per_invariant:
        lines.append("| (none) | 0 | |")
    return lines + [""]


def _md_checks(batch: dict) -> list:
    subs = batch["submissions"]
    refused = sum(1 for s in subs if not s.get("tests"))
    lines = ["## Each check", "",
             "Not run: students whose code could not be run at all (listed under \"Could not be graded\").", "",
             "| check | points | passed | failed | manual review | not run |", "|---|---|---|---|---|---|"]
    for name in test_names(batch):
        results = [t for s in subs for t in s.get("tests", []) if t["name"] == name]
        c = Counter(t["status"] for t in results)
        points = max((t["max_score"] for t in results), default=0)
        lines.append(f"| {name} | {points:g} | {c['passed']} | {c['failed'] + c['error']} | {c['manual review']} "
                     f"| {refused} |")
    return lines + [""]


def _md_problems(subs: list) -> list:
    problems = [(s["id"], s.get("error")) for s in subs if s["status"] == "error"]
    if not problems:
        return []
    lines = ["## Could not be graded", ""]
    reasons = Counter((e or "").splitlines()[0][:160] for _, e in problems)
    for said, count in reasons.most_common():
        who = ", ".join(md(i) for i, e in problems if (e or "").splitlines()[0][:160] == said)
        lines.append(f"- {count}x {md(said)} ({who})")
    return lines + [""]


def _md_students(subs: list) -> list:
    lines = ["## Students", "", "| id | status | score | failing checks | why |", "|---|---|---|---|---|"]
    for s in subs:
        lines.append(f"| {md(s['id'])} | {s['status']} | {s['score']:g} / {s['max_score']:g} | "
                     f"{md(', '.join(failing(s)))} | {md(reason(s))} |")
    return lines


def render(batch: dict, fmt: str) -> str:
    if fmt == "json":
        return to_json(batch)
    if fmt == "csv":
        return to_csv(batch)
    if fmt == "md":
        return to_markdown(batch)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
