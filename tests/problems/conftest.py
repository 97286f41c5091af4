"""Problem tests write derived costs into a private cache folder, never the user's ~/.cache."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_cost_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KERNELGATE_CACHE", str(tmp_path_factory.getbasetemp() / "kernelgate-cache"))
