"""The kit as a package: the learner's workspace, the handout, the fleets, the release files.

The whole wheel path (build, install in a fresh venv, init, red, green, grade) runs in .ci/run;
these tests hold the pieces to their behaviour quickly, from this checkout.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from grader.faces import cli, workspace
from grader.grading import prairielearn
from grader.levels import manifest

KIT = Path(__file__).resolve().parent.parent


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CRASHCOURSE_ROOT", "PYTEST_ADDOPTS")}
    env.update(extra)
    return env


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """A workspace with levels 1 and 2, made the way a learner makes one."""
    monkeypatch.delenv("CRASHCOURSE_ROOT", raising=False)
    target = tmp_path / "course"
    assert cli.main(["init", str(target), "--levels", "1,2", "--github-classroom"]) == 0
    return target


def _solution_bytes() -> set:
    return {p.read_bytes() for p in (KIT / "solutions").rglob("*") if p.is_file()}


def test_a_workspace_holds_the_learners_material_and_no_solution(ws):
    names = {p.relative_to(ws).as_posix() for p in ws.rglob("*") if p.is_file()}
    for level in (1, 2):
        folder = KIT / "exercises" / f"level{level}"
        assert {f"exercises/level{level}/{p.name}" for p in folder.iterdir() if p.is_file()} <= names
    assert {"README.md", "lessons/02-checkpoints.md", "exercises/manifest.json"} <= names
    assert not any(n.startswith("notebooks/") for n in names), "the notebook works level 2's fix through"
    assert not any(n.startswith(("exercises/level3", "solutions", "tests/")) for n in names)
    # Not by name only: no file in the workspace has a solution's content.
    solutions = _solution_bytes()
    leaked = [n for n in names if (ws / n).read_bytes() in solutions]
    assert not leaked, leaked
    kit = manifest.load(ws)
    assert kit.workspace and [lv.number for lv in kit.existing()] == [1, 2]
    readme = (ws / "README.md").read_text()
    assert "pytest exercises/level1" in readme and "crashcourse hint 1" in readme


def test_making_it_again_keeps_the_learners_work_and_says_so(ws, capsys):
    mine = ws / "exercises" / "level2" / "agent.py"
    mine.write_text("# my loop, half done\n")
    capsys.readouterr()
    assert cli.main(["init", str(ws), "--levels", "1-3"]) == 0
    out = capsys.readouterr().out
    assert mine.read_text() == "# my loop, half done\n"
    assert "exercises/level2/agent.py" in out and "never overwritten" in out
    assert (ws / "exercises" / "level3" / "agent.py").is_file()  # the new level arrived
    # The README was the kit's, untouched: it now lists level 3. Once edited, it is the learner's.
    assert "exercises/level3/agent.py" in (ws / "README.md").read_text()
    (ws / "README.md").write_text("my notes\n")
    assert cli.main(["init", str(ws), "--levels", "4"]) == 0
    assert (ws / "README.md").read_text() == "my notes\n" and "README.md" in capsys.readouterr().out


def test_init_will_not_turn_the_kit_itself_into_a_workspace(tmp_path, capsys):
    copy = tmp_path / "kit"
    (copy / "exercises").mkdir(parents=True)
    shutil.copy(KIT / "exercises" / "manifest.json", copy / "exercises" / "manifest.json")
    assert cli.main(["init", str(copy)]) == 2
    assert "holds the kit itself" in capsys.readouterr().err
    assert cli.main(["init", str(tmp_path / "new"), "--levels", "9"]) == 2
    assert "no level 9" in capsys.readouterr().err


def test_demo_in_a_workspace_says_the_solution_column_is_the_instructors(ws, monkeypatch, capsys):
    monkeypatch.chdir(ws)
    assert cli.main(["demo", "1"]) == 0
    out = capsys.readouterr().out
    assert "the solution column is your instructor's" in out
    assert "solution" not in out.split("Level 1:", 1)[1].split("\n")[3]  # the header row: starter only
    assert "Right: the solution" not in out, "the intro must not promise a column that is not shown"


def test_demo_of_one_level_ends_with_that_levels_next_steps(ws, monkeypatch, capsys):
    monkeypatch.chdir(ws)
    assert cli.main(["demo", "2"]) == 0
    tail = capsys.readouterr().out.rsplit("Your turn:", 1)[1]
    assert tail.startswith(" read exercises/level2/README.md, open exercises/level2/agent.py") and "check 2" in tail


def test_the_handout_is_the_same_workspace_zipped_and_the_same_each_time(tmp_path, monkeypatch):
    monkeypatch.delenv("CRASHCOURSE_ROOT", raising=False)
    first, second = tmp_path / "a" / "week1.zip", tmp_path / "b" / "week1.zip"
    for out in (first, second):
        assert cli.main(["handout", str(out), "--levels", "2"]) == 0
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as z:
        names = z.namelist()
        assert all(n.startswith("week1/") for n in names)
        assert "week1/exercises/level2/test_agent.py" in names and "week1/README.md" in names
        solutions = _solution_bytes()
        assert not [n for n in names if z.read(n) in solutions]
        assert not any("level1/" in n for n in names)


def test_by_default_no_level_goes_out_with_a_starter_or_notebook_that_holds_its_solution(tmp_path, monkeypatch,
                                                                                         capsys):
    """Level 3's starter holds level 2's fix and the notebook works it through: the default hand-out is
    levels 1 and 2 without the notebook; asking for 2 and 3 together is refused with the reason; level 3
    added later to the same workspace brings the notebook and says what it gives away."""
    monkeypatch.delenv("CRASHCOURSE_ROOT", raising=False)
    assert cli.main(["handout", str(tmp_path / "week1.zip")]) == 0
    said = capsys.readouterr().out
    with zipfile.ZipFile(tmp_path / "week1.zip") as z:
        names = z.namelist()
    assert any("exercises/level2/agent.py" in n for n in names) and any("exercises/level1/" in n for n in names)
    assert not any("/level3/" in n or "/notebooks/" in n for n in names), names
    assert "notebook" in said and "left out" in said and "Levels 3, 4, 5, 6 are not in it" in said
    assert cli.main(["handout", str(tmp_path / "both.zip"), "--levels", "2,3"]) == 2
    refused = capsys.readouterr().err
    assert "level 3's starter holds level 2's" in refused and "--allow-spoilers" in refused
    assert not (tmp_path / "both.zip").exists()
    target = tmp_path / "course"
    assert cli.main(["init", str(target), "--levels", "1,2"]) == 0
    assert not (target / "notebooks").exists()
    capsys.readouterr()
    assert cli.main(["init", str(target), "--levels", "3"]) == 0
    said = capsys.readouterr().out
    assert "level 3's starter gives away level 2's solution" in said and "it goes in" in said
    assert (target / "notebooks" / "02-checkpoints-walkthrough.ipynb").is_file()
    assert cli.main(["handout", str(tmp_path / "all.zip"), "--levels", "1-6", "--allow-spoilers"]) == 0
    said = capsys.readouterr().out
    for number, revealed in ((3, 2), (4, 1), (4, 2), (4, 3), (5, 2), (6, 2)):
        assert f"level {number}'s starter gives away level {revealed}'s solution" in said


def test_the_classroom_workflow_parses_and_its_steps_score_like_the_tests(ws):
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load((ws / ".github" / "workflows" / "classroom.yml").read_text())
    steps = flow["jobs"]["run-autograding-tests"]["steps"]
    graders = [s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-command-grader")]
    reporter = steps[-1]
    assert reporter["uses"].startswith("classroom-resources/autograding-grading-reporter")
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in graders]
    assert set(reporter["env"]) == {f"{s['id'].upper()}_RESULTS" for s in graders}
    kit = manifest.load(KIT)
    for number in (1, 2):
        # Every point a level's tests carry is in some step (level 1's written task has none).
        carried = sum(p for tests in workspace.task_tests(kit.level(number)).values() for _, p in tests)
        assert sum(s["with"]["max-score"] for s in graders if s["id"].startswith(f"level{number}_")) == carried
    # Every step run as the grader action runs it, from the workspace root, on the starter as handed
    # out: the points of the steps that pass are the points the level's own pytest prints.
    earned = 0.0
    for step in graders:
        if step["id"].startswith("level2_"):
            # `python` is the one the workflow's setup installed the kit into: here, this venv's.
            proc = subprocess.run(step["with"]["command"], shell=True, cwd=ws, capture_output=True, text=True,
                                  timeout=300, env=_env(PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                                                               os.environ.get("PATH", "")])))
            assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
            earned += step["with"]["max-score"] if proc.returncode == 0 else 0.0
    whole = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/level2"],
                           cwd=ws, capture_output=True, text=True, timeout=300, env=_env())
    assert f"crashcourse: {earned:g} of 10 points" in whole.stdout, (earned, whole.stdout[-1500:])


def test_the_workspace_installs_its_own_grader_where_nothing_is_published(ws, tmp_path):
    """The README's and the workflow's install line point at the grader's copy in the workspace, which
    installs without a package index holding crashcourse (its dependencies are this venv's here)."""
    flow = (ws / ".github" / "workflows" / "classroom.yml").read_text()
    assert 'pip install "./.crashcourse-kit"' in flow and 'pip install "./.crashcourse-kit"' in \
        (ws / "README.md").read_text()
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--target", str(target), "./.crashcourse-kit"], cwd=ws, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not list(target.rglob("solutions")) and (target / "grader" / "faces" / "plugin.py").is_file()
    check = subprocess.run([sys.executable, "-m", "grader", "--version"], cwd=ws, capture_output=True, text=True,
                           timeout=60, env=_env(PYTHONPATH=str(target)))
    assert check.returncode == 0 and check.stdout.startswith("crashcourse "), check.stderr


def _dockerfile_steps(text: str) -> tuple:
    """``(env, RUN lines, COPY pairs, CMD)`` of a Dockerfile's last stage."""
    env, runs, copies, cmd = {}, [], [], None
    lines = text.replace("\\\n", " ").splitlines()
    for line in lines:
        if line.startswith("FROM "):
            env, runs, copies, cmd = {}, [], [], None
        elif line.startswith("ENV "):
            key, _, value = line[4:].partition("=")
            env[key.strip()] = value.strip()
        elif line.startswith("RUN "):
            runs.append(line[4:].strip())
        elif line.startswith("COPY "):
            copies.append(line[5:].split())
        elif line.startswith("CMD "):
            cmd = json.loads(line[4:])
    return env, runs, copies, cmd


def _pl_student(tmp_path: Path, source: Path) -> Path:
    grade = tmp_path / "grade"
    (grade / "student").mkdir(parents=True)
    shutil.copy(source, grade / "student" / "agent.py")
    return grade


def test_the_written_image_installs_the_tools_and_its_steps_grade_outside_docker(tmp_path):
    """`crashcourse prairielearn-image DIR` writes a Dockerfile and the kit it copies in. Its steps
    are run here without Docker (CI cannot run it): the apt-get line must ask for bubblewrap and
    strace (the tools are on this machine already), the kit folder must install (into a folder of its
    own, without its dependencies, which this venv has), and the image's command must grade."""
    image = tmp_path / "image"
    made = subprocess.run([sys.executable, "-m", "grader", "prairielearn-image", str(image), "--level", "2"],
                          capture_output=True, text=True, timeout=120, env=_env())
    assert made.returncode == 0, made.stderr
    env, runs, copies, cmd = _dockerfile_steps((image / "Dockerfile").read_text())
    assert any("apt-get install" in r and "bubblewrap" in r and "strace" in r for r in runs), runs
    assert copies == [["kit", "/opt/crashcourse-kit"]] and (image / "kit" / "pyproject.toml").is_file()
    assert not list(image.rglob("solutions")), "the image carries no solutions"
    target = tmp_path / "site"
    for run in runs:
        if run.startswith("pip install"):
            pip = run.replace("/opt/crashcourse-kit", str(image / "kit")).split()[2:]
            done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                                   "--no-build-isolation", "--target", str(target), *pip], capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
    assert (target / "grader" / "kit" / "exercises" / "level2" / "test_agent.py").is_file()
    assert cmd == ["crashcourse", "prairielearn-run"] and env == {"CRASHCOURSE_LEVEL": "2"}
    grade = _pl_student(tmp_path, KIT / "exercises" / "level2" / "agent.py")
    # The installed copy, not this checkout: PYTHONPATH puts it first, and the kit's root is its own.
    proc = subprocess.run([sys.executable, "-m", "grader", *cmd[1:], "--timeout", "60"], cwd=tmp_path,
                          env=_env(**env, CRASHCOURSE_GRADE_ROOT=str(grade), PYTHONPATH=str(target)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((grade / "results" / "results.json").read_text())
    assert result["gradable"] is True and result["score"] == pytest.approx(0.3)  # 3 of 10, as check says
    assert {"name", "points", "max_points", "output"} <= set(result["tests"][0])


def test_the_repositorys_dockerfile_installs_the_tools_and_runs_the_same_command():
    env, runs, _, cmd = _dockerfile_steps((KIT / "Dockerfile").read_text())
    assert any("apt-get install" in r and "bubblewrap" in r and "strace" in r for r in runs), runs
    assert cmd == ["crashcourse", "prairielearn-run"] and env == {"CRASHCOURSE_LEVEL": "2"}


# With strace left on PATH, the kernel trace is taken: that case needs strace (tests/conftest.py: SYSTEM_MARKERS).
@pytest.mark.parametrize("hidden", [pytest.param(("bwrap",), marks=pytest.mark.strace), ("bwrap", "strace")])
def test_prairielearn_without_a_box_or_strace_still_writes_results_and_says_what_was_not_checked(
        tmp_path, path_without, hidden):
    """A slim image without bubblewrap (or strace) once ended in a NoBox traceback and no results.json.
    Now the same score, and the message says the grade is not tamper-proof and what went unchecked."""
    grade = _pl_student(tmp_path, KIT / "exercises" / "level2" / "agent.py")
    path = path_without(tmp_path / "bin", *hidden)
    proc = subprocess.run([sys.executable, "-m", "grader", "prairielearn-run", "--level", "2", "--timeout", "60"],
                          cwd=tmp_path, env=_env(CRASHCOURSE_GRADE_ROOT=str(grade), PATH=path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    result = json.loads((grade / "results" / "results.json").read_text())
    assert result["gradable"] is True and result["score"] == pytest.approx(0.3), result
    assert "NOT TAMPER-PROOF" in result["message"] and "PrairieLearn container" in result["message"]
    if "strace" in hidden:
        assert "NOT CHECKED" in result["message"] and "strace is not installed" in result["message"]
    else:
        assert "Kernel trace: each submission's file operations were checked" in result["message"]


def test_prairielearn_writes_results_even_when_the_grader_itself_fails(tmp_path):
    grade = _pl_student(tmp_path, KIT / "exercises" / "level2" / "agent.py")
    proc = subprocess.run([sys.executable, "-m", "grader", "prairielearn-run", "--level", "99"], cwd=tmp_path,
                          env=_env(CRASHCOURSE_GRADE_ROOT=str(grade)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    result = json.loads((grade / "results" / "results.json").read_text())
    assert result["gradable"] is False and "level 99 has no tests" in result["format_errors"][0]


def test_a_submission_that_could_not_be_run_costs_no_attempt_on_prairielearn():
    entry = {"id": "s", "score": 0.0, "max_score": 0.0, "status": "error", "tests": [],
             "error": "the submission has no agent.py"}
    result = prairielearn.prairielearn_result(entry)
    assert result["gradable"] is False and result["format_errors"] == ["the submission has no agent.py"]


# --- macOS and Windows: no POSIX-only import on the learner's path ----------------------------------

BLOCKER = textwrap.dedent("""
    # Makes POSIX-only modules unimportable for the kit's own code, as on Windows. Imports made by
    # the standard library or pytest (which have their own Windows paths) are let through.
    import importlib.abc, os, sys
    BLOCKED = {"fcntl", "resource", "termios", "tty", "pty", "grp", "pwd", "syslog", "crypt", "nis"}
    WATCHED = [p for p in os.environ["CRASHCOURSE_BLOCKED_FOR"].split(os.pathsep) if p]

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] not in BLOCKED:
                return None
            frame = sys._getframe(1)
            while frame and "importlib" in frame.f_code.co_filename:
                frame = frame.f_back
            where = frame.f_code.co_filename if frame else ""
            if any(where.startswith(p) for p in WATCHED):
                with open(os.environ["CRASHCOURSE_BLOCKED_LOG"], "a") as log:
                    log.write(f"{name} from {where}\\n")
                raise ImportError(f"No module named {name!r} (blocked: not on Windows)", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
""")


def test_the_learners_commands_import_nothing_posix_only(ws, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    log = tmp_path / "blocked.log"
    watched = [str(KIT / "grader"), str(ws)]
    env = _env(PYTHONPATH=os.pathsep.join([str(site), str(KIT)]), CRASHCOURSE_BLOCKED_LOG=str(log),
               CRASHCOURSE_BLOCKED_FOR=os.pathsep.join(watched), NO_COLOR="1")

    def run(*args, cwd=ws):
        return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)

    # The blocker works: the grading side of the kit does import POSIX-only modules.
    probe = run(sys.executable, "-c", "import grader.grading.sandbox")
    assert probe.returncode != 0 and "blocked" in probe.stderr
    log.unlink()
    # watch runs check once, and check runs `pytest exercises/level2` in a child process (same env).
    watch = run(sys.executable, "-m", "grader", "watch", "2", "--max-checks", "1", "--examples", "1")
    assert "task 1" in watch.stdout and "Traceback" not in watch.stdout + watch.stderr, watch.stdout + watch.stderr
    assert "checking exercises/level2/agent.py" in watch.stdout  # the workspace's file (else a whole path)
    hint = run(sys.executable, "-m", "grader", "hint", "2", "--task", "2")
    assert hint.returncode == 0 and "A question" in hint.stdout, hint.stdout + hint.stderr
    assert cli.main(["init", str(ws), "--levels", "3"]) == 0  # the notebook comes with level 3
    notebook = json.loads((ws / "notebooks" / "02-checkpoints-walkthrough.ipynb").read_text())
    imports = [line for cell in notebook["cells"] if cell["cell_type"] == "code"
               for line in "".join(cell["source"]).splitlines() if line.startswith(("import ", "from "))]
    assert any("checkpoint_loops" in line for line in imports)
    nb = run(sys.executable, "-c", "import sys; sys.path.insert(0, '.')\n" + "\n".join(imports), cwd=ws / "notebooks")
    assert nb.returncode == 0 or "IPython" in nb.stderr, nb.stderr[-2000:]
    # Only the instructor's side (grader/grading, which the CLI imports and, failing, replaces with
    # a message) may have tried; nothing a learner's command runs.
    tried = log.read_text().splitlines() if log.exists() else []
    assert not [t for t in tried if os.sep.join(["grader", "grading", ""]) not in t], tried
    # On Windows the instructor's commands say why they are missing instead of a traceback.
    grade = run(sys.executable, "-m", "grader", "grade", "x", "--level", "2")
    assert grade.returncode == 2 and "Linux or macOS" in grade.stderr


# --- the release files -----------------------------------------------------------------------------


@pytest.mark.wheel
def test_the_sdist_holds_exactly_what_a_release_needs_and_the_wheel_carries_the_kit(tmp_path):
    tracked = subprocess.run(["git", "ls-files"], cwd=KIT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout: the list of tracked files is what the sdist is held to")
    dist = Path(os.environ.get("CRASHCOURSE_DIST", "") or tmp_path)
    if not list(dist.glob("*.tar.gz")):  # .ci/run builds them once and says where
        pytest.importorskip("build")
        proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(KIT)],
                              capture_output=True, text=True, timeout=600, env=_env())
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "deprecated" not in proc.stdout + proc.stderr, "the build warns: " + (proc.stdout + proc.stderr)[-3000:]
    tmp_path = dist
    sdist = next(tmp_path.glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    release = ("grader/", "exercises/", "lessons/", "notebooks/", "solutions/")
    expected = {n for n in tracked.stdout.splitlines() if n.startswith(release)}
    expected |= {"README.md", "pyproject.toml", "setup.py", "MANIFEST.in", "PKG-INFO", "setup.cfg", "Dockerfile",
                 ".dockerignore"}
    members = {m for m in members if not m.startswith("crashcourse.egg-info/")}
    assert members == expected, (sorted(members - expected), sorted(expected - members))
    wheel = next(tmp_path.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    for rel in [n for n in expected if n.startswith(release[1:])]:
        assert f"grader/kit/{rel}" in names, rel
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


def test_the_kit_is_found_in_a_checkout_a_workspace_or_the_package(ws, tmp_path, monkeypatch):
    monkeypatch.delenv("CRASHCOURSE_ROOT", raising=False)
    assert manifest.find_root(ws / "exercises" / "level2") == ws.resolve()
    assert manifest.find_root(KIT / "grader") == KIT
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert manifest.find_root(outside) == manifest.package_root()
    monkeypatch.setattr(manifest, "SOURCE_CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setattr(manifest, "PACKAGED_KIT", ws)  # stands in for grader/kit inside a wheel
    assert manifest.package_root() == ws
    assert manifest.find_root(outside) == ws
    monkeypatch.setenv("CRASHCOURSE_ROOT", str(KIT))
    assert manifest.find_root(ws) == KIT == manifest.package_root()


def test_each_classroom_step_runs_pytest_on_exact_test_ids():
    # The workflow's commands are run by a shell on the runner: node ids are quoted, nothing else needs it.
    kit = manifest.load(KIT)
    for step in workspace.classroom_steps([kit.level(2)]):
        words = shlex.split(step.command)
        assert words[:3] == ["python", "-m", "pytest"] and all("::" in w for w in words if w.startswith("exer"))


def test_outside_a_workspace_the_learner_is_told_the_files_are_the_packages(monkeypatch, capsys):
    from grader.faces.student import common

    level = manifest.load(KIT).level(2)
    common.folder_for(level, None)
    assert "installed package" not in capsys.readouterr().err  # a checkout is the learner's own copy
    monkeypatch.setattr(manifest, "PACKAGED_KIT", KIT)  # as if KIT were grader/kit inside a wheel
    assert common.folder_for(level, None) == level.starter_dir
    assert "crashcourse init" in capsys.readouterr().err
