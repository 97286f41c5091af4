"""Handing a candidate's outputs to the trusted checker.

Two ways, chosen per run (``kernelgate run --handoff``):

* ``file`` (any device): the worker saves its outputs with ``torch.save``
  into its scratch folder; the checker loads them with ``weights_only=True``.
  Every round copies the outputs GPU -> host -> file -> host -> GPU: on the
  H200 host, for a 268 MB output, 0.3 s to save and 0.2 s to load and compare
  per round (``leaderboards/h200-2026-11-30-s3/file-handoff/``).
* ``ipc`` (CUDA, the default there): the worker exports the outputs' device
  memory with the CUDA driver's inter-process handles
  (``cuIpcGetMemHandle``) and sends, per output, the handle, the offset in
  its allocation, the byte count, dtype and shape; the checker maps the
  allocation (``cuIpcOpenMemHandle``), checks the byte range lies inside it,
  copies the bytes into its own memory (device to device) and unmaps. The
  worker keeps its outputs alive and waits until the checker has replied.
  A worker whose export fails (an allocator without IPC support) falls back
  to a file.

Nothing here deserializes objects: the descriptors are plain JSON, checked
field by field (:func:`check_descriptors`) before any handle is opened.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

MAX_OUTPUTS = 64
MAX_BYTES = 1 << 40
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
          "complex64", "complex128", "float8_e4m3fn", "float8_e5m2")


class HandoffError(Exception):
    """The memory the descriptors name cannot be read (the CUDA driver refused)."""


class HandoffTampered(HandoffError):
    """The descriptors are not what :func:`export_outputs` writes: malformed, or naming bytes
    outside the exported allocation. An honest worker never sends these."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_LIB: list[Any] = []


def _cuda() -> Any:
    """The CUDA driver library with the four IPC entry points typed (loaded once)."""
    if not _LIB:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        open_fn = getattr(lib, "cuIpcOpenMemHandle_v2", None) or lib.cuIpcOpenMemHandle
        open_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.c_uint64]
        _LIB.extend([lib, open_fn])
    return _LIB[0]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise HandoffError(f"{what} failed with CUDA driver error {rc}")


def export_outputs(outs: list) -> tuple[list[dict], list] | None:
    """Worker side: descriptors for ``outs`` and the tensors to keep alive until the reply, or None.

    None means the export is not possible here (no CUDA driver, memory not
    from ``cudaMalloc``); the caller then hands off through a file.
    """
    import torch

    try:
        lib = _cuda()
        keep = [o.detach().contiguous() for o in outs]
        if keep:
            torch.cuda.synchronize()
        descs = []
        for t in keep:
            nbytes = t.numel() * t.element_size()
            desc = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "nbytes": nbytes,
                    "handle": "", "offset": 0}
            if nbytes:
                base, size, handle = ctypes.c_uint64(), ctypes.c_size_t(), _Handle()
                _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), t.data_ptr()), "cuMemGetAddressRange")
                _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), base.value), "cuIpcGetMemHandle")
                desc.update(handle=bytes(handle).hex(), offset=t.data_ptr() - base.value)  # all 64 bytes, NULs too
            descs.append(desc)
        return descs, keep
    except (OSError, AttributeError, HandoffError, RuntimeError):
        return None


def check_descriptors(descs: Any) -> list[dict]:
    """Validate untrusted descriptors field by field; raise :class:`HandoffTampered` naming the bad field."""
    if not isinstance(descs, list) or len(descs) > MAX_OUTPUTS:
        raise HandoffTampered(f"output descriptors must be a list of at most {MAX_OUTPUTS}")
    import torch

    for i, d in enumerate(descs):
        if not isinstance(d, dict) or set(d) != {"dtype", "shape", "nbytes", "handle", "offset"}:
            raise HandoffTampered(f"output {i}: descriptor must have exactly dtype, shape, nbytes, handle, offset")
        if d["dtype"] not in DTYPES:
            raise HandoffTampered(f"output {i}: dtype {str(d['dtype'])[:40]!r} is not one of {', '.join(DTYPES)}")
        shape = d["shape"]
        if not isinstance(shape, list) or len(shape) > 16 or not all(type(n) is int and n >= 0 for n in shape):
            raise HandoffTampered(f"output {i}: shape must be a list of at most 16 non-negative integers")
        itemsize = torch.empty((), dtype=getattr(torch, d["dtype"])).element_size()
        if type(d["nbytes"]) is not int or d["nbytes"] != math.prod(shape) * itemsize or d["nbytes"] > MAX_BYTES:
            raise HandoffTampered(f"output {i}: nbytes does not match shape {shape} x {itemsize} byte(s)")
        if type(d["offset"]) is not int or d["offset"] < 0 or d["offset"] % itemsize:
            # misaligned data would make the checker's own kernels fault (and poison its CUDA context)
            raise HandoffTampered(f"output {i}: offset must be a non-negative multiple of {itemsize}")
        if d["nbytes"] and (not isinstance(d["handle"], str) or len(d["handle"]) != 128):
            raise HandoffTampered(f"output {i}: handle must be 64 bytes in hex")
    return descs


class _DeviceBytes:
    """A raw device byte range as ``__cuda_array_interface__`` (how torch wraps foreign memory)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}


def import_outputs(descs: Any) -> list:
    """Checker side: copies of the outputs that ``descs`` name, in this process's own device memory."""
    import torch

    descs = check_descriptors(descs)
    torch.empty(1, device="cuda")  # the driver calls below need this thread's CUDA context current
    lib = _cuda()
    open_fn = _LIB[1]
    outs = []
    for i, d in enumerate(descs):
        dtype = getattr(torch, d["dtype"])
        if not d["nbytes"]:
            outs.append(torch.empty(d["shape"], dtype=dtype, device="cuda"))
            continue
        try:
            handle = _Handle.from_buffer_copy(bytes.fromhex(d["handle"]))
        except ValueError as exc:
            raise HandoffTampered(f"output {i}: handle is not hex") from exc
        ptr = ctypes.c_uint64()
        _check(open_fn(ctypes.byref(ptr), handle, 1), f"output {i}: cuIpcOpenMemHandle")  # 1: lazy peer access
        try:
            base, size = ctypes.c_uint64(), ctypes.c_size_t()
            _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr.value), "cuMemGetAddressRange")
            if d["offset"] + d["nbytes"] > size.value - (ptr.value - base.value):
                raise HandoffTampered(f"output {i}: bytes {d['offset']}..{d['offset'] + d['nbytes']} lie outside the "
                                   f"exported allocation of {size.value} bytes")
            view = torch.as_tensor(_DeviceBytes(ptr.value + d["offset"], d["nbytes"]), device="cuda")
            outs.append(view.clone().view(dtype).reshape(d["shape"]))  # byte copy first: fresh, aligned memory
            torch.cuda.synchronize()
            del view
        finally:
            lib.cuIpcCloseMemHandle(ptr.value)
    return outs
