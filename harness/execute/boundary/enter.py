"""A worker's way across the boundary: what it does to itself, in order, before any candidate code exists.

::

    the worker's process (single-threaded)        new user, PID, mount, network, IPC, UTS namespaces
      fork ---------------------------------------> the confined worker: pid 1 of its PID namespace
      becomes the keeper (never returns):             dies with the keeper (parent-death signal)
        waits for the worker, mirrors its exit        fresh /proc (its own namespace only)
        kills it when the harness ends                resource limits, Landlock, seccomp,
                                                      no capabilities, no new privileges, not dumpable

The keeper stays outside the worker's PID namespace, out of the candidate's reach: it is the worker's lifeline
(the harness's end kills the worker, and with it the whole namespace), and its exit status is the worker's, so
the harness's handle on the process (``Popen`` or a forked child) behaves as before. Every process the
candidate starts lives in the worker's namespace and dies with it.

``settings["isolation"]``: ``strict`` (the default) and ``available`` both take every part this machine allows;
what could not be had is listed in the :class:`Confinement` the worker reports (strict runs refuse to start when
anything is missing, see :mod:`harness.execute.parent.isolation`); ``off`` applies the resource limits only (a
debugging aid, recorded as such).
"""

from __future__ import annotations

import dataclasses
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEVELS = ("strict", "available", "off")
PARTS = ("user namespace", "PID namespace", "mount namespace", "private /proc", "private /dev/shm",
         "network namespace", "IPC namespace", "seccomp", "no privileges", "landlock")
"""Every part of a full confinement, as :attr:`Confinement.missing` names them."""
_NS_PART = {"user": "user namespace", "pid": "PID namespace", "mount": "mount namespace", "net": "network namespace",
            "ipc": "IPC namespace"}


@dataclass(frozen=True, slots=True)
class Confinement:
    """What a worker applied to itself before its candidate (its report, made before any candidate code ran)."""

    namespaces: tuple[str, ...]
    """New namespaces it lives in (``user``, ``pid``, ``mount``, ``net``, ``ipc``, ``uts``)."""
    private_proc: bool
    """``/proc`` shows its own PID namespace only."""
    seccomp: str
    """The filter's description, or "" when none."""
    privileges_dropped: bool
    """No capabilities, no new privileges, not dumpable."""
    landlock: str
    """:func:`harness.execute.boundary.landlock.apply`'s description (``none: ...`` when not in force)."""
    missing: tuple[str, ...] = ()
    """Parts of :data:`PARTS` not in force, each with the reason (``"seccomp: no seccomp binding"``)."""
    level: str = "strict"

    def describe(self) -> str:
        """One line for the records' ``env.sandbox``."""
        if self.level == "off":
            return "none: isolation off (--isolation off)"
        ns = ",".join(self.namespaces) or "none"
        parts = [f"ns:{ns}" + ("+proc" if self.private_proc else ""), self.seccomp or "no seccomp",
                 "no privileges" if self.privileges_dropped else "privileges kept", self.landlock]
        return "; ".join(parts) + (f"; missing: {', '.join(self.missing)}" if self.missing else "")

    def to_dict(self) -> dict:
        return {"namespaces": list(self.namespaces), "private_proc": self.private_proc, "seccomp": self.seccomp,
                "privileges_dropped": self.privileges_dropped, "landlock": self.landlock,
                "missing": list(self.missing), "level": self.level}

    @classmethod
    def from_dict(cls, d: dict) -> "Confinement":
        return cls(tuple(str(x) for x in d["namespaces"]), bool(d["private_proc"]), str(d["seccomp"]),
                   bool(d["privileges_dropped"]), str(d["landlock"]), tuple(str(x) for x in d.get("missing", ())),
                   str(d.get("level", "strict")))


def enter(settings: dict, problem_paths: list[str], lifeline_pid: int | None = None) -> Confinement:
    """Confine this process (see the module docstring) and return, in the confined worker, what is in force. The
    calling process becomes the worker's keeper and never returns. Must be called single-threaded, before any
    candidate code and before anything that starts threads.

    ``lifeline_pid``: the process whose end ends the worker (the harness; default: this process's parent)."""
    from harness.execute.boundary import limits

    level = str(settings.get("isolation", "strict"))
    if level not in LEVELS:
        raise ValueError(f"isolation level {level!r}: expected one of {LEVELS}")
    if level == "off":
        from harness.execute.shared.lifeline import watch_parent

        limits.set_rlimits(settings)
        watch_parent(pid=lifeline_pid)  # no keeper: a thread of its own ends it with the harness
        return Confinement((), False, "", False, "none: isolation off", tuple(f"{p}: off" for p in PARTS), level)
    from harness.execute.boundary import namespaces, privileges

    missing: list[str] = []
    made, failed = namespaces.unshare_all()
    missing += [f"{_NS_PART[n]}: {why}" for n, why in failed.items() if n in _NS_PART]
    watch = lifeline_pid if lifeline_pid is not None else os.getppid()
    keeper_r, keeper_w = os.pipe()
    child = os.fork()
    if child:
        os.close(keeper_r)
        _keep(child, keeper_w, watch)  # never returns
    os.close(keeper_w)
    privileges.die_with_parent(keeper_r)
    private = False
    if "pid" in made and "mount" in made:
        why = namespaces.private_proc()
        private = not why
        if why:
            missing.append(f"private /proc: {why}")
    else:
        missing.append("private /proc: no PID or mount namespace")
    from harness.execute.boundary import seccomp

    try:
        binding = seccomp.binding()  # loaded before Landlock narrows what this process may read
    except seccomp.SeccompUnavailable as exc:
        binding, why_not = None, str(exc)
    limits.set_rlimits(settings)
    policy = _policy(problem_paths)
    if private:  # a mount namespace whose mounts do not propagate back (private_proc made it so)
        why = _private_shm(policy)
        if why:
            missing.append(f"private /dev/shm: {why}")
        else:
            policy = dataclasses.replace(policy, write_dirs=policy.write_dirs + (namespaces.SHM,))
    else:
        missing.append("private /dev/shm: no private mount namespace")
    from harness.execute.boundary.landlock import apply

    landlock = apply(policy)
    if landlock.startswith("none"):
        missing.append(f"landlock: {landlock[len('none: '):]}")
    filtered = ""
    if binding is not None:
        try:
            filtered = seccomp.install(binding)
        except seccomp.SeccompUnavailable as exc:
            why_not = str(exc)
    if not filtered:
        missing.append(f"seccomp: {why_not}")
    not_dropped = privileges.drop_all(dumpable=private)  # alone in its PID namespace: the parent reads its fds
    if not_dropped:
        missing.append(f"no privileges: {', '.join(not_dropped)}")
    return Confinement(tuple(made), private, filtered, not not_dropped, landlock, tuple(missing), level)


def _policy(problem_paths: list[str]) -> Any:
    """The Landlock policy over the working directory (the worker's scratch folder)."""
    from harness.execute.boundary.landlock import default_policy

    root = Path(__file__).resolve().parents[3]
    problems = [Path(p) for p in problem_paths]
    return default_policy(Path.cwd(), root, problems[0], more_problems=tuple(problems[1:]))


def _private_shm(policy: Any) -> str:
    """A ``/dev/shm`` of the worker's own (:func:`harness.execute.boundary.namespaces.private_shm`), writable, with
    the policy's writable folders under it bound back; "" or why not. Not where a folder the policy only lets it
    read lies under ``/dev/shm``: write access to ``/dev/shm`` would reach it."""
    from harness.execute.boundary import namespaces

    def writable(p: str) -> bool:
        return any(p == w or p.startswith(w.rstrip("/") + "/") for w in policy.write_dirs)

    under = [p for p in policy.read_dirs + policy.exec_dirs if p.startswith(namespaces.SHM + "/") and not writable(p)]
    if under:
        return f"{under[0]} is read-only to the worker and lies under /dev/shm"
    return namespaces.private_shm(list(policy.write_dirs))


def _keep(child: int, keeper_w: int, watch: int) -> None:
    """The keeper: hold the pipe the worker watches, end the worker when ``watch`` ends, and exit as the worker
    did (its code, or the signal that ended it). Keeps no other descriptor: the worker's pipes and output
    streams reach end of file when the worker ends, not when the keeper does."""
    import resource
    import select

    code = 1
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, keeper_w)
        os.closerange(keeper_w + 1, 1 << 16)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # mirroring a fatal signal must not leave a core file
        worker = os.pidfd_open(child)
        try:
            lifeline = os.pidfd_open(watch)
        except OSError:  # gone already, or not visible here: watch the parent by polling instead
            lifeline = None
        while True:
            fds = [worker] + ([lifeline] if lifeline is not None else [])
            ready, _, _ = select.select(fds, [], [], 1.0)
            if worker in ready:
                break
            if (lifeline is not None and lifeline in ready) or (lifeline is None and os.getppid() != watch):
                os.kill(child, signal.SIGKILL)  # the harness is gone: so is the worker's namespace
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            if -code not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(-code, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
            os.kill(os.getpid(), -code)
            code = 128 - code
    except BaseException:  # noqa: BLE001 - the keeper must never return into the worker's code
        code = 1
    os._exit(code if 0 <= code < 256 else 1)
