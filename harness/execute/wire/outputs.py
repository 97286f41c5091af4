"""Committed outputs: the descriptors a worker sends and the raw file format, with the checks both sides share.

A worker commits a call's outputs in one of two forms (:class:`harness.execute.wire.protocol.Committed`):

* a raw file in its hand-off folder (any device): one JSON header line, a list of ``{dtype, shape, stride,
  nbytes}``, then each tensor's bytes, the span of its strides (:func:`span_elements`), in order;
* CUDA IPC descriptors (a GPU, the default there): per output the header's fields plus the 64-byte
  ``cuIpcGetMemHandle`` handle of its allocation (hex) and the offset of its first byte in it.

Nothing here deserializes objects: descriptors are plain JSON, checked field by field
(:func:`check_descriptors`: an honest worker never sends a malformed one), and then against the reference's
outputs (:func:`check_layout`) *before* a byte is read or copied, so an output the candidate shaped to make the
checker allocate (a 4-byte tensor expanded with stride 0 to 2**38 elements) is the candidate's wrong output,
not the checker's failure.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_OUTPUTS = 64
MAX_BYTES = 1 << 40
MAX_HEADER_BYTES = 1 << 16
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
          "complex64", "complex128", "float8_e4m3fn", "float8_e5m2")
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
            "int64": 8, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1,
            "float8_e5m2": 1}
SPAN_SLACK = 2
"""An output may span this many times its element count (padded rows of an honest strided layout) ..."""
SPAN_SLACK_BYTES = 64 << 20
"""... or its own bytes plus this many: a small output in a padded buffer (a GEMM's 24 columns in tiles of 64)
spans several times its elements and costs the checker nothing; a span beyond both bounds is storage the checker
would copy for nothing."""


class CommitError(Exception):
    """The committed memory cannot be read (the CUDA driver refused, a file vanished): not the candidate's doing
    as far as the reader can tell."""


class CommitMalformed(CommitError):
    """Descriptors or a file that an honest worker never writes (malformed, inconsistent, naming bytes outside
    their allocation): a protocol violation."""


class LayoutMismatch(Exception):
    """Well-formed outputs whose number, shape, dtype or layout is not the reference's: the candidate's wrong
    output. ``status`` is INCORRECT_SHAPE or INCORRECT_DTYPE."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def span_elements(shape: list[int], stride: list[int]) -> int:
    """Elements from a strided tensor's first to its last, inclusive (0 when it has none)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride))


def overlaps(shape: list[int], stride: list[int]) -> bool:
    """Whether two different indices of a strided tensor name the same element (a stride of 0 on a dimension of
    more than one element, or windows that overlap)."""
    dims = sorted((st, n) for n, st in zip(shape, stride) if n > 1)
    reach = 0  # the largest offset reachable with the dimensions of smaller strides
    for st, n in dims:
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False


def check_descriptors(descs: Any, need_handle: bool = True) -> list[dict]:
    """Validate untrusted descriptors field by field; raise :class:`CommitMalformed` naming the bad field."""
    if not isinstance(descs, (list, tuple)) or len(descs) > MAX_OUTPUTS:
        raise CommitMalformed(f"output descriptors must be a list of at most {MAX_OUTPUTS}")
    keys = {"dtype", "shape", "stride", "nbytes", "handle", "offset"} if need_handle else {"dtype", "shape", "stride",
                                                                                         "nbytes"}
    out = []
    for i, d in enumerate(descs):
        if not isinstance(d, dict) or set(d) != keys:
            raise CommitMalformed(f"output {i}: descriptor must have exactly {', '.join(sorted(keys))}")
        if d["dtype"] not in DTYPES:
            raise CommitMalformed(f"output {i}: dtype {str(d['dtype'])[:40]!r} is not one of {', '.join(DTYPES)}")
        shape, stride = d["shape"], d["stride"]
        if not isinstance(shape, list) or len(shape) > 16 or not all(type(n) is int and n >= 0 for n in shape):
            raise CommitMalformed(f"output {i}: shape must be a list of at most 16 non-negative integers")
        if not isinstance(stride, list) or len(stride) != len(shape) or \
                not all(type(n) is int and 0 <= n <= MAX_BYTES for n in stride):
            raise CommitMalformed(f"output {i}: stride must be a list of {len(shape)} non-negative integers")
        itemsize = ITEMSIZE[d["dtype"]]
        if math.prod(shape) > MAX_BYTES:
            raise CommitMalformed(f"output {i}: shape {shape} has more than {MAX_BYTES} elements")
        if type(d["nbytes"]) is not int or d["nbytes"] != span_elements(shape, stride) * itemsize \
                or d["nbytes"] > MAX_BYTES:
            raise CommitMalformed(f"output {i}: nbytes does not match shape {shape}, stride {stride} x {itemsize} "
                                  "byte(s)")
        if need_handle:
            if type(d["offset"]) is not int or d["offset"] < 0 or d["offset"] % itemsize:
                # misaligned data would make the checker's own kernels fault (and poison its CUDA context)
                raise CommitMalformed(f"output {i}: offset must be a non-negative multiple of {itemsize}")
            if d["nbytes"] and (not isinstance(d["handle"], str) or len(d["handle"]) != 128):
                raise CommitMalformed(f"output {i}: handle must be 64 bytes in hex")
        out.append(d)
    return out


def check_layout(descs: list[dict], expected: list[tuple[list[int], str]]) -> None:
    """The checked descriptors against the reference's outputs (shape, dtype name), before anything is read;
    raise :class:`LayoutMismatch`. Strided layouts are accepted as long as no two elements share memory and the
    span stays within :data:`SPAN_SLACK` times the elements or :data:`SPAN_SLACK_BYTES` more than them."""
    if len(descs) != len(expected):
        raise LayoutMismatch("INCORRECT_SHAPE", f"{len(descs)} output(s), the reference has {len(expected)}")
    for i, (d, (shape, dtype)) in enumerate(zip(descs, expected)):
        if list(d["shape"]) != list(shape):
            raise LayoutMismatch("INCORRECT_SHAPE", f"output {i}: shape {list(d['shape'])}, the reference's is "
                                                    f"{list(shape)}")
        if d["dtype"] != dtype:
            raise LayoutMismatch("INCORRECT_DTYPE", f"output {i}: dtype {d['dtype']}, the reference's is {dtype}")
        if overlaps(d["shape"], d["stride"]):
            raise LayoutMismatch("INCORRECT_SHAPE", f"output {i}: strides {d['stride']} make elements share memory "
                                                    "(a stride-0 or overlapping view): each element must be its own")
        numel = math.prod(d["shape"])
        span = span_elements(d["shape"], d["stride"])
        if span > SPAN_SLACK * max(1, numel) and (span - numel) * ITEMSIZE[d["dtype"]] > SPAN_SLACK_BYTES:
            raise LayoutMismatch("INCORRECT_SHAPE", f"output {i}: strides {d['stride']} spread {numel} elements over "
                                                    f"{span}")


def file_header(descs: list[dict]) -> bytes:
    """The raw file's first line for outputs described by ``descs``."""
    return json.dumps([{k: d[k] for k in ("dtype", "shape", "stride", "nbytes")} for d in descs]).encode() + b"\n"


def parse_header(head: bytes) -> tuple[list[dict], int]:
    """(descriptors, header length) of a raw file's beginning; raise :class:`CommitMalformed`."""
    end = head.find(b"\n")
    if end < 0:
        raise CommitMalformed(f"the committed file has no header line in its first {len(head)} bytes")
    try:
        header = json.loads(head[:end])
    except ValueError:
        raise CommitMalformed("the committed file's header is not JSON") from None
    return check_descriptors(header, need_handle=False), end + 1
