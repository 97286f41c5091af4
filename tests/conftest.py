"""Shared fixtures; GPU tests are skipped without CUDA (the parent never initialises CUDA); the modules that
run whole evaluations (many workers each) are marked ``slow``, so ``pytest -m "not slow"`` is a fast loop
for development (CI runs everything)."""

from __future__ import annotations

import shutil

import pytest


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


SLOW_MODULES = frozenset({
    # each takes 10-160 s on a 2-core machine (pytest --durations): they start tens of workers
    "execute/test_bundled_cpu.py", "execute/test_adversarial_run.py", "execute/test_exploits.py",
    "execute/test_fault_injection.py", "execute/test_hostile.py", "execute/test_worker_pool.py",
    "execute/test_ray_executor.py", "execute/test_memory_admission_cpu.py", "api/test_api.py",
    "commands/test_interrupt.py", "serve/test_serve_restart.py", "serve/test_serve_engine_e2e.py",
    "serve/test_engine_kept.py", "serve/test_loadtest_tool.py",
})


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        rel = item.path.relative_to(item.path.parents[1]).as_posix() if len(item.path.parents) > 1 else ""
        if rel in SLOW_MODULES:
            item.add_marker(slow)
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
