"""JSON and JSONL I/O: atomic writes, locked appends, lossless non-finite floats.

Why not plain ``json``: orjson is several times faster on large results files
and is used when installed (the GPU image may lack it, so the stdlib is the
fallback). Neither encodes NaN/Inf losslessly, so :func:`encode_nonfinite`
turns them into the strings ``"nan"``, ``"inf"``, ``"-inf"`` first; readers of
our records know which fields are floats.

Appends take an exclusive ``fcntl`` lock on the file and write one complete
line per call, so two runs appending to one file never interleave records. A
reader skips (and reports) a truncated last line left by a killed writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

try:  # optional speed-up; the device image has no orjson
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised on the device machine
    _orjson = None


def encode_nonfinite(obj: Any) -> Any:
    """Recursively replace non-finite floats by their string spelling."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {k: encode_nonfinite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode_nonfinite(v) for v in obj]
    return obj


def dumps(obj: Any, *, indent: bool = False) -> str:
    obj = encode_nonfinite(obj)
    if _orjson is not None:
        opt = _orjson.OPT_SORT_KEYS | (_orjson.OPT_INDENT_2 if indent else 0)
        return _orjson.dumps(obj, option=opt).decode()
    return json.dumps(obj, sort_keys=True, indent=2 if indent else None, allow_nan=False)


def loads(text: str | bytes) -> Any:
    if _orjson is not None:
        return _orjson.loads(text)
    return json.loads(text)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder + ``os.replace``.

    A reader sees either the old file or the new one, never a partial write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, dumps(obj, indent=True) + "\n")


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Exclusive advisory lock on ``<path>.lock`` for read-modify-write sequences."""
    lock_path = Path(str(path) + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lf:
        fcntl.flock(lf.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lf.fileno(), fcntl.LOCK_UN)


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one record as one line, under an exclusive lock, flushed and fsynced."""
    line = dumps(record) + "\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            # a killed writer may have left a partial line: start on a fresh one
            if f.tell() > 0:
                with open(path, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        f.write("\n")
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


class JsonlProblem(ValueError):
    """A line of a JSONL file that could not be read; names file and line."""


def read_jsonl(path: str | os.PathLike, *, on_bad_line=None) -> list[dict]:
    """Read every valid record of a JSONL file.

    Invalid lines (a truncated tail after a kill, hand edits) are reported via
    ``on_bad_line(path, lineno, message)`` and skipped; with no callback they
    raise :class:`JsonlProblem` naming the file and line. Valid records are
    never dropped because of a bad neighbour. A path ending in ``.gz`` is read
    through gzip (committed evidence is stored so).
    """
    path = Path(path)
    out: list[dict] = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("line is JSON but not an object")
            except ValueError as exc:
                msg = f"{path}:{lineno}: not a valid JSON record ({exc}); the line is skipped"
                if on_bad_line is None:
                    raise JsonlProblem(msg) from None
                on_bad_line(path, lineno, msg)
                continue
            out.append(obj)
    return out
