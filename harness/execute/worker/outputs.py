"""The worker's commit of a call's outputs (or inputs): where the checker will read them
(:mod:`harness.execute.wire.outputs` has the format).

The worker reads its tensors by address (:class:`OutputReader`): pointer, shape and strides through
``torch._C.TensorBase``'s own C methods, taken before the candidate is imported; bytes with ``ctypes`` or the
CUDA driver. Never through PyTorch's dispatcher, ``torch.save`` or ``pickle``, whose hooks
(``copyreg.dispatch_table``, ``torch.library`` kernels for ``aten::detach``) candidate code can fill. That keeps
the commit from running candidate code; what is committed is a claim all the same, read by the checker while
the worker is stopped (:mod:`harness.execute.parent.freeze`).
"""

from __future__ import annotations

import ctypes
from typing import Any

from harness.execute.wire.outputs import DTYPES, file_header, span_elements


class NotPlain(Exception):
    """An output the worker will not read by address: not exactly ``torch.Tensor``, not strided, a view with a
    lazy conjugate or negation, a tensor subclass's Python dispatch key, or a dtype outside :data:`DTYPES`."""


class OutputReader:
    """Reads a candidate's tensors by address. Built before the candidate is imported: it holds the C methods it
    calls, so replacing ``torch.Tensor.detach`` (or anything else the candidate can reach) does not change what
    it reads."""

    def __init__(self, torch: Any):
        tb = torch._C.TensorBase
        self.tensor_type = torch.Tensor
        self.data_ptr, self.stride, self.element_size = tb.data_ptr, tb.stride, tb.element_size
        self.shape, self.dtype, self.layout = tb.shape.__get__, tb.dtype.__get__, tb.layout.__get__
        self.is_cuda, self.is_conj, self.is_neg = tb.is_cuda.__get__, tb.is_conj, tb.is_neg
        self.keys, self.python_key = torch._C._dispatch_keys, torch._C.DispatchKey.Python
        self.strided = torch.strided
        self.names = {getattr(torch, name): name for name in DTYPES}
        self.string_at = ctypes.string_at

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

    def export(self, outs: list) -> list[dict] | None:
        """IPC descriptors for ``outs`` (device memory; the caller keeps the tensors alive until released), or
        None when an output is on the host or the driver cannot export it (the caller then writes a file).
        Raises :class:`NotPlain`."""
        from harness.execute.shared import cuda_ipc

        described = [self.describe(o) for o in outs]
        if not all(d["cuda"] for d in described):
            return None
        handles: dict[int, str] = {}  # one export per allocation: a batch's outputs share a few
        try:
            cuda_ipc.synchronize()
            descs = []
            for d in described:
                desc = {"dtype": d["dtype"], "shape": d["shape"], "stride": d["stride"], "nbytes": d["nbytes"],
                        "handle": "", "offset": 0}
                if d["nbytes"]:
                    base, _size = cuda_ipc.address_range(d["ptr"])
                    if base not in handles:
                        handles[base] = cuda_ipc.export_handle(base)
                    desc.update(handle=handles[base], offset=d["ptr"] - base)
                descs.append(desc)
            return descs
        except (OSError, AttributeError, cuda_ipc.DriverError):
            return None

    def write(self, outs: list, path: str) -> None:
        """Write ``outs``'s bytes to ``path`` in the raw format. Raises :class:`NotPlain`,
        :class:`harness.execute.shared.cuda_ipc.DriverError` (a device copy was refused) or OSError."""
        described = [self.describe(o) for o in outs]
        with open(path, "wb") as f:
            f.write(file_header(described))
            if any(d["cuda"] for d in described):
                from harness.execute.shared import cuda_ipc

                cuda_ipc.synchronize()
            for d in described:
                f.write(self._bytes(d))

    def _bytes(self, d: dict) -> bytes:
        if not d["nbytes"]:
            return b""
        if not d["cuda"]:
            return self.string_at(d["ptr"], d["nbytes"])
        from harness.execute.shared import cuda_ipc

        return cuda_ipc.device_to_host(d["ptr"], d["nbytes"])
