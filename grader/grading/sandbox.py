"""The bare sandbox: what isolates a submission's code under ``crashcourse grade --no-box``.

``crashcourse grade`` runs each worker in a bubblewrap box (:mod:`grader.grading.bubblewrap`). Where none
can start and the instructor passed ``--no-box``, this module's rlimits, session and (as root)
read-only mount view are all there is, and every report says the grades are not tamper-proof.
Its process sweep (:func:`kill_tree`) and :func:`tree_state` serve both.

What the bare sandbox is (Linux):

* a fresh temporary root ``S`` per submission, holding the copy of the student's folder, a home,
  a temp dir, and every scratch directory the tests create (the judge points ``tempfile`` there);
* the worker process (:mod:`grader.grading.worker`) started in its own session (``start_new_session``),
  with a scrubbed environment (``HOME`` and ``TMPDIR`` inside ``S``, no instructor variables, nothing
  that names the grader), resource limits (address space, CPU seconds, file size,
  processes, no core files) and ``PR_SET_PDEATHSIG`` so it dies with its judge;
* when running as root: its own mount namespace in which every mount is read-only except ``S``,
  then every capability dropped and ``no_new_privs`` set, so the code cannot write the
  instructor's folders, remount them, or read another process's memory. Where the namespace is
  not allowed (no ``CAP_SYS_ADMIN``), the box still runs, and :func:`tree_state` lets the caller
  check afterwards that the instructor's folders did not change;
* cleanup that finds every process the submission started, including one that made its own
  session (double fork + ``setsid``): the judge is a child subreaper (``PR_SET_CHILD_SUBREAPER``),
  so orphans land on it and are killed as its descendants; :func:`marked` also sweeps
  ``/proc/*/environ`` for the box's own HOME.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import signal
import time
from dataclasses import dataclass
from typing import Iterable, Optional

from grader.engine import fresh


USER_NAME = "learner"  # the name a box's uid goes by (its USER, LOGNAME and /etc/passwd entry)
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    return _libc


@dataclass
class Limits:
    """What one submission may use. Memory is address space, so a 6 GiB allocation fails cleanly."""

    memory: int = 2 * 1024 ** 3
    cpu_seconds: int = 120
    file_size: int = 64 * 1024 ** 2
    # The tracer's cap on its trace, which holds every byte the box writes anywhere, the worker's messages
    # to the judge among them (grader.grading.kernel_trace.FLOOD): the box's own processes keep file_size.
    trace: int = 4 * 64 * 1024 ** 2
    processes: int = 256
    output: int = 64 * 1024


def set_subreaper() -> bool:
    """Make this process adopt orphans of its descendants (a daemonised child cannot slip away)."""
    try:
        return libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> None:
    try:
        libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _mount_points() -> list[str]:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            points = [line.split()[4] for line in f if len(line.split()) > 4]
    except OSError:
        return []
    out = []
    for p in points:
        p = p.replace("\\040", " ")
        if p.startswith(("/proc", "/sys", "/dev")) and p not in ("/dev/shm",):
            continue
        out.append(p)
    return sorted(set(out), key=len)


def _root_processes() -> int:
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == os.getuid():
                    n += 1
            except OSError:
                pass
    return n


_read_only_works: Optional[bool] = None


def read_only_view_available() -> bool:
    """Whether a private mount namespace with read-only mounts can be made here (checked once)."""
    global _read_only_works
    if _read_only_works is None:
        if os.geteuid() != 0 or not os.path.exists("/proc/self/mountinfo"):
            _read_only_works = False
        else:
            import subprocess
            import sys
            probe = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=_make_preexec(Limits(), "/nonexistent",
                                                                                            _mount_points(), probe=True),
                                   capture_output=True, timeout=30)
            _read_only_works = probe.returncode == 0
    return _read_only_works


def _make_preexec(limits: Limits, writable: str, mounts: list[str], probe: bool = False, read_only: bool = True,
                  traced: bool = False,
                  hide: Iterable[str] = ()):
    root = os.geteuid() == 0
    hidden = [(p.encode(), os.path.isdir(p)) for p in hide if os.path.exists(p)]
    nproc = _root_processes() + limits.processes if root else limits.processes

    def preexec() -> None:
        c = libc()
        if c.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            pass
        if root and read_only:
            if c.unshare(CLONE_NEWNS) != 0:
                if probe:
                    os._exit(3)
            else:
                c.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
                if not probe:
                    w = writable.encode()
                    if c.mount(w, w, None, MS_BIND | MS_REC, None) != 0:
                        os._exit(97)
                # What the code must not read (the instructor's scenarios, the solutions, other
                # students' folders) is covered: an empty read-only tmpfs or /dev/null on top.
                for path, is_dir in hidden:
                    if is_dir:
                        c.mount(b"tmpfs", path, b"tmpfs", MS_RDONLY, b"size=4k,mode=0555")
                    else:
                        c.mount(b"/dev/null", path, None, MS_BIND, None)
                for point in mounts:
                    if point == writable:
                        continue
                    p = point.encode()
                    c.mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
                if probe:
                    # The root mount must have become read-only, or the view protects nothing.
                    try:
                        fd = os.open("/.crashcourse-probe", os.O_CREAT | os.O_WRONLY, 0o600)
                        os.close(fd)
                        os.unlink("/.crashcourse-probe")
                        os._exit(4)
                    except OSError:
                        pass
        if root:
            for cap in range(64):
                c.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        for kind, value in ((resource.RLIMIT_AS, limits.memory), (resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.trace if traced else limits.file_size),
                            (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, nproc)):
            try:
                resource.setrlimit(kind, (value, value))
            except (ValueError, OSError):
                pass

    return preexec


def preexec_for(limits: Limits, writable: str, read_only: Optional[bool] = None, hide: Iterable[str] = (),
                traced: bool = False):
    """The function ``subprocess.Popen(preexec_fn=...)`` runs in the child before it starts Python
    (``traced``: it starts strace, whose cap on one file is ``limits.trace``; see KernelTrace.wrap)."""
    if read_only is None:
        read_only = read_only_view_available()
    return _make_preexec(limits, os.path.realpath(writable), _mount_points() if read_only else [],
                         read_only=read_only, hide=[os.path.realpath(h) for h in hide if h], traced=traced)


_HOMES: dict = {}  # box token -> the HOME its processes were given (how the sweep knows them)


def scrubbed_env(root: str, token: str) -> dict:
    """The only environment a submission sees: no instructor variables, HOME and TMPDIR in its box.

    Nothing in it says "this is grading": the sweep (:func:`marked`) knows the box's processes by
    their HOME, a folder of the box's own, rather than by a variable of the grader's. No variable a
    learner's own pytest run would not have either (a fixed ``PYTHONHASHSEED``, say: hashing is
    randomised per process, as in any run), and a user name, so ``getpass.getuser()`` answers as on
    any machine (a bubblewrap box's ``/etc/passwd`` names its uid so, see
    :func:`grader.grading.bubblewrap.identity_files`).
    """
    home, tmp = os.path.join(root, "home"), os.path.join(root, "tmp")
    _HOMES[token] = home
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": tmp, "LANG": "C.UTF-8",
            "USER": USER_NAME, "LOGNAME": USER_NAME}


# -- finding and ending processes -------------------------------------------------------------------

def _ppid(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, theirs, ...), found through /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _ppid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def marked(token: str, home: Optional[str] = None) -> list[int]:
    """Processes whose environment still names this box's HOME (the sweep for anything that got away).

    ``home``: the box's HOME, for a caller other than the process that started the box.
    """
    home = home or _HOMES.get(token)
    if not home:
        return []
    needle = f"HOME={home}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    out.append(int(entry))
        except OSError:
            pass
    return out


def _kill(pids: Iterable[int]) -> int:
    n = 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            n += 1
        except (ProcessLookupError, PermissionError):
            pass
    return n


def reap() -> None:
    """Collect the exit status of any dead child (orphans adopted by a subreaper end up here)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(token: str, root_pid: Optional[int] = None, session: Optional[int] = None,
              keep: Iterable[int] = (), home: Optional[str] = None) -> int:
    """Kill the box's processes until none is left: its session, ``root_pid``'s descendants, the marked."""
    keep = set(keep) | {os.getpid()}
    servers = fresh.server_pids()
    killed = 0
    for attempt in range(50):
        targets = set(marked(token, home))
        if root_pid is not None:
            targets.update(descendants(root_pid))
        # This process's fork servers are the kit's, not the box's; each forks a new spare child at any
        # moment, so its children are looked for again on every pass.
        mine = set(servers) | {c for s in servers for c in descendants(s)}
        targets -= keep | mine
        if session is not None:
            try:
                os.killpg(session, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not targets:
            break
        killed += _kill(targets)
        time.sleep(0.005 * (attempt + 1))
        reap()
    reap()
    return killed


# -- what changed on disk ---------------------------------------------------------------------------

def tree_state(paths: Iterable[str], skip: Iterable[str] = ()) -> dict:
    """``{path: (size, mtime_ns, mode)}`` for everything under ``paths``, to compare before and after."""
    skip = tuple(os.path.realpath(s) for s in skip)
    out = {}
    for top in paths:
        top = os.path.realpath(top)
        if not os.path.exists(top):
            out[top] = None
            continue
        if os.path.isfile(top):
            st = os.stat(top)
            out[top] = (st.st_size, st.st_mtime_ns, st.st_mode)
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            if skip and dirpath.startswith(skip):
                dirnames[:] = []
                continue
            st = os.lstat(dirpath)
            out[dirpath] = (len(dirnames) + len(filenames), st.st_mtime_ns, st.st_mode)
            for name in filenames:
                p = os.path.join(dirpath, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                out[p] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def tree_changes(before: dict, after: dict) -> list[str]:
    changed = [p for p in after if before.get(p, "new") != after[p]]
    changed += [p for p in before if p not in after]
    return sorted(set(changed))
