"""Boxes from bubblewrap: where a submission's code runs under ``crashcourse grade``.

A box (one per worker process, see :class:`grader.grading.box.Worker`) is made by ``bwrap``:

* new user, pid, network, ipc, uts and cgroup namespaces; inside, the code runs as uid 1000 with
  no capabilities, cannot make further user namespaces, and is in a session of its own. Outside,
  when ``crashcourse grade`` runs as root, each box is a host uid of its own
  (:data:`BOX_UID_BASE` plus its judge's pid, see :func:`private_disk`), so the kernel applies
  RLIMIT_NPROC to it and no box can signal another or the judge; graded as an ordinary user, the
  box is that user's uid;
* an allowlist of read-only binds and nothing else: the Python installation the worker runs on
  (its prefix and, for a virtual environment, the base one), the ``grader`` package, and ``/usr``
  with its usual links (no level's tests: every check runs in the judge, outside). Installed from
  a wheel, the package holds the course under ``grader/kit`` (tests, and solutions in the
  instructor's wheel): an empty read-only folder covers it (:func:`hidden_kit`).
  The kit's ``.git``, ``solutions/``, ``tests/``, the instructor's home, other boxes, the reports
  and the submissions folder are simply not there. ``/etc/passwd`` and ``/etc/group`` are small
  files of the judge's naming the inside uid, as on a usual machine (:func:`identity_files`);
* its own ``/proc`` (it sees only its own processes; ``/proc/sys`` hidden, since where a box must
  run as the host's uid 0, the kernel lets that uid write machine-wide settings there),
  a minimal ``/dev``, a small private ``/tmp``;
* one writable path, the submission's root folder (its copy of the code, its home and temp
  folder, the scratch folders of the checks), at the same path as outside, so that the judge and
  the worker name files alike. The judge puts a size-capped tmpfs there when it may mount;
* a seccomp filter refusing symbolic links, FIFOs and ``io_uring``, so nothing in the writable
  folder can send the judge, which reads it from outside, to another file or make it wait;
* caps: address space, CPU seconds, file size, no core files and a process count (rlimits; the
  kernel never applies RLIMIT_NPROC to uid 0, which is why a box graded by root gets a uid of its
  own), and, where cgroups can be written, a cgroup with a process count, a memory cap and one
  core's worth of CPU;
* ``--die-with-parent``: when the judge stops the worker (or dies), the box's first process dies,
  and with it, at once, every process in its pid namespace.

:func:`check` runs a trivial box at start-up; when it fails, it says what to install or enable.
As root, :func:`own_uid_problem` then starts one as a uid of its own, the way a judge does; where
that fails (user namespaces off for ordinary users, no ``setpriv``), boxes run as root's uid and
:func:`cap_note` tells the batch's notes what is lost and what to change.

Why strace stays root while the box drops to its own uid: a tracer running as the box's uid would
be one more process of that uid, one the box could signal or trace if it ever named its pid; as
root it is out of reach by uid as well as by pid namespace, and it sees the drop (``setpriv``) and
everything after it, as it saw bwrap before.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import shutil
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from grader.grading import sandbox

KIT_PARENT = str(Path(__file__).resolve().parents[2])
INSIDE_UID = 1000
MAX_READ = 64 * 1024
PR_SET_DUMPABLE = 4
CLONE_NEWNS = 0x00020000
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_NOSUID, MS_NODEV = 2, 4
# A box that root grades runs as this uid plus its judge's pid: a uid of its own among the boxes
# running at once (pids are unique among live processes), with no passwd entry, far above the
# uids of people and services and above the range systemd-nspawn hands to containers.
BOX_UID_BASE = 1_900_000_000
# Where the process that starts a box, in a mount namespace of its own, binds the folders the box
# needs, so that the box's uid can reach them (a Python under /root is on no path that uid may walk):
# the first of these folders that holds none of the programs it runs next (see _stage_place).
STAGES = ("/run", "/tmp", "/mnt", "/var/tmp")
CAP_DAC_READ_SEARCH = 2


@dataclass
class Limits(sandbox.Limits):
    """What one box may use: :class:`grader.grading.sandbox.Limits` plus its disk and /tmp."""

    disk: int = 512 * 1024 ** 2
    tmp: int = 64 * 1024 ** 2
    processes: int = 128


# -- the judge's own protection ------------------------------------------------------------------------

def not_dumpable() -> bool:
    """No core dump, no ptrace by a same-uid process, no /proc/<pid>/environ for other users."""
    try:
        return sandbox.libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def private_disk(root: str, size: int) -> bool:
    """Give this process (a judge) its own mount namespace with a tmpfs of ``size`` bytes over ``root``.

    What was in ``root`` (the unpacked submission) is copied onto the tmpfs first. The tmpfs is
    the box's only writable place, so its size caps what the code can write; it disappears with
    the judge's mount namespace, whatever happens to the judge. Returns False where this process
    may not mount.

    Run as root, this also hands ``root`` to the uid this judge's boxes will run as
    (:func:`box_uid`), where one can (:func:`own_uid_problem`): the tmpfs (or, without one, every
    file already there) belongs to that uid, and from here on the judge creates files as that uid
    (its home and temp folders, pytest's folders, the crash states of levels 4 and 6), so the
    box can write them. The judge stays root in every other respect, out of the box's reach.
    """
    uid = box_uid() if os.geteuid() == 0 and own_uid_problem() is None else None
    mounted = _mount_private(root, size, uid)
    if uid is not None:
        if not mounted:
            _give(root, uid)
            if not _files_as(uid):
                raise OSError(errno.EPERM, "the judge could not take its box's uid for the files it makes")
        _OWN[os.path.realpath(root)] = uid
    return mounted


def _mount_private(root: str, size: int, uid: Optional[int]) -> bool:
    c = sandbox.libc()
    if c.unshare(CLONE_NEWNS) != 0:
        return False
    if c.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    before = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        options = f"size={int(size)},mode=0700" + (f",uid={uid},gid={uid}" if uid is not None else "")
        if c.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options.encode()) != 0:
            return False
        # Copied as the box's uid, so the copy is the box's own (the original stays root's).
        if uid is not None and not _files_as(uid):
            raise OSError(errno.EPERM, "the judge could not take its box's uid for the files it makes")
        for name in os.listdir(before):
            source = f"/proc/self/fd/{before}/{name}"
            if os.path.isdir(source) and not os.path.islink(source):
                shutil.copytree(source, os.path.join(root, name), symlinks=True)
            else:
                shutil.copy2(source, os.path.join(root, name), follow_symlinks=False)
    finally:
        os.close(before)
    return True


# -- a uid of its own for each box that root grades -----------------------------------------------------

_OWN: dict = {}  # box root -> the host uid its boxes run as (set by private_disk, in the judge)
_UID_CHECK: dict = {}


def box_uid() -> int:
    """The host uid of the boxes this judge starts: unique among the judges running at once."""
    return BOX_UID_BASE + os.getpid()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _raise_capability(cap: int) -> bool:
    """Put ``cap`` back in this thread's effective set (it must still be in the permitted set)."""
    c = sandbox.libc()
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    if c.capget(ctypes.byref(header), data) != 0:
        return False
    data[cap // 32].effective |= 1 << (cap % 32)
    return c.capset(ctypes.byref(header), data) == 0


def _files_as(uid: int) -> bool:
    """From now on this thread creates files as ``uid`` and writes only where ``uid`` may write.

    Only the file-system uid changes: signals, ptrace and mounting stay root's. The kernel drops
    the file capabilities with it; the one to read and search any folder is taken back, so the
    judge still imports the kit and reads the instructor's files wherever they are.
    """
    c = sandbox.libc()
    c.setfsgid(uid)
    c.setfsuid(uid)
    return c.setfsuid(-1) == uid and _raise_capability(CAP_DAC_READ_SEARCH)


@contextlib.contextmanager
def _as_root():
    """Root's file rights for a moment (a cgroup's files are root's), then the box's uid again."""
    c = sandbox.libc()
    uid = c.setfsuid(-1)
    if uid == 0:
        yield
        return
    c.setfsuid(0)  # back to 0: the kernel gives the file capabilities back
    c.setfsgid(0)
    try:
        yield
    finally:
        _files_as(uid)


def _give(root: str, uid: int) -> None:
    """Hand every file under ``root`` to ``uid`` (before any box runs there, so nothing can race it)."""
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, uid)
    os.lchown(root, uid, uid)


def own_uid_problem() -> Optional[str]:
    """None when a box that root grades can run as a uid of its own here; else why not (checked once)."""
    if "result" not in _UID_CHECK:
        _UID_CHECK["result"] = _own_uid_problem()
    return _UID_CHECK["result"]


# Settings that keep ordinary users (and so a box's uid) from making user namespaces: the setting,
# the value that does, whether it always does (AppArmor's may still let bwrap through a profile).
_USERNS_SWITCHES = (
    ("user/max_user_namespaces", "0", True, "user.max_user_namespaces=15000"),
    ("kernel/unprivileged_userns_clone", "0", True, "kernel.unprivileged_userns_clone=1"),
    ("kernel/apparmor_restrict_unprivileged_userns", "1", False, "kernel.apparmor_restrict_unprivileged_userns=0"),
)


def _switches_off() -> list:
    found = []
    for name, off, always, fix in _USERNS_SWITCHES:
        with contextlib.suppress(OSError):
            with open(f"/proc/sys/{name}", encoding="ascii") as f:
                if f.read().strip() == off:
                    found.append((f"{name.replace('/', '.')} is {off}", always, f"`sudo sysctl -w {fix}`"))
    return found


def _own_uid_problem() -> Optional[str]:
    if os.geteuid() != 0:
        return "only root can hand a box another uid; an ordinary user's boxes are that user's uid"
    if shutil.which("setpriv") is None:
        return ("setpriv, which starts each box as a uid of its own, is not installed (Debian and Ubuntu: "
                "`sudo apt-get install util-linux`)")
    switches = _switches_off()
    blocking = [s for s in switches if s[1]]
    if blocking:
        what, _, fix = blocking[0]
        return f"user namespaces are off for users other than root here ({what}); to turn them on: {fix}"
    problem = _probe_own_uid()
    if problem and switches:
        what, _, fix = switches[0]
        problem += f" ({what}; try {fix})"
    return problem


def _probe_own_uid() -> Optional[str]:
    """Start a trivial box the way a judge does, in a child process; None if it ran as its own uid."""
    import tempfile
    root = tempfile.mkdtemp(prefix="crashcourse-uidcheck-")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        said = b""
        try:
            os.close(r)
            _UID_CHECK["result"] = None  # this child is the probe: it takes the path it is testing
            private_disk(root, Limits().tmp)
            said = (_probe_box(root) or "").encode()
        except BaseException as exc:  # noqa: BLE001 - the probe reports, whatever happens
            said = f"{type(exc).__name__}: {exc}".encode()
        finally:
            with contextlib.suppress(OSError):
                os.write(w, said[:4000])
            os._exit(0)
    os.close(w)
    said = b""
    with os.fdopen(r, "rb") as f:
        said = f.read()
    os.waitpid(pid, 0)
    shutil.rmtree(root, ignore_errors=True)
    if not said:
        return None
    return "a box could not start as a uid of its own: " + said.decode("utf-8", "replace").strip()


def _probe_box(root: str) -> Optional[str]:
    uid = _OWN.get(os.path.realpath(root))
    if uid is None:
        return "the judge could not hand its folder to the box's uid"
    argv = [sys.executable, "-I", "-S", "-c", "import os; open('probe', 'w').write(str(os.getuid()))"]
    proc = _launch(root, argv, cwd=root, limits=Limits(), cgroup=None, env=sandbox.scrubbed_env(root, "check"),
                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = proc.communicate(timeout=60)
    probe = os.path.join(root, "probe")
    if proc.returncode != 0 or not os.path.isfile(probe):
        return f"exit status {proc.returncode}: " + out.decode("utf-8", "replace").strip()[-2000:]
    owner = os.lstat(probe).st_uid
    if owner != uid:
        return f"its file belongs to uid {owner}, not {uid}"
    return None


def read_box_file(root: str, relative: str, limit: int = MAX_READ) -> tuple[Optional[bytes], str]:
    """Read a file the box controls without following a link: ``(data, "")`` or ``(None, why not)``.

    Each folder on the way, from ``root`` (the judge's own), is opened with ``O_NOFOLLOW``, and the
    file must be a regular file of at most ``limit`` bytes.
    """
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None, f"{relative} is not a plain path inside the submission"
    fds = []
    try:
        fds.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1]))
        st = os.fstat(fds[-1])
        if not (st.st_mode & 0o170000 == 0o100000):
            return None, f"{relative} is not a regular file, so the grader did not read it"
        if st.st_size > limit:
            return None, f"{relative} holds {st.st_size} bytes; the grader reads at most {limit}"
        data = os.read(fds[-1], limit + 1)
        return data[:limit], ""
    except FileNotFoundError:
        return None, f"there is no {relative}"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, f"{relative} is a symbolic link, so the grader did not follow it"
        return None, f"{relative} could not be read ({exc.strerror})"
    finally:
        for fd in fds:
            os.close(fd)


# -- the seccomp filter ----------------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# symlink, symlinkat, mknod, mknodat, io_uring_setup (io_uring can make links without a syscall of its own)
_REFUSED = {"x86_64": (88, 266, 133, 259, 425), "aarch64": (36, 33, 425)}
# Calls that change a file with no call the kernel trace (or, without one, the recorder) can follow, each
# failed as a kernel or file system without it fails it: openat2 (ENOSYS, a kernel before 5.6), io_setup
# (ENOSYS, a kernel without native AIO), fallocate (EOPNOTSUPP, a file system without it: glibc's
# posix_fallocate then writes its zeros with pwrite). grader.grading.kernel_trace.ALSO_REFUSED, in the box.
# And seccomp() itself (ENOSYS): a filter of the code's own that hands a call to a thread of its own
# (SECCOMP_RET_USER_NOTIF outranks the tracer's SECCOMP_RET_TRACE) can let the call run with no tracer
# told. prctl(PR_SET_SECCOMP) still installs filters, but gives no such thread a call to let run.
_ANSWERED = {"x86_64": ((437, errno.ENOSYS), (206, errno.ENOSYS), (285, errno.EOPNOTSUPP), (317, errno.ENOSYS)),
             "aarch64": ((437, errno.ENOSYS), (0, errno.ENOSYS), (47, errno.EOPNOTSUPP), (277, errno.ENOSYS))}


_IOCTL = {"x86_64": 16, "aarch64": 29}
# FICLONE, FICLONERANGE, FIDEDUPERANGE: a file's contents changed by another's blocks, with no write to trace
_REFLINKS = (0x40049409, 0x4020940D, 0xC0189436)


def seccomp_program() -> Optional[bytes]:
    """A classic BPF program for ``bwrap --seccomp``: the calls above fail (with EPERM, or as _ANSWERED
    says), the rest run."""
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        return None
    refused = _REFUSED[machine]
    errno_eperm = 0x00050000 | errno.EPERM
    answered = _ANSWERED[machine]
    allow = 0x7FFF0000
    kill = 0x80000000  # SECCOMP_RET_KILL_PROCESS: a call from another ABI is not one the box needs

    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    prog = [op(ld_w_abs, 0, 0, 4), op(jeq_k, 1, 0, _AUDIT_ARCH[machine]), op(ret_k, 0, 0, kill),
            op(ld_w_abs, 0, 0, 0)]
    # ioctl's copies of one file's blocks into another (reflinks, on btrfs or XFS): EOPNOTSUPP, as on a file
    # system without them (tmpfs, ext4); the request is the call's second argument, its low word at 24.
    ioctl_nr, requests = _IOCTL[machine], _REFLINKS
    tail = [op(jeq_k, 0, len(requests) + 1, ioctl_nr), op(ld_w_abs, 0, 0, 24)]
    tail += [op(jeq_k, len(requests) - i, 0, r) for i, r in enumerate(requests)]
    tail += [op(ret_k, 0, 0, allow), op(ret_k, 0, 0, 0x00050000 | errno.EOPNOTSUPP)]
    if machine == "x86_64":  # the x32 numbers: refused too
        prog.append(op(jge_k, 2 * len(answered) + len(refused) + len(tail), 0, 0x40000000))
    for nr, err in answered:  # each: its own answer, or on to the next test
        prog += [op(jeq_k, 0, 1, nr), op(ret_k, 0, 0, 0x00050000 | err)]
    for i, nr in enumerate(refused):
        prog.append(op(jeq_k, len(refused) - 1 - i + len(tail), 0, nr))
    prog += tail + [op(ret_k, 0, 0, errno_eperm)]
    return b"".join(prog)


# -- cgroups ---------------------------------------------------------------------------------------------

class Cgroup:
    """A cgroup for one box with ``pids.max`` and a memory cap, where this machine lets us make one.

    cgroup v1 (one folder per controller) and v2 (one tree) are both tried; where neither can be
    written (no root, a read-only /sys/fs/cgroup), :attr:`folders` is empty and the rlimits and the
    pid namespace are what hold.
    """

    def __init__(self, token: str, limits: Limits):
        self.folders: list[str] = []
        self.kinds: list[str] = []
        if os.geteuid() != 0:
            return
        name = f"crashcourse-{token}"
        # One core at most: a box that starts a crowd of busy processes slows its own grading, and
        # leaves the other students' boxes the rest of the machine.
        for controller, settings in (("pids", {"pids.max": limits.processes}),
                                     ("memory", {"memory.limit_in_bytes": limits.memory}),
                                     ("cpu", {"cpu.cfs_period_us": 100000, "cpu.cfs_quota_us": 100000})):
            base = _v1_base(controller)
            if base and self._make(os.path.join(base, name), settings):
                self.kinds.append(controller)
        if not self.folders:
            base = _v2_base()
            if base and self._make(os.path.join(base, name), {"pids.max": limits.processes,
                                                              "memory.max": limits.memory}):
                self.kinds += ["pids", "memory"]
                with contextlib.suppress(OSError):
                    with open(os.path.join(self.folders[-1], "cpu.max"), "w") as f:
                        f.write("100000 100000")
                    self.kinds.append("cpu")

    def _make(self, folder: str, settings: dict) -> bool:
        with _as_root():
            try:
                os.mkdir(folder, 0o700)
            except OSError:
                return False
            try:
                for key, value in settings.items():
                    with open(os.path.join(folder, key), "w") as f:
                        f.write(str(value))
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
                return False
        self.folders.append(folder)
        return True

    def enter(self) -> None:
        """Move the calling process into the cgroup (run in the child, before bwrap starts)."""
        for folder in self.folders:
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write("0")

    def remove(self) -> None:
        if not self.folders:
            return
        with _as_root():
            for folder in self.folders:
                for attempt in range(40):
                    try:
                        os.rmdir(folder)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.005 * (attempt + 1))  # the box's last processes are still exiting
        self.folders = []


def sweep_cgroups(older_than: float = 60.0) -> list:
    """Remove the empty cgroups of boxes a killed batch left (``crashcourse-*``, at least ``older_than``
    seconds old: a box being started now has not entered its own yet). Returns what was removed."""
    if os.geteuid() != 0:
        return []
    bases = {b for b in [_v1_base(c) for c in ("pids", "memory", "cpu")] + [_v2_base()] if b}
    removed = []
    now = time.time()
    with _as_root():
        for base in bases:
            with contextlib.suppress(OSError):
                for name in os.listdir(base):
                    folder = os.path.join(base, name)
                    if not name.startswith("crashcourse-") or not os.path.isdir(folder):
                        continue
                    with contextlib.suppress(OSError):
                        with open(os.path.join(folder, "cgroup.procs"), encoding="ascii") as f:
                            busy = f.read().strip()
                        if not busy and now - os.stat(folder).st_mtime > older_than:
                            os.rmdir(folder)
                            removed.append(folder)
    return removed


def _own_cgroup(controller: str) -> Optional[str]:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                if controller in names.split(","):
                    return path
    except (OSError, ValueError):
        pass
    return None


def _v1_base(controller: str) -> Optional[str]:
    mount = f"/sys/fs/cgroup/{controller}"
    own = _own_cgroup(controller)
    if own is None or not os.path.isfile(os.path.join(mount, "cgroup.procs")):
        return None
    base = os.path.join(mount, own.lstrip("/"))
    return base if os.path.isdir(base) and os.access(base, os.W_OK) else None


def _v2_base() -> Optional[str]:
    if not os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
        return None
    own = _own_cgroup("")
    if own is None:
        return None
    base = os.path.join("/sys/fs/cgroup", own.lstrip("/"))
    try:
        with open(os.path.join(base, "cgroup.subtree_control"), encoding="utf-8") as f:
            enabled = f.read().split()
    except OSError:
        return None
    return base if {"pids", "memory"} <= set(enabled) else None


# -- the box -----------------------------------------------------------------------------------------------

def _python_paths() -> list[str]:
    """The folders the worker's Python needs: its prefixes and the site-packages it adds to its path."""
    import site
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    with contextlib.suppress(AttributeError):
        paths.update(site.getsitepackages())
    out = []
    for p in sorted(paths, key=len):
        if os.path.isdir(p) and not any(p == q or p.startswith(q + "/") for q in out):
            out.append(p)
    return out


def _bound(also: tuple = ()) -> list[str]:
    """The folders bound read-only from outside /usr: Python's, the kit's ``grader``, and ``also``."""
    python = [p for p in _python_paths() if p != "/usr" and not p.startswith("/usr/")]
    return python + [os.path.join(KIT_PARENT, "grader")] + [str(p) for p in also]


def _hostname() -> str:
    """The machine's own name: a box's name must not say that this run is a graded one."""
    import socket
    return socket.gethostname() or "localhost"


def hidden_kit() -> list[str]:
    """The folders of course material inside the package (``grader/kit`` of a wheel) that a box covers."""
    kit = os.path.join(KIT_PARENT, "grader", "kit")
    return [kit] if os.path.isdir(kit) else []


IDENTITY = "etc"  # the folder in a judge's root holding a box's /etc/passwd and /etc/group (covered in the box)


def identity_files(home: str) -> dict:
    """``/etc/passwd`` and ``/etc/group`` for a box, as a usual machine has them: the inside uid has an
    entry (``pwd.getpwuid(os.getuid())`` answers, with the box's HOME), beside root and nobody."""
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    name, uid = sandbox.USER_NAME, INSIDE_UID
    passwd = (f"root:x:0:0:root:/root:{shell}\n"
              "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
              "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
              f"{name}:x:{uid}:{uid}:{name},,,:{home}:{shell}\n")
    group = f"root:x:0:\ndaemon:x:1:\nusers:x:100:{name}\nnogroup:x:65534:\n{name}:x:{uid}:\n"
    return {"/etc/passwd": passwd.encode(), "/etc/group": group.encode()}


def write_identity(root: str, home: str) -> dict:
    """Write :func:`identity_files` into ``root``'s ``etc`` folder (the judge's; a box covers it) and return
    where each is to be bound from (a path relative to ``root``). Written once: every worker's box
    binds the same files, so none shows another."""
    folder = os.path.join(root, IDENTITY)
    os.makedirs(folder, exist_ok=True)
    out = {}
    for path, data in identity_files(home).items():
        name = os.path.join(folder, os.path.basename(path))
        try:
            with open(name, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            with open(name, "wb") as f:
                f.write(data)
            os.chmod(name, 0o644)
        out[path] = os.path.join(IDENTITY, os.path.basename(path))
    return out


def command(root: str, argv: list, *, cwd: str, limits: Limits, seccomp_fd: Optional[int] = None,
            also: tuple = (), uid: Optional[int] = None, staged: Optional[dict] = None,
            data: Optional[dict] = None) -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` in a box writable only at ``root``.

    ``also``: more folders bound read-only (none today: every check runs in the judge, outside).
    ``uid``: bwrap starts as this host uid (``setpriv`` drops root's to it first), and ``staged``
    says where each bound folder (and ``root``) can be reached from then on (see :func:`_launch`).
    ``data``: files bound read-only in the box from ``root`` (path in the box -> a path relative to
    ``root``, :func:`write_identity`); the folder they are in is covered.
    """
    staged = staged or {}
    args = ([shutil.which("setpriv") or "setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", "--"]
            if uid is not None else [])
    args += [shutil.which("bwrap") or "bwrap",
            "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID), "--disable-userns",
            "--hostname", _hostname(), "--die-with-parent", "--new-session",
            "--proc", "/proc",
            # The code runs as the host's uid 0 (without capabilities), and the kernel lets uid 0 write
            # many settings under /proc/sys that hold for the whole machine: they are hidden.
            "--tmpfs", "/proc/sys", "--remount-ro", "/proc/sys",
            "--dev", "/dev", "--remount-ro", "/dev", "--size", str(limits.tmp), "--tmpfs", "/tmp",
            "--ro-bind", "/usr", "/usr"]
    if os.path.isdir("/proc/pressure"):  # writing there sets up triggers in the host's kernel
        args += ["--tmpfs", "/proc/pressure", "--remount-ro", "/proc/pressure"]
    if os.path.exists("/proc/sysrq-trigger"):
        args += ["--ro-bind", "/dev/null", "/proc/sysrq-trigger"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ("/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    for path, relative in (data or {}).items():
        args += ["--ro-bind", os.path.join(staged.get(root, root), relative), path]
    python = [p for p in _python_paths() if p != "/usr" and not p.startswith("/usr/")]
    args += [w for p in python for w in ("--ro-bind", staged.get(p, p), p)]
    if any(KIT_PARENT.startswith(p + "/") for p in python):
        # The kit sits inside the Python installation (a kit unpacked in a conda environment, say):
        # cover it, or its solutions and .git would be bound with the installation.
        args += ["--tmpfs", KIT_PARENT] + [w for p in python if p.startswith(KIT_PARENT + "/")
                                            for w in ("--ro-bind", staged.get(p, p), p)]
    for path in [os.path.join(KIT_PARENT, "grader")] + [str(p) for p in also]:
        args += ["--ro-bind", staged.get(path, path), path]
    # Installed from a wheel, the package carries the course under grader/kit/: the level's tests and,
    # in the instructor's wheel, the solutions. The worker needs none of it: an empty folder covers it.
    for kit in hidden_kit():
        args += ["--tmpfs", kit, "--remount-ro", kit]
    # The box's own root (a tmpfs bwrap makes, holding the mount points) is read-only once they are
    # made: the one writable folder, with its cap, and the small /tmp are all the code can write.
    args += ["--bind", staged.get(root, root), root]
    for folder in sorted({os.path.dirname(relative) for relative in (data or {}).values()}):
        # The code cannot change its own passwd there for the next worker (nor see it twice).
        args += ["--tmpfs", os.path.join(root, folder), "--remount-ro", os.path.join(root, folder)]
    args += ["--remount-ro", "/", "--chdir", cwd]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args + ["--"] + list(argv)


def seccomp_fd() -> Optional[int]:
    """A pipe's read end holding the filter (bwrap reads it once and closes it)."""
    program = seccomp_program()
    if program is None:
        return None
    r, w = os.pipe()
    os.write(w, program)
    os.close(w)
    return r


def _own_processes() -> int:
    """How many processes this uid runs now (RLIMIT_NPROC counts them all, the box's among them)."""
    n, uid = 0, os.getuid()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                n += os.stat(f"/proc/{entry}").st_uid == uid
    return n


def preexec(limits: Limits, cgroup: Optional[Cgroup], uid: Optional[int] = None, stage: tuple = (),
            traced: bool = False):
    """What runs in the child before ``bwrap``: the cgroup and the rlimits every process in the box inherits.

    RLIMIT_NPROC holds only for a uid other than 0. A box with a ``uid`` of its own (root grading)
    is the only user of that uid, so the cap is the box's share; an ordinary user's box shares
    the count with every process of that user, so the cap is what runs now plus the box's share.
    ``stage``: ``(folder, name)`` pairs, each folder bound at ``name`` in a mount namespace of this
    child's own (see :func:`_mount_stage`). ``traced``: this child becomes strace, whose cap on one
    file (its trace) is ``limits.trace``; the box's own cap is set under it (KernelTrace.wrap).
    """
    import resource
    import signal

    processes = limits.processes if uid is not None or cgroup is not None and "pids" in cgroup.kinds \
        or os.getuid() == 0 else _own_processes() + limits.processes

    def run() -> None:
        if uid is not None:
            # The judge makes files as the box's uid; this child needs root's file rights back for
            # the cgroup and the mounts below (exec would restore them too, but too late for those).
            sandbox.libc().setfsuid(0)
            sandbox.libc().setfsgid(0)
        sandbox.libc().prctl(sandbox.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if cgroup is not None:
            cgroup.enter()
        for kind, value in ((resource.RLIMIT_AS, limits.memory), (resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.trace if traced else limits.file_size),
                            (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, processes)):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(kind, (value, value))
        if stage:
            _mount_stage(stage)

    return run


def _stage_place() -> str:
    """The folder the stage covers: one the programs that start the box (strace, setpriv, bwrap) are not in."""
    programs = [p for p in (shutil.which(n) for n in ("strace", "setpriv", "bwrap")) if p]
    programs += [os.path.realpath(p) for p in programs]
    for place in STAGES:
        if os.path.isdir(place) and not os.path.islink(place) and \
                not any(p.startswith(place + "/") for p in programs):
            return place
    return STAGES[1]


def _mount_stage(stage: tuple) -> None:
    """Bind each ``(folder, name)`` of ``stage`` at ``name``, in a tmpfs over the folder holding the names,
    in a mount namespace of this process.

    Each folder is opened by root before the tmpfs covers that place (it may be under it), and
    bound through that descriptor: the box's uid, which bwrap runs as, then reaches it by a path
    every uid may walk. Only this process and what it starts (strace, bwrap) see the stage, and it
    goes when they do.
    """
    c = sandbox.libc()
    place = os.path.dirname(stage[0][1])

    def check(result: int, what: str) -> None:
        if result != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    check(c.unshare(CLONE_NEWNS), "a mount namespace for the box's start")
    check(c.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making the mounts private")
    # Opened in this namespace: the kernel binds no mount of another one.
    fds = [(os.open(folder, os.O_PATH | os.O_CLOEXEC), name) for folder, name in stage]
    check(c.mount(b"tmpfs", place.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,uid=0,gid=0,size=65536"),
          f"a tmpfs on {place}")
    for fd, name in fds:
        os.mkdir(name, 0o755)
        check(c.mount(f"/proc/self/fd/{fd}".encode(), name.encode(), None, sandbox.MS_BIND | MS_REC, None),
              f"binding a folder at {name}")
        os.close(fd)


def _launch(root: str, argv: list, *, cwd: str, limits: Limits, cgroup: Optional[Cgroup], also: tuple = (),
            wrap=None, pass_fds: tuple = (), **popen) -> subprocess.Popen:
    """Start ``argv`` in a box writable only at ``root``; ``popen``: stdio and env for :class:`subprocess.Popen`.

    Where the judge handed ``root`` to a uid of its own (:func:`private_disk`), bwrap starts as that
    uid. strace, when ``wrap`` adds it, stays root: the box's uid can neither signal nor trace it,
    even if it could name its pid (it cannot: the tracer is outside the box's pid namespace).
    """
    uid = _OWN.get(os.path.realpath(root))
    staged: dict = {}
    if uid is not None:
        place = _stage_place()
        for path in _bound(also) + [root]:
            staged.setdefault(path, f"{place}/crashcourse-box-{len(staged)}")
    home = (popen.get("env") or {}).get("HOME")
    data = write_identity(root, home) if home else {}
    fd = seccomp_fd()
    try:
        cmd = command(root, argv, cwd=cwd, limits=limits, seccomp_fd=fd, also=also, uid=uid, staged=staged,
                      data=data)
        if wrap is not None:
            cmd = wrap(cmd, cwd)
        fds = tuple(pass_fds) + ((fd,) if fd is not None else ())
        return subprocess.Popen(cmd, pass_fds=fds, cwd="/", start_new_session=True,
                                preexec_fn=preexec(limits, cgroup, uid, tuple(staged.items()), traced=wrap is not None),
                                **popen)
    finally:
        if fd is not None:
            os.close(fd)


def cap_note() -> Optional[str]:
    """What the boxes lack here, in words, for a batch's notes (None when nothing: the process cap holds).

    As root, each box runs as a uid of its own, to which the kernel applies RLIMIT_NPROC; where that
    cannot be (:func:`own_uid_problem`), it says why, what to enable, and what is lost.
    """
    group = Cgroup(f"probe-{os.getpid()}", Limits())
    try:
        pids = "pids" in group.kinds
    finally:
        group.remove()
    if os.getuid() != 0:
        return None if pids else ("no cgroup could be made for the boxes (grading as an ordinary user): "
                                  "RLIMIT_NPROC caps their processes instead, counted together with your own")
    problem = own_uid_problem()
    if problem is None:
        return None
    if pids:
        return (f"the boxes run as root's uid outside, not each as a uid of its own ({problem}); a cgroup "
                "still caps their processes, and their pid namespaces keep them from signalling one another")
    return (f"the boxes run as root's uid outside, not each as a uid of its own ({problem}); and no cgroup "
            "could be made for them (/sys/fs/cgroup is not writable here). So nothing caps how many "
            "processes a box starts until its time is up (the kernel does not apply RLIMIT_NPROC to root), "
            "though every one of them ends with the box")


_CHECKED: dict = {}


def check() -> Optional[str]:
    """None if a box starts here; otherwise what to install or enable, in words (checked once)."""
    if "result" in _CHECKED:
        return _CHECKED["result"]
    _CHECKED["result"] = result = _check()
    return result


def _check() -> Optional[str]:
    if shutil.which("bwrap") is None:
        return ("bubblewrap (the `bwrap` command) is not installed. On Debian or Ubuntu: "
                "`sudo apt-get install bubblewrap`; on Fedora: `sudo dnf install bubblewrap`.")
    import tempfile
    root = tempfile.mkdtemp(prefix="crashcourse-boxcheck-")
    fd = seccomp_fd()
    try:
        limits = Limits()
        argv = [sys.executable, "-I", "-S", "-c", "import os; open('probe', 'w').write(str(os.getuid()))"]
        cmd = command(root, argv, cwd=root, limits=limits, seccomp_fd=fd)
        proc = subprocess.run(cmd, capture_output=True, timeout=60, pass_fds=(fd,) if fd is not None else (),
                              env=sandbox.scrubbed_env(root, "check"), preexec_fn=preexec(limits, None))
        said = proc.stderr.decode("utf-8", "replace").strip()
        if proc.returncode == 0:
            probe = os.path.join(root, "probe")
            if os.path.isfile(probe) and open(probe).read() == str(INSIDE_UID):
                return None
            return f"bubblewrap ran, but the box did not behave as expected (it could not write its folder). {said}"
        if "namespace" in said.lower() or "permission" in said.lower() or "uid map" in said.lower():
            return ("bubblewrap is installed but could not make a box here: " + said + ". It needs user "
                    "namespaces. On Debian: `sudo sysctl -w kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 "
                    "and later: `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; check that "
                    "`sysctl user.max_user_namespaces` is above 0. Inside Docker, the default seccomp profile "
                    "refuses new namespaces: run the container with `--security-opt seccomp=unconfined`.")
        return f"bubblewrap could not start a box here (exit status {proc.returncode}): {said}"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start a box here: {exc}"
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(root, ignore_errors=True)


def start(box, argv: list, pass_fds: tuple, output_fd: int, env: dict, cwd: str, wrap=None):
    """Start ``argv`` in a new box for the judge's ``box``; returns ``(cgroup, Popen)``.

    ``wrap``: ``wrap(command, cwd)`` returns the command that runs the whole box (bwrap included) under a
    tracer (:meth:`grader.grading.kernel_trace.KernelTrace.wrap`).
    """
    limits = box.limits if isinstance(box.limits, Limits) else Limits(**vars(box.limits))
    cgroup = Cgroup(box.token, limits)
    try:
        proc = _launch(box.root, argv, cwd=cwd, limits=limits, cgroup=cgroup, wrap=wrap, pass_fds=pass_fds, stdin=subprocess.DEVNULL, stdout=output_fd, stderr=output_fd,
                       env=env)
    except BaseException:
        cgroup.remove()
        raise
    return cgroup, proc
