"""Resource limits a worker sets on itself before its candidate (kept by every process it starts).

Only limits that are safe beside the GPU driver: no core dumps, a per-file size cap (a candidate cannot fill
the disk from its scratch folder: a write past it fails with EFBIG), an open-file cap. No address-space cap (the
CUDA driver maps huge virtual ranges); GPU memory is capped by the worker's allocator share and wall time by
the parent's deadlines.
"""

from __future__ import annotations


def set_rlimits(settings: dict) -> None:
    """``RLIMIT_CORE`` 0, ``RLIMIT_FSIZE`` ``settings["max_file_bytes"]`` (default 8 GiB), ``RLIMIT_NOFILE``
    ``settings["max_open_files"]`` (default 4096); a hard limit already lower is kept."""
    import resource

    limits = {
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: int(settings.get("max_file_bytes", 8 << 30)),
        resource.RLIMIT_NOFILE: int(settings.get("max_open_files", 4096)),
    }
    for res, value in limits.items():
        soft, hard = resource.getrlimit(res)
        new_hard = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(res, (min(value, new_hard), new_hard))
        except (ValueError, OSError):
            pass
