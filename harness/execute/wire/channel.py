"""The framing of the pipes between the parent and a worker: one JSON object per line, read with a deadline and
a length cap.

The worker is untrusted, so its side of a pipe is read like a network socket: the parent never blocks without a
deadline and never buffers more than :data:`MAX_MESSAGE_BYTES` of one message. What a worker can do wrong here,
and what the parent makes of it (:mod:`harness.execute.parent.session`)::

    nothing complete before the deadline      ChannelTimeout   (partial: the bytes of a half message)   TIMEOUT
    a line that is not a JSON object          ChannelError                                               REWARD_HACK
    more than MAX_MESSAGE_BYTES without an    ChannelError                                               REWARD_HACK
      end of line
    end of file                               ChannelClosed                                              CRASHED

The content of a message is a claim either way: messages carry no signature (whatever runs in the worker holds
any key the worker holds), and :mod:`harness.execute.wire.protocol` checks every field.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any

MAX_MESSAGE_BYTES = 4 << 20
"""The longest line either side accepts (a message with lowered TileLang sources is the largest, ~1 MiB)."""
_CHUNK = 1 << 16


class ChannelError(RuntimeError):
    """The other side sent something that is not a message: junk, or a line over :data:`MAX_MESSAGE_BYTES`."""


class ChannelTimeout(ChannelError):
    """No complete message before the deadline."""

    def __init__(self, message: str, partial: int = 0):
        super().__init__(message)
        self.partial = partial
        """Bytes of an unfinished message already received (0: none)."""


class ChannelClosed(ChannelError):
    """End of file: the other side closed its end (or ended)."""


class Endpoint:
    """One side of a pipe pair: a readable and a writable descriptor; ``recv`` with a deadline, ``send`` whole
    lines. Not thread-safe (one conversation per endpoint)."""

    def __init__(self, read_fd: int, write_fd: int, max_bytes: int = MAX_MESSAGE_BYTES):
        self._r, self._w = read_fd, write_fd
        self._buf = bytearray()
        self.max_bytes = max_bytes

    def fileno(self) -> int:
        return self._r

    @property
    def fds(self) -> tuple[int, int]:
        """(the descriptor read, the descriptor written)."""
        return self._r, self._w

    @property
    def has_buffered(self) -> bool:
        """A complete message is already buffered (``select`` on the descriptor would not see it)."""
        return b"\n" in self._buf

    def send(self, msg: dict, timeout_s: float | None = None) -> None:
        """Write ``msg`` as one line; with ``timeout_s``, raise :class:`ChannelTimeout` when the other side does
        not read it in time (a full pipe)."""
        data = memoryview((json.dumps(msg, allow_nan=True) + "\n").encode())
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while data:
            if deadline is not None:
                left = deadline - time.monotonic()
                _, ready, _ = select.select([], [self._w], [], max(0.0, left))
                if not ready:
                    raise ChannelTimeout(f"the other side did not read a message for {timeout_s:.0f} s")
                n = os.write(self._w, data[:select.PIPE_BUF])  # a writable pipe takes PIPE_BUF bytes without blocking
            else:
                n = os.write(self._w, data)
            data = data[n:]

    def recv(self, timeout_s: float | None = None) -> dict:
        """The next message. Raises :class:`ChannelTimeout` (nothing complete within ``timeout_s``; None waits
        forever), :class:`ChannelClosed` or :class:`ChannelError`."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                return _parse(line)
            if len(self._buf) > self.max_bytes:
                raise ChannelError(f"a message of more than {self.max_bytes} bytes without an end of line")
            if deadline is not None:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([self._r], [], [], max(0.0, left))
                if not ready:
                    raise ChannelTimeout(f"no complete message for {timeout_s:.0f} s"
                                         + (f" ({len(self._buf)} bytes of an unfinished one)" if self._buf else ""),
                                         len(self._buf))
            chunk = os.read(self._r, _CHUNK)
            if not chunk:
                raise ChannelClosed("end of file" + (f" after {len(self._buf)} bytes of an unfinished message"
                                                     if self._buf else ""))
            self._buf += chunk


def _parse(line: bytes) -> dict:
    try:
        msg = json.loads(line)
    except ValueError:
        raise ChannelError(f"a line that is not JSON: {line[:120]!r}") from None
    if not isinstance(msg, dict):
        raise ChannelError(f"a line that is not a JSON object: {line[:120]!r}")
    return msg


def send_line(fd: int, obj: Any) -> None:
    """One JSON line, written whole (the parent's first message to a worker: its spec)."""
    data = memoryview((json.dumps(obj) + "\n").encode())
    while data:
        data = data[os.write(fd, data):]
