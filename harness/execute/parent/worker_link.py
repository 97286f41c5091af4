"""The parent's side of one worker: its channel, the stop around every read, and its confinement as seen from
outside. A part of :class:`harness.execute.parent.session.Session` (a mixin: it reads the session's state).

* the channel: every read has a deadline (:class:`WorkerTimeout`), end of file is :class:`WorkerDied`, every
  message is decoded strictly (:mod:`harness.execute.wire.codec`); writes have a deadline too;
* :meth:`WorkerLink._frozen`: the worker's whole tree stopped while the checker reads what it committed, with
  the checks that nothing of it ran meanwhile (:class:`Unstoppable`) and that its channel is still the parent's
  pipes and only the worker's (:class:`ChannelTampered`);
* :meth:`WorkerLink._confined`: the worker's report of its confinement, checked against what the kernel shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any, Iterator

from harness.execute.parent import confinement, freeze
from harness.execute.parent import correctness_plan as plan
from harness.execute.wire import protocol as P
from harness.execute.wire.channel import ChannelClosed, ChannelTimeout
from harness.execute.shared.inputs import round_seed
from harness.records import Status


class WorkerTimeout(Exception):
    pass


class WorkerDied(Exception):
    pass


class Unstoppable(Exception):
    """The worker's process tree could not be stopped for a read (:class:`harness.execute.parent.freeze.FreezeError`),
    or ran while it was stopped (:meth:`harness.execute.parent.freeze.Frozen.ran`)."""


class ChannelTampered(Exception):
    """The worker's channel is not the parent's pipes any more, or another descriptor of its tree is open on them
    (:func:`harness.execute.parent.confinement.channel_tampering`): a relay between the worker and the parent."""



class WorkerLink:
    """The session's link to its worker (see the module docstring)."""

    # ------------------------------------------------------------------ channel
    def _recv(self, timeout_s: float, what: str, *expect: type) -> Any:
        """The worker's next message, decoded strictly; nothing complete within ``timeout_s`` is :class:`WorkerTimeout`
        (a half message included), end of file :class:`WorkerDied`, junk or an oversized line ChannelError."""
        try:
            raw = self.chan.recv(timeout_s)
        except ChannelTimeout as exc:
            half = f" ({exc.partial} bytes of an unfinished message)" if exc.partial else ""
            raise WorkerTimeout(f"no progress for {timeout_s:.0f} s while {what}{half}") from None
        except ChannelClosed as exc:
            raise WorkerDied(f"channel closed while {what} ({exc})") from None
        return P.decode(raw, expect or P.WORKER_TO_PARENT)

    def _send(self, msg: Any) -> None:
        try:
            self.chan.send(P.encode(msg), timeout_s=self.o.round_timeout_s)
        except ChannelTimeout as exc:
            raise WorkerTimeout(f"the worker did not read its commands ({exc})") from None

    @contextlib.contextmanager
    def _frozen(self) -> Iterator[None]:
        """The worker's whole process tree stopped while the block runs (the checker reads what it committed);
        :class:`WorkerDied` when it is gone, :class:`Unstoppable` when it cannot be stopped."""
        pid = self.worker.confined_pid()
        if pid is None:
            raise WorkerDied("the worker is gone")
        t0 = time.monotonic()
        try:
            stopped = freeze.freeze(pid)
        except ProcessLookupError:
            raise WorkerDied("the worker is gone") from None
        except freeze.FreezeError as exc:
            raise Unstoppable(str(exc)) from None
        self._add("*", "freeze_s", time.monotonic() - t0)
        try:
            if self._channel:
                wrong = confinement.channel_tampering(pid, list(stopped), self._channel)
                if wrong:
                    raise ChannelTampered(f"the worker's channel was tampered with: {'; '.join(wrong[:4])}")
            yield
            woke = stopped.ran()
            if woke:  # something the tree armed before it was stopped woke it while its outputs were read
                raise Unstoppable(f"the worker's process tree ran while it was stopped for a read: "
                                   f"{'; '.join(woke[:4])}")
        finally:
            t1 = time.monotonic()
            freeze.thaw(stopped)
            self._add("*", "freeze_s", time.monotonic() - t1)

    def _children(self) -> int:
        """Processes alive in the worker's tree besides the worker itself, seen from outside."""
        pid = self.worker.confined_pid()
        return len(confinement.live_descendants(pid)) if pid is not None else 0

    def _ctx(self, w: Any) -> P.Context:
        return P.Context(problem_path=str(self.p.path), params=dict(w.params), dtype=w.dtype,
                         device="cuda" if self.cuda else "cpu", model_seed=round_seed(self.o.base_seed, w.name, -1),
                         input_transform=self.p.input_transform, allow_tf32=w.allow_tf32, mode=self.t.mode,
                         baseline=self.o.baseline, sums=plan.output_sums(self.p, w, self.t.mode))

    def _confined(self, ready: P.Ready) -> bool:
        """Record the worker's confinement as the kernel shows it (its report, checked from outside); with
        ``isolation="strict"``, a worker missing any part of it serves no candidate (HARNESS_ERROR, naming what
        is missing: the machine's, not the candidate's). Returns whether the conversation goes on."""
        from harness.execute.boundary.enter import Confinement

        try:
            claim = Confinement.from_dict(ready.confinement)
        except (KeyError, TypeError, ValueError) as exc:
            raise P.ProtocolError(f"ready.confinement: {exc}") from None
        pid = self.worker.confined_pid()
        seen = confinement.observe(pid) if pid is not None else None
        if len(ready.channel_fds) != 2 or not all(isinstance(fd, int) and fd >= 0 for fd in ready.channel_fds):
            raise P.ProtocolError(f"ready.channel_fds: {ready.channel_fds!r} is not two descriptors")
        self._channel = {os.fstat(self.worker.p2c_w).st_ino: ready.channel_fds[0],
                         os.fstat(self.worker.c2p_r).st_ino: ready.channel_fds[1]}
        gaps = list(claim.missing)
        if claim.level != "off":
            if seen is None:
                raise WorkerDied("the confined worker is gone")
            gaps += [f"{part}: reported, not in force" for part in
                     seen.mismatch(claim.namespaces, bool(claim.seccomp), claim.privileges_dropped)]
        note = claim.describe() + (f"; not in force: {'; '.join(gaps)}" if gaps and not claim.missing else "")
        self.env = dataclasses.replace(self.env, sandbox=note[:400])
        if self.o.isolation_level == "strict" and gaps:
            self._fail_rest(Status.HARNESS_ERROR, {"type": "IsolationIncomplete", "message": (
                f"the worker's confinement is incomplete on this machine ({'; '.join(gaps)[:600]}); no candidate "
                "runs without it: fix the machine (see docs/security.md) or pass --isolation available to run "
                "with what it allows (recorded in every record)")})
            return False
        return True

