"""On-disk cache of derived costs, so a folder of plain problem files lists in seconds the second time.

A derived cost (:class:`harness.problems.derive.DerivedCost`) depends on the
problem file's bytes, the sizes it ran at, the dtype, the torch version (its
meta kernels and FLOP formulas) and the derivation's own version; the cache
key is a hash of exactly those. One JSON file per key under
``$KERNELGATE_CACHE/costs/`` (default ``~/.cache/kernelgate/costs/``), written
atomically (temp file + rename), so concurrent listings never see half a file.
A file that cannot be read or parsed is a miss, never an error. Set
``KERNELGATE_CACHE=off`` to turn the cache off.

A derivation abandoned at its time budget is cached too (with the budget), and
counts as a miss for a later call with a larger budget.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from harness.problems.derive import DERIVE_VERSION, DerivedCost


def cache_dir() -> Path | None:
    """The costs folder, or None when caching is off (``KERNELGATE_CACHE=off``)."""
    root = os.environ.get("KERNELGATE_CACHE")
    if root and root.strip().lower() in ("off", "0", "none", "false"):
        return None
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "kernelgate"
    return base / "costs"


def cost_key(source_sha256: str, sizes: dict[str, Any], dtype: str) -> str:
    """Hash of everything a derived cost depends on."""
    import torch

    payload = json.dumps({"sha256": source_sha256, "sizes": {k: list(v) if isinstance(v, tuple) else v
                                                             for k, v in sorted(sizes.items())},
                          "dtype": dtype, "torch": torch.__version__, "derive": DERIVE_VERSION},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def lookup(key: str, *, budget_s: float | None) -> DerivedCost | None:
    """The cached cost for ``key``; None when absent, unreadable, or timed out under a smaller budget."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        cost = DerivedCost.from_dict(json.loads((folder / f"{key}.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if cost.timed_out and (budget_s is None or (cost.budget_s or 0) < budget_s):
        return None
    return cost


def store(key: str, cost: DerivedCost) -> None:
    """Write ``cost`` under ``key`` atomically; a cache that cannot be written is skipped silently (it is a cache)."""
    from harness.jsonio import atomic_write_text

    folder = cache_dir()
    if folder is None:
        return
    try:
        atomic_write_text(folder / f"{key}.json", json.dumps(cost.to_dict(), sort_keys=True))
    except OSError:
        pass
