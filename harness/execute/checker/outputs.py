"""The checker's read of a worker's committed outputs (the worker's whole process tree is stopped meanwhile).

Order of the read, so nothing the candidate shaped is materialized before it is known to be the reference's
shape: the descriptors are checked field by field (:func:`harness.execute.wire.outputs.check_descriptors`),
then against the reference's outputs (:func:`~harness.execute.wire.outputs.check_layout`: number, shape, dtype,
no element sharing memory, no oversized span), and only then are bytes read: from the file (whose size must be
exactly its header plus the bytes it declares) or from the mapped allocation (whose range must hold them).

On a GPU the checker first waits, briefly, for the GPU to be idle (:mod:`harness.execute.checker.gpu_idle`:
whether it was is recorded), and the bytes are read twice, before and after the comparison (:func:`still_equal`):
a kernel of the worker that was still running when the worker was stopped would change them in between (an
honest worker synchronizes before it commits).
"""

from __future__ import annotations

import os
import stat
from typing import Any

from harness.execute.wire.outputs import (CommitError, CommitMalformed, check_descriptors, check_layout,
                                          parse_header, MAX_HEADER_BYTES)


_PROBE: list = []
"""The GPU idle probe (:func:`use_probe`), once the checker has a GPU."""
STATE = {"busy_reads": 0}
"""Reads that started with the GPU still busy (:mod:`harness.execute.checker.gpu_idle`), since the last reply."""


def use_probe(probe) -> None:
    """Probe the GPU before each IPC read with ``probe`` (an :class:`~harness.execute.checker.gpu_idle.IdleProbe`)."""
    _PROBE[:] = [probe]


def expected_of(tensors: list) -> list[tuple[list[int], str]]:
    """(shape, dtype name) of each of ``tensors`` (the reference's outputs, or the checker's own inputs)."""
    return [(list(t.shape), str(t.dtype).removeprefix("torch.")) for t in tensors]


def read(committed: Any, expected: list[tuple[list[int], str]], folder: str | None = None) -> list:
    """The committed tensors (``committed``: a :class:`harness.execute.wire.protocol.Committed`), checked against
    ``expected`` before they are read; CPU tensors from a file, device tensors from IPC. Raises
    :class:`~harness.execute.wire.outputs.LayoutMismatch` (the candidate's wrong output), ``CommitMalformed`` or
    ``CommitError``. ``folder``: where a committed file must lie (directly inside, a regular file)."""
    if committed is None or (committed.ipc is None and committed.path is None):
        raise CommitMalformed("nothing was committed")
    if committed.ipc is not None:
        descs = check_descriptors(list(committed.ipc))
        check_layout(descs, expected)
        if _PROBE:
            idle, _ = _PROBE[0].wait_idle()
            STATE["busy_reads"] += 0 if idle else 1
        return [_strided(raw, d) for raw, d in zip(_ipc_bytes(descs), descs)]
    return _read_file(committed.path, expected, folder)


def _read_file(path: str, expected: list[tuple[list[int], str]], folder: str | None) -> list:
    import torch

    try:  # never blocks: a FIFO (or a device) named as the file would wait for a writer the freeze holds stopped
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise CommitMalformed(f"committed file {path[:120]!r} cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CommitMalformed(f"committed file {path[:120]!r} is not a regular file")
        if folder is not None and os.path.dirname(os.path.realpath(path)) != os.path.realpath(folder):
            raise CommitMalformed(f"committed file {path[:120]!r} is not in the worker's hand-off folder")
        head = f.read(MAX_HEADER_BYTES)
        descs, start = parse_header(head)
        check_layout(descs, expected)
        total = start + sum(d["nbytes"] for d in descs)
        if st.st_size != total:
            raise CommitMalformed(f"committed file has {st.st_size} bytes, its header declares {total}")
        f.seek(start)
        outs = []
        for i, d in enumerate(descs):
            chunk = f.read(d["nbytes"])
            if len(chunk) != d["nbytes"]:
                raise CommitError(f"output {i}: the file ended before its {d['nbytes']} bytes")
            raw = torch.frombuffer(bytearray(chunk), dtype=torch.uint8) if chunk else torch.empty(0, dtype=torch.uint8)
            outs.append(_strided(raw, d))
    return outs


def _strided(raw: Any, d: dict) -> Any:
    """A contiguous tensor with ``d``'s dtype and shape from the bytes ``raw`` its strides span (a fresh copy)."""
    import torch

    dtype = getattr(torch, d["dtype"])
    if not d["nbytes"]:
        return torch.empty(d["shape"], dtype=dtype, device=raw.device)
    return raw.view(dtype).as_strided(d["shape"], d["stride"]).contiguous()


class _DeviceBytes:
    """A raw device byte range as ``__cuda_array_interface__`` (how torch wraps foreign memory)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}


def _ipc_bytes(descs: list[dict]) -> list:
    """Fresh device copies of each descriptor's byte range (uint8), read through the CUDA driver's IPC."""
    import torch

    from harness.execute.shared import cuda_ipc

    torch.empty(1, device="cuda")  # the driver calls below need this thread's CUDA context current
    out = []
    for i, d in enumerate(descs):
        if not d["nbytes"]:
            out.append(torch.empty(0, dtype=torch.uint8, device="cuda"))
            continue
        try:
            ptr = cuda_ipc.open_handle(d["handle"])
        except ValueError as exc:
            raise CommitMalformed(f"output {i}: handle is not hex") from exc
        except cuda_ipc.DriverError as exc:
            raise CommitError(f"output {i}: {exc}") from None
        try:
            base, size = cuda_ipc.address_range(ptr)
            if d["offset"] + d["nbytes"] > size - (ptr - base):
                raise CommitMalformed(f"output {i}: bytes {d['offset']}..{d['offset'] + d['nbytes']} lie outside the "
                                      f"exported allocation of {size} bytes")
            view = torch.as_tensor(_DeviceBytes(ptr + d["offset"], d["nbytes"]), device="cuda")
            out.append(view.clone())  # byte copy first: fresh, aligned memory
            torch.cuda.synchronize()
            del view
        except cuda_ipc.DriverError as exc:
            raise CommitError(f"output {i}: {exc}") from None
        finally:
            cuda_ipc.close_handle(ptr)
    return out


def still_equal(committed: Any, first: list) -> bool:
    """Read IPC-committed outputs again and say whether their bytes are those of ``first`` (the tensors
    :func:`read` returned). Files cannot change while the worker is stopped: True for them."""
    import torch

    if committed is None or committed.ipc is None:
        return True
    descs = check_descriptors(list(committed.ipc))
    again = [_strided(raw, d) for raw, d in zip(_ipc_bytes(descs), descs)]
    return all(a.shape == b.shape and torch.equal(_bits(a), _bits(b)) for a, b in zip(first, again))


def _bits(t: Any) -> Any:
    """``t``'s bytes (NaNs compare equal to themselves)."""
    import torch

    return t.contiguous().reshape(-1).view(torch.uint8)
