"""The correctness details of a record: the worst element of a failure, the value profiles, held-out shapes.

Split from :mod:`harness.records` (which re-exports them and follows the same conventions: frozen, slotted
dataclasses with ``to_dict``/``from_dict``, ``None`` for absent, non-finite floats as strings in JSON). This module
imports nothing from :mod:`harness.records` at import time, so that one can import these at its top.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _known(cls: type, d: dict) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}; known: {sorted(names)}")
    return dict(d)


def _num(v: Any) -> Any:
    return _NONFINITE.get(v, v) if isinstance(v, str) else v


@dataclass(frozen=True, slots=True)
class WorstElement:
    """The element of a failed comparison farthest outside its tolerance (or the first NaN/Inf where the reference
    is finite): what a generator needs to find its bug."""

    output: int
    """Which output of the forward (0 for a single tensor)."""
    index: tuple[int, ...]
    """Its index in the output's shape."""
    got: float
    expected: float
    """The float64 reference's value."""
    allowed: float | None
    """The absolute error allowed there; None where no error is (a NaN/Inf where the reference is finite)."""

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "WorstElement | None":
        if d is None:
            return None
        d = _known(cls, d)
        d["index"] = tuple(int(i) for i in d["index"])
        for k in ("got", "expected", "allowed"):
            d[k] = _num(d.get(k))
        return cls(**d)


@dataclass(frozen=True, slots=True)
class ProfileCheck:
    """Whether one value profile (harness.execute.shared.value_profiles) was used for a workload, and why."""

    name: str
    fair: bool
    """Used in the rounds and the verified timed calls (harness.execute.checker.fairness)."""
    reason: str

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ProfileCheck":
        return cls(**_known(cls, d))


@dataclass(frozen=True, slots=True)
class HeldoutShape:
    """One held-out shape of a workload (harness.problems.heldout) and how the candidate did there."""

    workload: str
    """Its name, ``<public workload>~heldout-<k>``."""
    sizes: dict
    """The size constants whose value differs from the public workload's (derived ones included)."""
    status: str | None
    """The candidate's outcome at this shape, a :class:`harness.records.Status` value (``PASSED``,
    ``INCORRECT_NUMERICAL``, ...); None when the shape was not judged (``detail`` says why)."""
    detail: str = ""
    failed_profile: str | None = None
    worst: WorstElement | None = None
    round_profiles: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> "HeldoutShape":
        d = _known(cls, d)
        d["worst"] = WorstElement.from_dict(d.get("worst"))
        d["round_profiles"] = tuple(d.get("round_profiles", ()))
        return cls(**d)


@dataclass(frozen=True, slots=True)
class HeldoutResult:
    """Correctness at held-out shapes, beside a workload's own verdict (README "Correctness protocol")."""

    shapes: tuple[HeldoutShape, ...]
    gated: bool
    """Whether a failure here made the workload's own status a failure (``kernelgate run --heldout-gate``)."""

    @property
    def judged(self) -> int:
        return sum(1 for s in self.shapes if s.status is not None)

    @property
    def passed(self) -> int:
        return sum(1 for s in self.shapes if s.status == "PASSED")

    @property
    def generalizes(self) -> bool | None:
        """True when every judged shape PASSED, False when one did not, None when none was judged."""
        return None if not self.judged else self.passed == self.judged

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "HeldoutResult | None":
        if d is None:
            return None
        d = _known(cls, d)
        return cls(shapes=tuple(HeldoutShape.from_dict(s) for s in d["shapes"]), gated=bool(d["gated"]))
