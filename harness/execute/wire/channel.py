"""The private parent <-> worker channel.

Results never travel over the candidate's stdout/stderr (those go to capped
files and may hold anything the candidate prints). The parent passes the
worker two pipe descriptors; every message is one JSON line carrying an HMAC
under a per-job key that the parent sends as the first message, before any
candidate code is imported. A line that fails to parse or verify ends the job
with a protocol error: a candidate that writes to the descriptor cannot forge
a record without also recovering the key from the worker's memory (which the
static anti-cheat scan and the README's threat model address).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any, BinaryIO


class ChannelError(RuntimeError):
    """The other side sent something that is not a valid, signed message."""


def _sign(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def encode(key: bytes, msg: dict) -> bytes:
    body = json.dumps(msg, sort_keys=True, allow_nan=True)
    return (json.dumps({"body": body, "mac": _sign(key, body)}) + "\n").encode()


def decode(key: bytes, line: bytes) -> dict:
    try:
        frame = json.loads(line)
        body, mac = frame["body"], frame["mac"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ChannelError(f"malformed message on the result channel ({exc}): {line[:120]!r}") from None
    if not hmac.compare_digest(mac, _sign(key, body)):
        raise ChannelError("a message on the result channel failed authentication (forged or corrupted)")
    return json.loads(body)


class Endpoint:
    """One side of the channel: a reader (raw binary file), a writable descriptor, and the key."""

    def __init__(self, reader: BinaryIO, write_fd: int, key: bytes):
        self._r = reader
        self._w = write_fd
        self.key = key
        self._buf = b""

    @property
    def has_buffered(self) -> bool:
        """A complete message may already be buffered (select() on the descriptor would not see it)."""
        return bool(self._buf)

    def fileno(self) -> int:
        return self._r.fileno()

    def send(self, msg: dict) -> None:
        data = encode(self.key, msg)
        view = memoryview(data)
        while view:
            n = os.write(self._w, view)
            view = view[n:]

    def recv(self) -> dict | None:
        """Next message, or None at end of stream."""
        while b"\n" not in self._buf:
            chunk = self._r.read(65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return decode(self.key, line)


def send_raw_json(fd: int, obj: Any) -> None:
    """Unsigned bootstrap message (the job spec, which carries the key)."""
    os.write(fd, (json.dumps(obj) + "\n").encode())
