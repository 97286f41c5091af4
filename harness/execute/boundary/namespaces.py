"""New Linux namespaces for a worker: its own user, PID, mount, network, IPC and UTS namespaces, and a ``/proc``
that shows only its own PID namespace.

:func:`unshare_all` is called by the process that will become the worker's keeper: it moves itself into a new
user namespace (mapping its own uid and gid, so files keep their owners), and the other namespaces are made at
the same time. The PID namespace takes effect for the keeper's next child, the worker itself, which becomes its
namespace's init (pid 1): every process the candidate starts is a descendant of it, is killed with it, and can
see and name no process outside. The worker then calls :func:`private_proc` to mount a fresh ``/proc``, and
:func:`private_shm` to have a ``/dev/shm`` of its own.

Works unprivileged (an unprivileged user may create a user namespace, and in it the others) and as root (root's
new user namespace maps root to root; it keeps root's file ownership but, from the first call, no capability
outside it). Where a namespace cannot be made (a kernel or container that forbids user namespaces, or a seccomp
policy of its own), :func:`unshare_all` makes the ones it can and says which it could not.
"""

from __future__ import annotations

import os

from harness.execute.boundary import linux

ORDER = ("user", "pid", "mount", "net", "ipc", "uts")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def unshare_all(wanted: tuple[str, ...] = ORDER) -> tuple[tuple[str, ...], dict[str, str]]:
    """Leave this process's namespaces for new ones: ``wanted`` (names from :data:`ORDER`) all at once, or, if the
    kernel refuses that, the user namespace first and then each other one alone. Returns (the namespaces made,
    {namespace: why not} for the others). The caller must be single-threaded (the kernel refuses a new user
    namespace otherwise)."""
    uid, gid = os.geteuid(), os.getegid()
    flags = 0
    for name in wanted:
        flags |= linux.NAMESPACE_FLAGS[name]
    try:
        linux.unshare(flags)
        made = tuple(wanted)
        failed: dict[str, str] = {}
    except OSError as exc:
        made, failed = (), {}
        for name in wanted:  # one by one: the user namespace first, so the others need no privilege
            try:
                linux.unshare(linux.NAMESPACE_FLAGS[name])
                made += (name,)
            except OSError as one:
                failed[name] = one.strerror or str(one)
        if not made:
            failed = {name: exc.strerror or str(exc) for name in wanted}
    if "user" in made:
        try:
            _write("/proc/self/setgroups", "deny")  # required before an unprivileged gid_map; harmless as root
        except OSError:
            pass
        try:
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            failed["user"] = f"could not map uid {uid}/gid {gid}: {exc.strerror}"
    return made, failed


def private_proc() -> str:
    """In the new PID namespace's first process: mount a fresh ``/proc`` (this namespace's processes only) over
    the inherited one, in a mount namespace whose mounts no longer propagate back. Returns "" or why not (a
    container whose own ``/proc`` has masked entries refuses the mount; the PID namespace still hides every
    other process from the worker's system calls, only their ``/proc`` entries stay listed)."""
    try:
        linux.mount("none", "/", None, linux.MS_REC | linux.MS_PRIVATE)
        linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


SHM = "/dev/shm"
SHM_SIZE = "256m"
"""The private ``/dev/shm``'s size: POSIX semaphores and small shared buffers (``multiprocessing.Lock``, which
production libraries take at import, is a file there); bulk data belongs in the scratch folder."""


def private_shm(keep: list[str]) -> str:
    """In the worker's mount namespace: an empty tmpfs of its own over ``/dev/shm`` (the host's shared memory
    objects, other processes' semaphores and buffers, are out of sight and out of reach), with each folder of
    ``keep`` that lay under it (the scratch folder, when the run puts it there) bound back in place. Returns "" or
    why not."""
    inside = [p for p in keep if p == SHM or p.startswith(SHM + "/")]
    if SHM in inside:
        return "the scratch folder is /dev/shm itself"
    fds, mounted = [], False
    try:
        fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in inside]
        linux.mount("tmpfs", SHM, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, f"size={SHM_SIZE},mode=1777")
        mounted = True
        for path, fd in zip(inside, fds):
            os.makedirs(path, exist_ok=True)
            linux.mount(f"/proc/self/fd/{fd}", path, None, linux.MS_BIND | linux.MS_REC)
    except OSError as exc:
        if mounted:  # the host's /dev/shm (and the scratch folder in it) back as it was
            try:
                linux.umount(SHM)
            except OSError:
                pass
        return exc.strerror or str(exc)
    finally:
        for fd in fds:
            os.close(fd)
    return ""
