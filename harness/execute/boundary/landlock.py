"""Landlock sandbox that the candidate worker applies to itself.

The worker (:mod:`harness.execute.worker.main`) calls :func:`apply` on itself
before it runs candidate code. From then on the kernel refuses that process,
and every process or thread it starts afterwards, whatever the policy does not
allow; nothing can lift the restriction, not even root (Landlock domains can
only be stacked tighter). Pure ``ctypes`` syscalls: no compiled helper, no
dependency, nothing done at import.

What is enforced (Landlock ABI in brackets)::

    files      [1+] open for reading/listing only under SandboxPolicy.read_dirs,
                    writing / creating / deleting / renaming only under
                    write_dirs (the scratch folder), execve only under
                    exec_dirs; device nodes only those in rw_files
                    (/dev/null, /dev/nvidia*, ...), and no mknod anywhere
                    (MAKE_CHAR / MAKE_BLOCK are never granted: as root a new
                    block-device node would read the disk under the policy).
               [2+] rename/link across folders (REFER) only inside scratch.
               [3+] truncate only inside scratch and on device nodes.
    network    [4+] no TCP bind and no TCP connect (unless allow_network).
    scoping    [6+] no signals to processes outside the sandbox (the runner,
                    the checker, the user's shell), no connection to abstract
                    unix sockets created outside it.
    always     ptrace of processes outside the sandbox is refused, and with
                    it /proc/PID/{mem,stack,syscall,cwd,root,fd/*} (Landlock's
                    ptrace rule, every ABI); mount/umount/pivot_root are
                    refused for sandboxed processes; no_new_privs is set, so
                    setuid programs gain nothing.

What is NOT enforced (be honest about it)::

    * stat()/access()/readlink(): metadata of any path (existence, size,
      mtime) stays visible; only opening is controlled.
    * /proc/PID/{environ,maps,cmdline,status} of other processes *when the
      worker runs as root*: since Linux 6.x the kernel lets a process with
      CAP_PERFMON read another process's memory map and environment without
      asking the LSMs (``may_access_mm``), so the runner's environment is
      readable by a root candidate. Run the harness as a non-root user (then
      Landlock refuses these reads too) or keep secrets out of the runner's
      environment. The worker's own environment is scrubbed by the runner.
    * file descriptors opened before apply() (the result channel, stdout,
      stderr, mmapped libraries) stay usable.
    * the process's own /proc/self/task/*/ files are writable (the CUDA
      driver needs .../comm, see PROC_SELF_TASK); as root that includes
      oom_score_adj, so a candidate can make the OOM killer prefer another
      process over itself.
    * ioctl on device files (IOCTL_DEV, ABI 5) is deliberately not handled:
      the CUDA driver talks to /dev/nvidiactl, /dev/nvidia0 and
      /dev/nvidia-uvm exclusively through ioctls, so handling the right would
      break every GPU job. Which devices can be opened is still restricted.
    * UDP, unix pathname sockets, raw sockets (if the process holds
      CAP_NET_RAW): Landlock up to ABI 7 has no rule for them.
    * CPU, memory, GPU memory, time: see the worker's rlimits
      (:mod:`harness.execute.boundary.limits`) and the parent's deadlines.
    * Threads that already exist when apply() runs, on kernels before ABI 8:
      ``landlock_restrict_self`` restricts the calling thread (and its future
      children) only. From ABI 8 on, ``LANDLOCK_RESTRICT_SELF_TSYNC`` restricts
      every thread of the process, and apply() uses it. Before that, a
      candidate with ``ctypes`` can in principle hijack an older, unconfined
      thread (same address space), so call apply() while the process is still
      single-threaded: in the worker, at the start of main(), before run()
      imports torch (which starts a thread). The policy needs only the spec's
      paths, and torch, Triton and the CUDA driver load fine afterwards.
      apply() counts the unconfined threads and says so in its description.
    * Nothing at all when Landlock is missing (kernel < 5.13, not compiled in,
      disabled at boot with ``lsm=``): apply() then returns ``"none: ..."``
      and the caller records it.

Why Landlock and not a container: it needs no privilege, no daemon and no
extra process, works inside unprivileged containers and CI runners, and
composes with the worker's existing rlimits and process group.

Size (about 520 lines): the Landlock system-call wrapper and the worker's policy belong
together (the policy is only meaningful for the ABI versions the wrapper handles).
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import platform
import pwd
import site
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Syscall numbers: Landlock arrived after the syscall tables were unified, so
# these are the same on every architecture listed here.
_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_RESTRICT_SELF_TSYNC = 1 << 3  # ABI 8: apply to every thread of the process

# enum landlock_access_fs (include/uapi/linux/landlock.h)
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5; never handled, see the module docstring
# enum landlock_access_net (ABI 4)
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
# scoped (ABI 6)
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

_FS_V1 = (1 << 13) - 1
"""Every filesystem right of ABI 1 (EXECUTE .. MAKE_SYM)."""
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
"""The only rights a rule on a single file (not a folder) may carry; the kernel answers EINVAL otherwise."""

_READ = FS_READ_FILE | FS_READ_DIR
_WRITE = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK
          | FS_MAKE_FIFO | FS_MAKE_SYM | FS_REFER | FS_TRUNCATE)
"""Write rights for the scratch tree: everything except MAKE_CHAR and MAKE_BLOCK (device nodes)."""
_RW_FILES = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE

_SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt")
"""System trees that are readable and executable (libraries, compilers, the dynamic loader)."""
_SYSTEM_READ_ONLY = ("/etc", "/proc", "/sys")
"""Configuration (ld.so.cache, locale, passwd for getpwuid) and the pseudo-filesystems torch and
the CUDA driver read (cpuinfo, meminfo, PCI topology, /proc/driver/nvidia)."""
_DEVICE_GLOBS = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                 "/dev/nvidia*", "/dev/nvidia-caps/*")
"""Device nodes a candidate may open. Not /dev as a whole: as root, read access to /dev/sda
would read every file on the disk, /dev/shm is shared with other processes, /dev/kmsg writes
the kernel log."""
PROC_SELF_TASK = "/proc/self/task"
"""Writable for the sandboxed process itself: the CUDA driver names its helper threads by writing
/proc/self/task/TID/comm, and cuInit fails with error 304 ("OS call failed or operation not
supported on this OS") when it cannot (seen on an H200, driver 580, Linux 6.18). The threads do
not exist yet when the policy is applied, so the rule is on the folder. It also makes the
process's own per-thread files writable (comm, attr, oom_score_adj: see the module docstring)."""
_PINNED: list[int] = []
"""O_PATH descriptors kept open for rules under /proc: procfs makes a new inode when a dropped
dentry is looked up again, and a Landlock rule is tied to the inode, so the dentry is pinned."""


class SandboxError(OSError):
    """Landlock is present but the policy could not be applied (a bug or a malformed policy)."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a sandboxed candidate process may touch. Everything else is refused.

    Paths are absolute; a path may name a single file instead of a folder (then
    only the file rights apply). Paths that do not exist when the policy is
    applied are skipped.
    """

    write_dirs: tuple[str, ...]
    """Trees in which files may be created, written, truncated, renamed and deleted (and read)."""
    read_dirs: tuple[str, ...]
    """Trees whose files may be opened for reading and whose folders may be listed."""
    exec_dirs: tuple[str, ...]
    """Trees from which programs may be started (gcc, ptxas, nvcc for JIT compiles; ld.so)."""
    rw_files: tuple[str, ...] = ()
    """Files, or trees of existing files, that may be opened for reading and writing but where nothing
    can be created, deleted or renamed: device nodes (/dev/null, /dev/nvidia*) and ``/proc/self/task``.
    A ``/proc/self/...`` path is resolved by the process that applies the policy."""
    allow_network: bool = False
    """False: TCP bind and connect are refused (Landlock ABI >= 4). UDP and unix sockets are not covered."""

    def to_dict(self) -> dict[str, Any]:
        return {"write_dirs": list(self.write_dirs), "read_dirs": list(self.read_dirs),
                "exec_dirs": list(self.exec_dirs), "rw_files": list(self.rw_files),
                "allow_network": self.allow_network}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SandboxPolicy:
        return cls(write_dirs=tuple(d["write_dirs"]), read_dirs=tuple(d["read_dirs"]), exec_dirs=tuple(d["exec_dirs"]),
                   rw_files=tuple(d.get("rw_files", ())), allow_network=bool(d.get("allow_network", False)))


# --------------------------------------------------------------------------- policy


def _real(p: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(p))))


def _is_within(p: Path, tree: Path) -> bool:
    return p == tree or tree in p.parents


def _carve(path: Path, protected: tuple[Path, ...], hidden: tuple[Path, ...], seen: set[Path], depth: int = 0) -> list[Path]:
    """``path``, or the parts of it that leave every protected tree out.

    Landlock can only allow, never deny below an allowed folder: granting
    ``/opt`` would also grant ``/opt/kernelgate/runs``. So a broad folder that
    contains a protected tree is replaced by its children, recursively, minus
    the branch leading to the protected tree. ``hidden`` trees are dropped
    with everything inside them; ``protected`` trees only when named exactly
    (the user's home: the Python installation may live inside it).
    """
    if path in seen or depth > 32:
        return []
    seen.add(path)
    if any(_is_within(path, h) for h in hidden) or path in protected:
        return []
    if not any(path in t.parents for t in protected + hidden):
        return [path]
    try:
        children = [_real(e.path) for e in os.scandir(path)]
    except OSError:
        return []
    out: list[Path] = []
    for child in children:
        out += _carve(child, protected, hidden, seen, depth + 1)
    return out


def _python_dirs(project_root: Path) -> tuple[list[Path], list[Path]]:
    """(the interpreter's own folders outside ``project_root``, those inside it).

    The interpreter's prefixes, its executable's folder, its site-packages and user site are its environment,
    wherever they live: a virtual environment inside the checkout (``python -m venv .venv``, the usual layout) is
    granted like one elsewhere. Other ``sys.path`` entries inside ``project_root`` are not (an editable install
    puts the checkout itself there; the worker gets ``harness/`` and its problems' folders on their own)."""
    env = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)]
    try:
        env += site.getsitepackages()
    except AttributeError:  # old virtualenv's site.py
        pass
    if site.ENABLE_USER_SITE:
        env.append(site.getusersitepackages())
    outside, inside = [], []
    for d in env:
        p = _real(d)
        if p == project_root or _is_within(project_root, p):
            continue  # never the checkout as a whole
        (inside if _is_within(p, project_root) else outside).append(p)
    for d in sys.path:  # "" is the working directory: the scratch folder in the worker
        p = _real(d) if d else None
        if p is not None and not _is_within(p, project_root):
            outside.append(p)
    return outside, inside


def _cuda_dirs() -> list[Path]:
    dirs = glob.glob("/usr/local/cuda*") + ["/usr/local/nvidia"]
    dirs += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    return [_real(d) for d in dirs]


def _home() -> Path | None:
    """The user's real home (the worker's $HOME points at its scratch folder)."""
    try:
        return _real(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None


def _dedupe(paths: list[Path]) -> tuple[str, ...]:
    """Existing paths, in order, without repeats and without paths already inside another one."""
    kept: list[Path] = []
    for p in paths:
        if p.exists() and not any(_is_within(p, k) for k in kept):
            kept = [k for k in kept if not _is_within(k, p)] + [p]
    return tuple(str(p) for p in kept)


def default_policy(scratch: Path, project_root: Path, problem_path: Path, extra_read: tuple = (),
                   more_problems: tuple = ()) -> SandboxPolicy:
    """The candidate worker's policy.

    * write (and read): ``scratch`` only -- it holds TMPDIR, the Triton /
      TileLang / XDG caches, $HOME and the output hand-off folder.
    * read + execute: the Python installation (prefixes, site-packages, and
      sys.path entries outside ``project_root``; a virtual environment inside
      ``project_root`` too), /usr, /lib*, /bin, /sbin,
      /opt, the CUDA toolkit (/usr/local/cuda*, $CUDA_HOME, $CUDA_PATH) and
      the driver folder /usr/local/nvidia.
    * read only: /etc, /proc, /sys, ``project_root/harness`` (the harness package),
      the problem file's folder (the file alone if that folder holds the project),
      the same for each of ``more_problems`` (a pre-started worker serves any
      problem of its run), ``extra_read``.
    * read + write, nothing created: /dev/null, /dev/zero, /dev/full,
      /dev/random, /dev/urandom, /dev/nvidia*, /dev/nvidia-caps/* (not
      /dev/shm, not disks), and the applying process's /proc/self/task.

    Never readable: ``project_root`` as a whole, but for the interpreter's own
    folders inside it (runs/, leaderboards/, result
    files, other submissions, the problems' reference data beyond this
    problem's folder), the user's home (beyond a Python installation inside
    it), /tmp, /var, /root, /home. A broad folder that contains one of these
    is split so that the protected part stays out (see :func:`_carve`).
    Paths that don't exist are left out. Raises ValueError when ``scratch``
    contains ``project_root`` (a scratch folder inside the project is fine).
    """
    scratch, project_root, problem_path = _real(scratch), _real(project_root), _real(problem_path)
    if _is_within(project_root, scratch):
        raise ValueError(f"the scratch folder {scratch} contains the project root {project_root}: the candidate "
                         "could read and rewrite results there; choose a scratch root outside the project")
    home = _home()
    protected = (home,) if home is not None and home != Path("/") else ()
    hidden = (project_root,)
    seen: set[Path] = set()

    def carve(paths: list[Path]) -> list[Path]:
        out: list[Path] = []
        for p in paths:
            out += _carve(p, protected, hidden, seen)
        return out

    python_outside, python_inside = _python_dirs(project_root)
    executable = carve([Path(p) for p in _SYSTEM_READ] + _cuda_dirs() + python_outside) + python_inside
    seen.clear()
    extra = carve([_real(p) for p in extra_read])
    seen.clear()
    system_ro = carve([Path(p) for p in _SYSTEM_READ_ONLY])
    def grant(path: Path) -> Path:  # the file's folder, or the file alone when that folder holds the project
        return path if _is_within(project_root, path.parent) else path.parent

    problems = [grant(problem_path)] + [grant(_real(Path(p))) for p in more_problems]
    read = executable + system_ro + extra + [project_root / "harness"] + problems
    devices = [_real(p) for g in _DEVICE_GLOBS for p in glob.glob(g)]
    devices = [p for p in devices if p.exists() and stat.S_ISCHR(p.stat().st_mode)]
    return SandboxPolicy(write_dirs=_dedupe([scratch]), read_dirs=_dedupe(read), exec_dirs=_dedupe(executable),
                         rw_files=_dedupe(devices + [Path(PROC_SELF_TASK)]))


# --------------------------------------------------------------------------- syscalls


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the UAPI header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _unavailable_reason() -> str | None:
    if sys.platform != "linux":
        return f"not Linux ({sys.platform})"
    if platform.machine() not in _SYSCALLS:
        return f"no Landlock syscall numbers known for {platform.machine()}"
    return None


def _probe() -> tuple[int, str]:
    """(ABI version, reason when 0)."""
    reason = _unavailable_reason()
    if reason:
        return 0, reason
    create, _, _ = _SYSCALLS[platform.machine()]
    libc = _libc()
    abi = libc.syscall(ctypes.c_long(create), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if abi < 0:
        err = ctypes.get_errno()
        if err == errno.ENOSYS:
            return 0, "ENOSYS: kernel without Landlock (needs Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK)"
        if err == errno.EOPNOTSUPP:
            return 0, "EOPNOTSUPP: Landlock is disabled at boot (add 'landlock' to the lsm= kernel parameter)"
        return 0, f"landlock_create_ruleset: {errno.errorcode.get(err, err)}"
    return int(abi), ""


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock cannot be used here."""
    return _probe()[0]


def _handled(abi: int, allow_network: bool) -> tuple[int, int, int, int]:
    """(handled fs rights, handled net rights, scoped, sizeof ruleset attr) for ``abi``.

    Older kernels reject rights they don't know (EINVAL) and attribute sizes
    that include fields they don't know (E2BIG), so both follow the ABI.
    """
    fs = _FS_V1
    if abi >= 2:
        fs |= FS_REFER
    if abi >= 3:
        fs |= FS_TRUNCATE
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not allow_network else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    return fs, net, scoped, size


def _rules(policy: SandboxPolicy) -> dict[str, int]:
    """path -> union of the rights the policy grants on it."""
    rules: dict[str, int] = {}
    for paths, rights in ((policy.read_dirs, _READ), (policy.exec_dirs, FS_EXECUTE | _READ),
                          (policy.write_dirs, _WRITE | _READ), (policy.rw_files, _RW_FILES)):
        for p in paths:
            rules[p] = rules.get(p, 0) | rights
    return rules


def _other_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task")) - 1
    except OSError:
        return 0


def apply(policy: SandboxPolicy) -> str:
    """Restrict this process (and all its future children) to ``policy``, irreversibly.

    Returns a short description for the results' environment record, e.g.
    ``"landlock-abi7 (fs, tcp, signal-scope, unix-scope; 1 earlier thread unconfined)"``.
    When Landlock cannot be used (not Linux, unknown architecture, ENOSYS,
    EOPNOTSUPP) nothing is changed and ``"none: landlock unavailable (<reason>)"``
    is returned: the caller decides whether running unsandboxed is acceptable.

    Raises :class:`SandboxError` when Landlock is there but a step fails (a
    malformed rule, a failed prctl): the process may be half-restricted and
    must not go on to run candidate code.
    """
    abi, reason = _probe()
    if abi <= 0:
        return f"none: landlock unavailable ({reason})"
    _, add_rule, restrict_self = _SYSCALLS[platform.machine()]
    libc = _libc()
    fs, net, scoped, size = _handled(abi, policy.allow_network)
    attr = _RulesetAttr(fs, net, scoped)
    create = _SYSCALLS[platform.machine()][0]
    ruleset_fd = libc.syscall(ctypes.c_long(create), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"landlock_create_ruleset(fs={fs:#x}, net={net:#x}, scoped={scoped:#x}, "
                                f"abi={abi}) failed: {os.strerror(err)}")
    try:
        for path, rights in _rules(policy).items():
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            pin = path.startswith("/proc/")
            try:
                allowed = rights & fs
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    allowed &= _FILE_RIGHTS
                if not allowed:
                    continue
                rule = _PathBeneathAttr(allowed, fd)
                rc = libc.syscall(ctypes.c_long(add_rule), ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_PATH_BENEATH),
                                  ctypes.byref(rule), ctypes.c_uint32(0))
                if rc < 0:
                    err = ctypes.get_errno()
                    raise SandboxError(err, f"landlock_add_rule({path!r}, rights={allowed:#x}) failed: {os.strerror(err)}")
            finally:
                if pin:
                    _PINNED.append(fd)
                else:
                    os.close(fd)
        if libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) != 0:
            err = ctypes.get_errno()
            raise SandboxError(err, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(err)}")
        flags = _RESTRICT_SELF_TSYNC if abi >= 8 else 0
        unconfined = 0 if flags else _other_threads()
        if libc.syscall(ctypes.c_long(restrict_self), ctypes.c_int(ruleset_fd), ctypes.c_uint32(flags)) < 0:
            err = ctypes.get_errno()
            raise SandboxError(err, f"landlock_restrict_self failed: {os.strerror(err)}")
    finally:
        os.close(ruleset_fd)
    parts = ["fs"] + (["tcp"] if net else []) + (["signal-scope", "unix-scope"] if scoped else [])
    note = f"; {unconfined} earlier thread{'s' if unconfined != 1 else ''} unconfined" if unconfined else ""
    return f"landlock-abi{abi} ({', '.join(parts)}{note})"
