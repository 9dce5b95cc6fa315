"""Boxes from bubblewrap: where a submission's code runs under ``crashcourse grade``.

A box (one per worker process, see :class:`grader.grading.box.Worker`) is made by ``bwrap``:

* new user, pid, network, ipc, uts and cgroup namespaces; inside, the code runs as uid 1000 with
  no capabilities, cannot make further user namespaces, and is in a session of its own;
* an allowlist of read-only binds and nothing else: the Python installation the worker runs on
  (its prefix and, for a virtual environment, the base one), the ``grader`` package, the level's
  tests when a fault-injection check must run beside the code, and ``/usr`` with its usual links.
  The kit's ``.git``, ``solutions/``, ``tests/``, the instructor's home, other boxes, the reports
  and the submissions folder are simply not there;
* its own ``/proc`` (it sees only its own processes; ``/proc/sys`` hidden, since the code is the
  host's uid 0 without capabilities and the kernel lets uid 0 write machine-wide settings there),
  a minimal ``/dev``, a small private ``/tmp``;
* one writable path, the submission's root folder (its copy of the code, its home and temp
  folder, the scratch folders of the checks), at the same path as outside, so that the judge and
  the worker name files alike. The judge puts a size-capped tmpfs there when it may mount;
* a seccomp filter refusing symbolic links, FIFOs and ``io_uring``, so nothing in the writable
  folder can send the judge, which reads it from outside, to another file or make it wait;
* caps: address space, CPU seconds, file size and no core files (rlimits, which hold for root
  too), and, where cgroups can be written, a cgroup with a process count, a memory cap and one
  core's worth of CPU (the kernel never applies RLIMIT_NPROC to uid 0; it holds when an
  ordinary user grades);
* ``--die-with-parent``: when the judge stops the worker (or dies), the box's first process dies,
  and with it, at once, every process in its pid namespace.

:func:`check` runs a trivial box at start-up; when it fails, it says what to install or enable.
"""

from __future__ import annotations

import contextlib
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
    the judge's mount namespace, whatever happens to the judge. Returns False (and changes
    nothing) where this process may not mount.
    """
    c = sandbox.libc()
    if c.unshare(CLONE_NEWNS) != 0:
        return False
    if c.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    before = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        options = f"size={int(size)},mode=0700".encode()
        if c.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
            return False
        for name in os.listdir(before):
            source = f"/proc/self/fd/{before}/{name}"
            if os.path.isdir(source) and not os.path.islink(source):
                shutil.copytree(source, os.path.join(root, name), symlinks=True)
            else:
                shutil.copy2(source, os.path.join(root, name), follow_symlinks=False)
    finally:
        os.close(before)
    return True


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


def seccomp_program() -> Optional[bytes]:
    """A classic BPF program for ``bwrap --seccomp``: the calls above fail with EPERM, the rest run."""
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        return None
    refused = _REFUSED[machine]
    errno_eperm = 0x00050000 | errno.EPERM
    allow = 0x7FFF0000
    kill = 0x80000000  # SECCOMP_RET_KILL_PROCESS: a call from another ABI is not one the box needs

    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    prog = [op(ld_w_abs, 0, 0, 4), op(jeq_k, 1, 0, _AUDIT_ARCH[machine]), op(ret_k, 0, 0, kill),
            op(ld_w_abs, 0, 0, 0)]
    if machine == "x86_64":
        prog.append(op(jge_k, len(refused) + 1, 0, 0x40000000))  # the x32 numbers: refused too
    for i, nr in enumerate(refused):
        prog.append(op(jeq_k, len(refused) - i, 0, nr))
    prog += [op(ret_k, 0, 0, allow), op(ret_k, 0, 0, errno_eperm)]
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


def command(root: str, argv: list, *, cwd: str, limits: Limits, seccomp_fd: Optional[int] = None,
            also: tuple = ()) -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` in a box writable only at ``root``.

    ``also``: more folders bound read-only (the level's tests, when they must run beside the code).
    """
    args = [shutil.which("bwrap") or "bwrap",
            "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID), "--disable-userns",
            "--hostname", "crashcourse-box", "--die-with-parent", "--new-session",
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
    python = [p for p in _python_paths() if p != "/usr" and not p.startswith("/usr/")]
    args += [w for p in python for w in ("--ro-bind", p, p)]
    if any(KIT_PARENT.startswith(p + "/") for p in python):
        # The kit sits inside the Python installation (a kit unpacked in a conda environment, say):
        # cover it, or its solutions and .git would be bound with the installation.
        args += ["--tmpfs", KIT_PARENT] + [w for p in python if p.startswith(KIT_PARENT + "/")
                                            for w in ("--ro-bind", p, p)]
    for path in [os.path.join(KIT_PARENT, "grader")] + [str(p) for p in also]:
        args += ["--ro-bind", path, path]
    # The box's own root (a tmpfs bwrap makes, holding the mount points) is read-only once they are
    # made: the one writable folder, with its cap, and the small /tmp are all the code can write.
    args += ["--bind", root, root, "--remount-ro", "/", "--chdir", cwd]
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


def preexec(limits: Limits, cgroup: Optional[Cgroup]):
    """What runs in the child before ``bwrap``: the cgroup and the rlimits every process in the box inherits.

    RLIMIT_NPROC holds only for a uid other than 0 (an instructor grading as an ordinary user); it
    counts every process of that uid, so the cap is what runs now plus the box's share.
    """
    import resource
    import signal

    processes = limits.processes if cgroup is not None and "pids" in cgroup.kinds or os.getuid() == 0 \
        else _own_processes() + limits.processes

    def run() -> None:
        sandbox.libc().prctl(sandbox.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if cgroup is not None:
            cgroup.enter()
        for kind, value in ((resource.RLIMIT_AS, limits.memory), (resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.file_size), (resource.RLIMIT_CORE, 0),
                            (resource.RLIMIT_NPROC, processes)):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(kind, (value, value))

    return run


def cap_note() -> Optional[str]:
    """What the boxes lack here for want of a cgroup, in words (None when they have one)."""
    group = Cgroup(f"probe-{os.getpid()}", Limits())
    try:
        if "pids" in group.kinds:
            return None
    finally:
        group.remove()
    if os.getuid() != 0:
        return ("no cgroup could be made for the boxes (grading as an ordinary user): RLIMIT_NPROC caps "
                "their processes instead, counted together with your own")
    return ("no cgroup could be made for the boxes (/sys/fs/cgroup is not writable here): as root, nothing "
            "caps how many processes a box starts until its time is up (the kernel does not apply "
            "RLIMIT_NPROC to root), though every one of them ends with the box")


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


def start(box, argv: list, pass_fds: tuple, output_fd: int, env: dict, cwd: str, tests: bool = False,
          wrap=None):
    """Start ``argv`` in a new box for the judge's ``box``; returns ``(cgroup, Popen)``.

    ``tests``: the level's tests are bound read-only too (a fault-injection check runs beside the code).
    ``wrap``: ``wrap(command, cwd)`` returns the command that runs the whole box (bwrap included) under a
    tracer (:meth:`grader.grading.kernel_trace.KernelTrace.wrap`).
    """
    limits = box.limits if isinstance(box.limits, Limits) else Limits(**vars(box.limits))
    cgroup = Cgroup(box.token, limits)
    fd = seccomp_fd()
    fds = tuple(pass_fds) + ((fd,) if fd is not None else ())
    try:
        cmd = command(box.root, argv, cwd=cwd, limits=limits, seccomp_fd=fd, also=box.tests if tests else ())
        if wrap is not None:
            cmd = wrap(cmd, cwd)
        proc = subprocess.Popen(cmd, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=output_fd, stderr=output_fd,
                                env=env, cwd="/", start_new_session=True, preexec_fn=preexec(limits, cgroup))
    except BaseException:
        cgroup.remove()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return cgroup, proc
