"""The CUDA driver entry points for committed outputs (``libcuda`` through ``ctypes``, typed once, on first use).

Used by the worker (export an allocation's IPC handle, copy device bytes to the host) and the checker (open,
read and close a handle); nothing happens at import, and machines without a driver never load it.
"""

from __future__ import annotations

import ctypes
from typing import Any


class DriverError(Exception):
    """A driver call failed (its name and error code in the message)."""


class Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_LIB: list[Any] = []


def driver() -> Any:
    """``libcuda.so.1`` with the entry points below typed; ``driver().open_handle`` is the IPC open function."""
    if not _LIB:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(Handle), ctypes.c_uint64]
        open_fn = getattr(lib, "cuIpcOpenMemHandle_v2", None) or lib.cuIpcOpenMemHandle
        open_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), Handle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        lib.cuCtxSynchronize.argtypes = []
        lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.c_uint64]
        lib.open_handle = open_fn
        _LIB.append(lib)
    return _LIB[0]


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise DriverError(f"{what} failed with CUDA driver error {rc}")


def address_range(ptr: int) -> tuple[int, int]:
    """(base, size) of the allocation holding device address ``ptr``."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    check(driver().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr), "cuMemGetAddressRange")
    return base.value, size.value


def export_handle(base: int) -> str:
    """The 64-byte IPC handle of the allocation at ``base``, in hex (NULs included)."""
    handle = Handle()
    check(driver().cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
    return bytes(handle).hex()


def open_handle(hex_handle: str) -> int:
    """Map another process's allocation; its device address here (close it with :func:`close_handle`)."""
    handle = Handle.from_buffer_copy(bytes.fromhex(hex_handle))
    ptr = ctypes.c_uint64()
    check(driver().open_handle(ctypes.byref(ptr), handle, 1), "cuIpcOpenMemHandle")  # 1: lazy peer access
    return ptr.value


def close_handle(ptr: int) -> None:
    driver().cuIpcCloseMemHandle(ptr)


def synchronize() -> None:
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize")


def device_to_host(ptr: int, nbytes: int) -> bytes:
    buf = ctypes.create_string_buffer(nbytes)
    check(driver().cuMemcpyDtoH_v2(buf, ctypes.c_uint64(ptr), ctypes.c_size_t(nbytes)), "cuMemcpyDtoH")
    return buf.raw
