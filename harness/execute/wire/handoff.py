"""Handing a candidate's outputs to the trusted checker.

Two ways, chosen per run (``kernelgate run --handoff``):

* ``file`` (any device): the worker writes its outputs' bytes into its
  scratch folder (:meth:`OutputReader.write`: a JSON header line, then each tensor's
  bytes) and reports their BLAKE2b digest over the channel; the checker
  reads the file only if the digest matches (:func:`read_raw`), so a file
  rewritten after the worker read the memory is a tampered hand-off.
  Every round copies the outputs GPU -> host -> file -> host -> GPU: on the
  H200 host, for a 268 MB output, 0.3 s to save and 0.2 s to load and compare
  per round (``leaderboards/h200-2026-11-30-s3/file-handoff/``, measured with
  the ``torch.save`` format this replaced).
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

The worker reads its outputs by address (:class:`OutputReader`): their
pointer, shape and strides through ``torch._C.TensorBase``'s own C methods,
taken before the candidate is imported, and their bytes with the CUDA
driver or ``ctypes``; never through PyTorch's dispatcher, ``torch.save`` or
``pickle``. Bug it stops: the worker's trusted thread saved the outputs with
``torch.save``, whose pickler consults ``copyreg.dispatch_table``, a global
registry the candidate can fill; the candidate's reducer ran only for the
calls being checked, computed their right output then, and a forward that
did no work was PASSED (session 16's red team). A kernel registered with
``torch.library`` for ``aten::detach`` or ``aten::_to_copy`` would have done
the same through the dispatcher.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
from typing import Any

MAX_OUTPUTS = 64
MAX_BYTES = 1 << 40
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
          "complex64", "complex128", "float8_e4m3fn", "float8_e5m2")


class HandoffError(Exception):
    """The memory the descriptors name cannot be read (the CUDA driver refused)."""


class HandoffTampered(HandoffError):
    """The descriptors are not what :meth:`OutputReader.export` writes: malformed, or naming bytes
    outside the exported allocation. An honest worker never sends these."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_LIB: list[Any] = []


def _cuda() -> Any:
    """The CUDA driver library with the IPC, copy and synchronize entry points typed (loaded once)."""
    if not _LIB:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        open_fn = getattr(lib, "cuIpcOpenMemHandle_v2", None) or lib.cuIpcOpenMemHandle
        open_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        lib.cuCtxSynchronize.argtypes = []
        lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.c_uint64]
        _LIB.extend([lib, open_fn])
    return _LIB[0]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise HandoffError(f"{what} failed with CUDA driver error {rc}")


class NotPlain(Exception):
    """An output the worker will not read by address: not exactly ``torch.Tensor``, not strided, a view with a
    lazy conjugate or negation, a tensor subclass's Python dispatch key, or a dtype outside :data:`DTYPES`."""


def span_elements(shape: list[int], stride: list[int]) -> int:
    """Elements from a strided tensor's first to its last, inclusive (0 when it has none)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride))


class OutputReader:
    """The worker's reads of a candidate's tensors, by address. Built before the candidate is imported: it holds
    the C methods it calls, so replacing ``torch.Tensor.detach`` (or anything else the candidate can reach) does
    not change what it reads."""

    def __init__(self, torch: Any):
        tb = torch._C.TensorBase
        self.tensor_type = torch.Tensor
        self.data_ptr, self.stride, self.element_size = tb.data_ptr, tb.stride, tb.element_size
        self.shape, self.dtype, self.layout = tb.shape.__get__, tb.dtype.__get__, tb.layout.__get__
        self.is_cuda, self.is_conj, self.is_neg = tb.is_cuda.__get__, tb.is_conj, tb.is_neg
        self.keys, self.python_key = torch._C._dispatch_keys, torch._C.DispatchKey.Python
        self.strided = torch.strided
        self.names = {getattr(torch, name): name for name in DTYPES}
        self.string_at, self.blake2b = ctypes.string_at, hashlib.blake2b

    def describe(self, t: Any) -> dict:
        """dtype name, shape, strides (elements), bytes spanned, address and device of a plain tensor, or
        :class:`NotPlain`."""
        if type(t) is not self.tensor_type:
            raise NotPlain(f"an output of type {type(t).__qualname__[:60]}, not torch.Tensor")
        if self.layout(t) is not self.strided or self.is_conj(t) or self.is_neg(t) or \
                self.keys(t).has(self.python_key):
            raise NotPlain("an output that is not a plain strided tensor (sparse, a lazy conjugate or negation, "
                           "or a subclass's Python dispatch key)")
        name = self.names.get(self.dtype(t))
        if name is None:
            raise NotPlain(f"an output of dtype {self.dtype(t)}, not one of {', '.join(DTYPES)}")
        shape, stride = list(self.shape(t)), list(self.stride(t))
        return {"dtype": name, "shape": shape, "stride": stride,
                "nbytes": span_elements(shape, stride) * self.element_size(t), "ptr": self.data_ptr(t),
                "cuda": self.is_cuda(t)}

    def export(self, outs: list) -> tuple[list[dict], list] | None:
        """Descriptors for ``outs`` and the tensors to keep alive until the reply, or None when the export is
        not possible here (no CUDA driver, memory not from ``cudaMalloc``); the caller then writes a file.
        Raises :class:`NotPlain`."""
        described = [self.describe(o) for o in outs]
        if not all(d["cuda"] for d in described):
            return None
        try:
            lib = _cuda()
            if described:
                _check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
            descs = []
            for d in described:
                desc = {"dtype": d["dtype"], "shape": d["shape"], "stride": d["stride"], "nbytes": d["nbytes"],
                        "handle": "", "offset": 0}
                if d["nbytes"]:
                    base, size, handle = ctypes.c_uint64(), ctypes.c_size_t(), _Handle()
                    _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), d["ptr"]),
                           "cuMemGetAddressRange")
                    _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), base.value), "cuIpcGetMemHandle")
                    desc.update(handle=bytes(handle).hex(), offset=d["ptr"] - base.value)  # all 64 bytes, NULs too
                descs.append(desc)
            return descs, list(outs)
        except (OSError, AttributeError, HandoffError):
            return None

    def write(self, outs: list, path: Any) -> str:
        """Write ``outs``'s bytes to ``path`` (the :func:`read_raw` format); returns their digest. Raises
        :class:`NotPlain`, :class:`HandoffError` (the driver refused a copy) or OSError."""
        described = [self.describe(o) for o in outs]
        header = [{k: d[k] for k in ("dtype", "shape", "stride", "nbytes")} for d in described]
        digest = self.blake2b(digest_size=32)
        with open(path, "wb") as f:
            line = json.dumps(header).encode() + b"\n"
            f.write(line)
            digest.update(line)
            if any(d["cuda"] for d in described):
                _check(_cuda().cuCtxSynchronize(), "cuCtxSynchronize")
            for d in described:
                data = self._bytes(d)
                f.write(data)
                digest.update(data)
        return digest.hexdigest()

    def _bytes(self, d: dict) -> bytes:
        if not d["nbytes"]:
            return b""
        if not d["cuda"]:
            return self.string_at(d["ptr"], d["nbytes"])
        buf = ctypes.create_string_buffer(d["nbytes"])
        _check(_cuda().cuMemcpyDtoH_v2(buf, ctypes.c_uint64(d["ptr"]), ctypes.c_size_t(d["nbytes"])),
               "cuMemcpyDtoH")
        return buf.raw


def read_raw(path: str, digest: str | None) -> list:
    """Checker side: the tensors :meth:`OutputReader.write` wrote to ``path``, on the CPU, after checking the
    file's digest against the one the worker reported; raises :class:`HandoffTampered` or :class:`HandoffError`."""
    import torch

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise HandoffError(f"the handed-off file could not be read ({exc.strerror})") from None
    if not isinstance(digest, str) or hashlib.blake2b(data, digest_size=32).hexdigest() != digest:
        raise HandoffTampered("the handed-off file's digest is not the one the worker reported when it wrote it "
                              "(the file was rewritten)")
    end = data.find(b"\n")
    try:
        header = json.loads(data[:end])
    except ValueError:
        raise HandoffTampered("the handed-off file's header is not JSON") from None
    descs = check_descriptors([{**h, "handle": "", "offset": 0} for h in header] if isinstance(header, list)
                              else header, need_handle=False)
    outs, pos = [], end + 1
    for i, d in enumerate(descs):
        chunk = data[pos:pos + d["nbytes"]]
        if len(chunk) != d["nbytes"]:
            raise HandoffTampered(f"output {i}: the file ends before its {d['nbytes']} bytes")
        pos += d["nbytes"]
        outs.append(_strided(torch.frombuffer(bytearray(chunk), dtype=torch.uint8) if chunk else
                             torch.empty(0, dtype=torch.uint8), d))
    if pos != len(data):
        raise HandoffTampered(f"the handed-off file has {len(data) - pos} byte(s) after its last output")
    return outs


def _strided(raw: Any, d: dict) -> Any:
    """A contiguous tensor with ``d``'s dtype and shape from the bytes ``raw`` its strides span (a fresh copy)."""
    import torch

    dtype = getattr(torch, d["dtype"])
    if not d["nbytes"]:
        return torch.empty(d["shape"], dtype=dtype, device=raw.device)
    return raw.view(dtype).as_strided(d["shape"], d["stride"]).contiguous()


def check_descriptors(descs: Any, need_handle: bool = True) -> list[dict]:
    """Validate untrusted descriptors field by field; raise :class:`HandoffTampered` naming the bad field."""
    if not isinstance(descs, list) or len(descs) > MAX_OUTPUTS:
        raise HandoffTampered(f"output descriptors must be a list of at most {MAX_OUTPUTS}")
    import torch

    for i, d in enumerate(descs):
        if not isinstance(d, dict) or set(d) != {"dtype", "shape", "stride", "nbytes", "handle", "offset"}:
            raise HandoffTampered(f"output {i}: descriptor must have exactly dtype, shape, stride, nbytes, handle, "
                                  "offset")
        if d["dtype"] not in DTYPES:
            raise HandoffTampered(f"output {i}: dtype {str(d['dtype'])[:40]!r} is not one of {', '.join(DTYPES)}")
        shape, stride = d["shape"], d["stride"]
        if not isinstance(shape, list) or len(shape) > 16 or not all(type(n) is int and n >= 0 for n in shape):
            raise HandoffTampered(f"output {i}: shape must be a list of at most 16 non-negative integers")
        if not isinstance(stride, list) or len(stride) != len(shape) or \
                not all(type(n) is int and 0 <= n <= MAX_BYTES for n in stride):
            raise HandoffTampered(f"output {i}: stride must be a list of {len(shape)} non-negative integers")
        itemsize = torch.empty((), dtype=getattr(torch, d["dtype"])).element_size()
        span = span_elements(shape, stride)
        if type(d["nbytes"]) is not int or d["nbytes"] != span * itemsize or d["nbytes"] > MAX_BYTES:
            raise HandoffTampered(f"output {i}: nbytes does not match shape {shape}, stride {stride} x {itemsize} "
                                  "byte(s)")
        if math.prod(shape) > MAX_BYTES:
            raise HandoffTampered(f"output {i}: shape {shape} has more than {MAX_BYTES} elements")
        if type(d["offset"]) is not int or d["offset"] < 0 or d["offset"] % itemsize:
            # misaligned data would make the checker's own kernels fault (and poison its CUDA context)
            raise HandoffTampered(f"output {i}: offset must be a non-negative multiple of {itemsize}")
        if need_handle and d["nbytes"] and (not isinstance(d["handle"], str) or len(d["handle"]) != 128):
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
        if not d["nbytes"]:
            outs.append(torch.empty(d["shape"], dtype=getattr(torch, d["dtype"]), device="cuda"))
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
            outs.append(_strided(view.clone(), d))  # byte copy first: fresh, aligned memory
            torch.cuda.synchronize()
            del view
        finally:
            lib.cuIpcCloseMemHandle(ptr.value)
    return outs
