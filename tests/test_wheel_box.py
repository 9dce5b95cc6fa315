"""Graded from the wheel: the box binds what grading needs, and the shipped course stays out of reach.

An installed wheel keeps the course (the level's tests, and in the instructor's wheel the
solutions) under ``grader/kit/`` inside the package, and the box binds the package. These tests
install the wheel (the one .ci/run builds, named by CRASHCOURSE_DIST, or one built here) into a
fresh virtual environment and grade, from an empty folder, the hostile corpus's ``reads_kit`` (a
working loop that first tries to read the kit's .git, its solutions and its tests: blocked, it
earns full marks; read, it raises ``ESCAPED``) and a few other attacks, as root and as nobody.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from grader.grading import bubblewrap

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus" / "hostile"


def _wheel(tmp_path_factory) -> Path:
    dist = os.environ.get("CRASHCOURSE_DIST")
    if dist and list(Path(dist).glob("*.whl")):
        return next(Path(dist).glob("*.whl"))
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k != "CRASHCOURSE_ROOT"}
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(KIT)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return next(out.glob("*.whl"))


def _install(wheel: Path, base: str, where: Path) -> tuple:
    """A fresh venv of ``base`` holding the wheel (unpacked into its site-packages, as pip would
    install it); the kit's dependencies come from this environment through a .pth file."""
    venv = where / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    (site / "crashcourse_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    found = _wheel(tmp_path_factory)
    with zipfile.ZipFile(found) as z:
        assert "grader/kit/solutions/level2/agent.py" in z.namelist(), "an instructor's wheel carries the solutions"
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    return _install(wheel, sys.executable, tmp_path_factory.mktemp("wheel"))


@pytest.fixture
def public_tmp():
    """A folder every user may walk (pytest's own temp folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="crashcourse-wheel-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _grade(python: Path, folder: Path, *args: str, user: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CRASHCOURSE_ROOT", "PYTHONPATH", "VIRTUAL_ENV")}
    argv = [str(python), "-m", "grader", "grade", str(folder / "subs"), "--level", "2", "--examples", "1",
            "--timeout", "20", "--jobs", "2", "--output", str(folder / "report.json"), *args]
    if user:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + argv
        env["HOME"] = str(folder)
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=folder, env=env)


# Attacks from the hostile corpus graded from the wheel too: id -> (status, score, words in the text)
ATTACKS = {
    "reads_kit": ("passed", 10.0, None),
    "tells_grading": ("passed", 10.0, None),
    "lays_out_outside": ("failed", None, None),  # refused by the kernel's account or by the layout
    "amplifies_reply": ("error", 0.0, "could not read"),
    "surrogate_message": ("failed", None, "disk full \ufffd?"),  # (one generated conversation: it may pass)
}


def _folder(tmp_path: Path, user: bool = False) -> Path:
    for name in ATTACKS:
        (tmp_path / "subs" / name).mkdir(parents=True)
        shutil.copy(CORPUS / f"{name}.py", tmp_path / "subs" / name / "agent.py")
    if user:
        for path in [tmp_path, *tmp_path.rglob("*")]:
            os.chown(path, 65534, 65534)
    return tmp_path


@pytest.mark.wheel  # builds the wheel, and grades from it in a box (tests/conftest.py)
@pytest.mark.bubblewrap
def test_the_wheel_keeps_the_course_inside_the_package_and_the_box_covers_it(installed, tmp_path):
    python, site = installed
    assert (site / "grader" / "kit" / "solutions" / "level2" / "agent.py").is_file()
    folder = _folder(tmp_path)
    proc = _grade(python, folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((folder / "report.json").read_text())
    assert report["isolation"] == "bubblewrap"
    _each_earns_its_due(report)


def _each_earns_its_due(report: dict) -> None:
    subs = {s["id"]: s for s in report["submissions"]}
    assert sorted(subs) == sorted(ATTACKS)
    for name, (status, score, words) in ATTACKS.items():
        got = subs[name]
        text = (got["error"] or "") + "\n".join(t["output"] for t in got["tests"])
        assert "ESCAPED" not in text, (name, text[:2000])
        assert got["status"] == status and score in (None, got["score"]), (name, got["score"], text[:2000])
        assert words is None or words in text, (name, text[:2000])
    assert not Path("/tmp/crashcourse-escaped.txt").exists()


@pytest.mark.wheel  # builds the wheel, and grades from it in a box (tests/conftest.py)
@pytest.mark.bubblewrap
def test_from_the_wheel_as_an_ordinary_user_too(wheel, public_tmp):
    """Graded as nobody (setpriv), from a venv of the system's Python that every user may run."""
    base = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or shutil.which("setpriv") is None or base is None:
        pytest.skip("needs root (to act as an ordinary user), setpriv and a system python3")
    same = subprocess.run([base, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    if same.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip(f"the system's Python is {same.stdout.strip()}, not this one: the kit's dependencies would not load")
    python, site = _install(wheel, base, public_tmp)
    folder = public_tmp / "grading"
    folder.mkdir()
    walk = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", str(python), "-c",
                           "import grader, pytest, hypothesis"], capture_output=True, text=True, cwd=folder)
    if walk.returncode != 0:
        pytest.skip(f"an ordinary user cannot run this venv's Python from here: {walk.stderr[-300:]}")
    _folder(folder, user=True)
    proc = _grade(python, folder, user=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _each_earns_its_due(json.loads((folder / "report.json").read_text()))


def test_a_box_covers_the_course_of_an_installed_package(monkeypatch, tmp_path):
    """The command line itself: grader/kit, where it exists beside the bound package, is an empty tmpfs."""
    (tmp_path / "grader" / "kit" / "solutions").mkdir(parents=True)
    monkeypatch.setattr(bubblewrap, "KIT_PARENT", str(tmp_path))
    args = bubblewrap.command("/tmp/some-box", ["true"], cwd="/", limits=bubblewrap.Limits())
    kit = str(tmp_path / "grader" / "kit")
    bind = args.index(str(tmp_path / "grader"))
    cover = [i for i, a in enumerate(args) if a == kit and args[i - 1] == "--tmpfs"]
    assert cover and cover[0] > bind, args
    assert args[cover[0] + 1:cover[0] + 3] == ["--remount-ro", kit]
