"""The worker's seccomp filter, built with libseccomp (through its ``pyseccomp`` binding).

The PID namespace already keeps a worker from naming any process outside its own tree; the filter is the second
wall, and closes the calls that would leave the namespaces or reach the kernel's shared state. Everything not
listed is allowed (honest kernels need the ordinary system: threads, files, memory, the GPU driver's ioctls).

    refused (EPERM)     ptrace, process_vm_readv/writev, kcmp, pidfd_open/getfd/send_signal: another
                        process's memory, descriptors or signals
                        prlimit64, setpriority, sched_setscheduler/setparam/setattr on any process but the
                        caller itself (pid or who 0): re-limiting or re-scheduling others
                        unshare, setns, mount family, pivot_root, chroot; clone with a namespace flag: leaving
                        or remaking the namespaces
                        bpf, perf_event_open, userfaultfd, io_uring_*, keyctl/add_key/request_key,
                        kexec_*, *_module, acct, swapon/off, reboot, syslog, quotactl, open_by_handle_at,
                        name_to_handle_at, iopl/ioperm: the kernel's shared state and known escape routes
    refused (ENOENT)    connect: unix sockets bound to paths on the host (a container runtime's API, Ray's
                        raylet, D-Bus) are reachable through the worker's view of the file tree, and neither
                        the network namespace nor Landlock up to ABI 7 rules connect(); every connect answers
                        as if no such socket existed, which is what the CUDA driver meets on a machine without
                        an MPS server (it makes a unix socket at start and refuses to run when socket() fails)
    refused (EPERM)     sendto with an address, sendmsg, sendmmsg: a datagram needs no connect (the host's
                        /dev/log, journald); send on a connected pair (socketpair) stays
                        fcntl(F_SETSIG, SIGCONT), clone with SIGCONT as its exit signal: ways to have the
                        kernel deliver SIGCONT to a stopped worker (a lease break, I/O readiness, a child's
                        end) while the checker reads its outputs (the parent also sees any thread that ran then:
                        :meth:`harness.execute.parent.freeze.Frozen.ran`)
    clone3 (ENOSYS)     its flags lie in a structure a filter cannot read; C libraries then fall back to clone,
                        whose flags the filter does read

Not covered: ``sched_setaffinity`` is left alone (thread pools pin their own threads by thread id, which the
filter cannot tell from another process's pid; the PID namespace limits it to the worker's tree), and signals
(the PID namespace limits them to the worker's tree).
"""

from __future__ import annotations

import errno
from typing import Any

REFUSED = ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
           "pidfd_send_signal", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount",
           "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "perf_event_open",
           "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
           "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "acct",
           "swapon", "swapoff", "reboot", "syslog", "quotactl", "open_by_handle_at", "name_to_handle_at", "iopl",
           "ioperm", "lookup_dcookie", "vhangup", "uselib")
"""Refused outright (EPERM)."""
SELF_ONLY = (("prlimit64", 0), ("setpriority", 1), ("sched_setscheduler", 0), ("sched_setparam", 0),
             ("sched_setattr", 0))
"""(call, argument index of the target): refused unless the target is 0, the caller itself."""
NAMESPACE_CLONE_FLAGS = 0x7E020000
"""CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET."""
F_SETSIG, SIGCONT, CSIGNAL = 10, 18, 0xFF
INT_MASK = 0xFFFFFFFF
"""The bits of a C ``int`` argument (the kernel truncates the 64-bit register; a filter that compares all 64 bits is
passed by setting the upper ones). The self-only targets need no mask: any nonzero register is refused."""


class SeccompUnavailable(RuntimeError):
    """libseccomp (or its Python binding) is not on this machine, or the kernel has no seccomp filters."""


def binding() -> Any:
    """The libseccomp binding, loaded now (before Landlock narrows what this process may read); raises
    :class:`SeccompUnavailable`."""
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:  # the binding loads libseccomp.so.2 at import
        raise SeccompUnavailable(f"no seccomp binding ({type(exc).__name__}: {exc}); install the 'pyseccomp' "
                                 "package and the system's libseccomp2") from None
    return pyseccomp


def rules(sc: Any) -> list[tuple[str, Any, str, tuple]]:
    """The filter's rules as ``(group, action, call, argument tests)``; ``sc``: :func:`binding`'s result. The group
    names the wall a rule belongs to (``tools/device/seccomp_cuda.py`` installs them one group at a time to find
    which one a driver trips over)."""
    refused = sc.ERRNO(errno.EPERM)
    out: list[tuple[str, Any, str, tuple]] = [("refused", refused, name, ()) for name in REFUSED]
    out += [("self_only", refused, name, (sc.Arg(arg, sc.NE, 0),)) for name, arg in SELF_ONLY]
    out += [("clone_ns", refused, "clone", (sc.Arg(0, sc.MASKED_EQ, bit, bit),))  # clone(flags, ...) with the flag
            for bit in (1 << i for i in range(32) if NAMESPACE_CLONE_FLAGS >> i & 1)]
    out.append(("clone3", sc.ERRNO(errno.ENOSYS), "clone3", ()))
    out.append(("reach", sc.ERRNO(errno.ENOENT), "connect", ()))
    out += [("reach", refused, "sendto", (sc.Arg(4, sc.NE, 0),)), ("reach", refused, "sendmsg", ()),
            ("reach", refused, "sendmmsg", ())]
    # int arguments are compared on their low 32 bits, as the kernel reads them: F_SETSIG's 0x10000000a is
    # F_SETSIG to fcntl() but not equal to 10 in the 64-bit register the filter sees
    out.append(("sigcont", refused, "fcntl", (sc.Arg(1, sc.MASKED_EQ, INT_MASK, F_SETSIG),
                                              sc.Arg(2, sc.MASKED_EQ, INT_MASK, SIGCONT))))
    out.append(("sigcont", refused, "clone", (sc.Arg(0, sc.MASKED_EQ, CSIGNAL, SIGCONT),)))
    return out


def install(sc: Any = None, groups: tuple[str, ...] | None = None) -> str:
    """Load the filter on the calling process (every thread, and every process it starts later, inherits it;
    nothing removes it); ``sc``: :func:`binding`'s result; ``groups``: only the rules of these groups (a
    diagnosis; None: all). Returns a short description; raises :class:`SeccompUnavailable` when it cannot."""
    sc = sc if sc is not None else binding()
    try:
        f = sc.SyscallFilter(sc.ALLOW)
    except Exception as exc:  # noqa: BLE001 - the binding's own error types vary by version
        raise SeccompUnavailable(f"libseccomp could not make a filter: {exc}") from None
    try:
        f.set_attr(sc.Attr.CTL_TSYNC, 1)  # every thread of the process, not only the caller
    except Exception:  # noqa: BLE001 - an old libseccomp: the caller is single-threaded here anyway
        pass
    added, skipped = set(), set()
    for group, action, name, args in rules(sc):
        if groups is not None and group not in groups:
            continue
        try:
            f.add_rule(action, name, *args)
            added.add(name)
        except Exception:  # noqa: BLE001 - a call this architecture or libseccomp does not know
            skipped.add(name)
    try:
        f.load()
    except Exception as exc:  # noqa: BLE001
        raise SeccompUnavailable(f"the kernel refused the seccomp filter: {exc}") from None
    return f"seccomp ({len(added)} calls filtered)"
