"""The wire codec: protocol messages as frozen dataclasses, and their strict decoding.

A message is a frozen, slotted dataclass registered under a ``kind`` (:func:`message`); :func:`encode` turns one
into a plain dict (``{"kind": ..., "v": VERSION, ...fields}``) and :func:`decode` turns a dict back into the
dataclass, refusing unknown kinds, unknown or missing fields, wrong types, over-long strings and lists. What a
worker sends is parsed with this strictness, like a network packet: a message that does not decode is a
protocol violation. The messages themselves are defined in :mod:`harness.execute.wire.protocol`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

VERSION = 3
"""3: outputs committed with each call's report (no hand-off request), no channel signature."""
MAX_TEXT = 8000
MAX_LIST = 4096
MAX_SOURCES_CHARS = 400_000


class ProtocolError(ValueError):
    """A message that is not what :func:`encode` writes (names the kind and field)."""


_REGISTRY: dict[str, type] = {}


def message(kind: str):
    """Class decorator: register a frozen dataclass as the message ``kind``."""

    def wrap(cls):
        cls = dataclass(frozen=True, slots=True)(cls)
        if kind in _REGISTRY:
            raise ValueError(f"message kind {kind!r} registered twice")
        cls.KIND = kind
        _REGISTRY[kind] = cls
        return cls

    return wrap


def encode(msg: Any) -> dict:
    """The wire form of a message: a plain dict of JSON values."""
    if type(msg) not in _REGISTRY.values():
        raise TypeError(f"{type(msg).__name__} is not a protocol message")
    out = {"kind": msg.KIND, "v": VERSION}
    for f in dataclasses.fields(msg):
        out[f.name] = _plain(getattr(msg, f.name))
    return out


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def decode(d: Any, expect: tuple[type, ...] | None = None) -> Any:
    """The message a wire dict encodes; raises :class:`ProtocolError` naming what is wrong.

    ``expect`` restricts the kinds accepted here (a worker may only send
    worker messages, and only the ones that fit the conversation's state).
    """
    if not isinstance(d, dict):
        raise ProtocolError(f"a message must be a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message kind {str(kind)[:60]!r}")
    if d.get("v") != VERSION:
        raise ProtocolError(f"{kind}: protocol version {str(d.get('v'))[:20]!r}, expected {VERSION}")
    if expect is not None and cls not in expect:
        raise ProtocolError(f"unexpected message {kind!r} here; expected one of {sorted(c.KIND for c in expect)}")
    return _build(cls, d, kind, {"kind", "v"})


_SCHEMA: dict[type, tuple[frozenset, tuple[tuple[str, Any, bool], ...]]] = {}


def _schema(cls: type) -> tuple[frozenset, tuple[tuple[str, Any, bool], ...]]:
    """(field names, (name, type, required) per field) of a dataclass, computed once per class."""
    if cls not in _SCHEMA:
        hints = typing.get_type_hints(cls)
        fields = tuple((f.name, hints[f.name], f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)  # type: ignore[misc]
                       for f in dataclasses.fields(cls))
        _SCHEMA[cls] = (frozenset(name for name, _, _ in fields), fields)
    return _SCHEMA[cls]


def _build(cls: type, d: dict, where: str, extra: set[str] = frozenset()) -> Any:
    names, fields = _schema(cls)
    unknown = set(d) - names - extra
    if unknown:
        raise ProtocolError(f"{where}: unknown field(s) {sorted(unknown)[:5]}")
    kwargs = {}
    for name, tp, required in fields:
        if name not in d:
            if required:
                raise ProtocolError(f"{where}: missing field '{name}'")
            continue
        kwargs[name] = _check(d[name], tp, f"{where}.{name}")
    return cls(**kwargs)


def _check(v: Any, tp: Any, where: str) -> Any:
    """``v`` converted to ``tp`` (tuples for lists, nested dataclasses), or ProtocolError."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return v
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _check(v, a, where)
            except ProtocolError as exc:
                errors.append(str(exc))
        raise ProtocolError(errors[0] if errors else f"{where}: must not be null")
    if origin in (tuple, list):
        if not isinstance(v, list):
            raise ProtocolError(f"{where}: expected a list, got {type(v).__name__}")
        if len(v) > MAX_LIST:
            raise ProtocolError(f"{where}: list of {len(v)} items (at most {MAX_LIST})")
        inner = args[0] if args else Any
        return tuple(_check(x, inner, f"{where}[{i}]") for i, x in enumerate(v))
    if origin is dict or tp is dict:
        if not isinstance(v, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(v).__name__}")
        if len(v) > MAX_LIST:
            raise ProtocolError(f"{where}: object of {len(v)} keys (at most {MAX_LIST})")
        return dict(v)
    if dataclasses.is_dataclass(tp):
        if not isinstance(v, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(v).__name__}")
        return _build(tp, v, where)
    if tp is bool:
        if type(v) is not bool:
            raise ProtocolError(f"{where}: expected true/false, got {type(v).__name__}")
        return v
    if tp is int:
        if type(v) is not int:
            raise ProtocolError(f"{where}: expected an integer, got {type(v).__name__}")
        return v
    if tp is float:
        if type(v) not in (int, float):
            raise ProtocolError(f"{where}: expected a number, got {type(v).__name__}")
        return float(v)
    if tp is str:
        if not isinstance(v, str):
            raise ProtocolError(f"{where}: expected a string, got {type(v).__name__}")
        if len(v) > MAX_SOURCES_CHARS:
            raise ProtocolError(f"{where}: string of {len(v)} characters (at most {MAX_SOURCES_CHARS})")
        return v
    raise ProtocolError(f"{where}: unsupported type {tp}")
