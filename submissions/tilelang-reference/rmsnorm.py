"""RMSNorm over the last dimension (affine weight, no bias), one pass over memory, in TileLang.

Each block owns `rows` whole rows with `lanes` threads per row (the plan picks
the lane count that pads the row least while keeping at most 64 values per
thread: 4096 columns -> 256 lanes of 16 fp16 or fp32 values). The row is read
once with 16-byte vector loads into an fp32 register fragment, then:
  ms = T.reduce_sum(x * x) / C                  block reduction
  y  = x * rsqrt(ms + eps) * w                  written once in the input dtype
weight is read with vector loads and stays cached in L1/L2 across rows.
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
_ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
_EPS = 1e-6


def _plan(n_rows, n_cols, dtype, max_elems=64):
    """(vec, lanes, rows, padded) for a row kept in registers: least padding, then <= 32 values per thread."""
    vec = 16 // _ELEM_BYTES[dtype]
    while n_cols % vec:
        vec //= 2
    n_vec = n_cols // vec
    best = None
    for lanes in (32, 64, 128, 256, 512, 1024):
        per = -(-n_vec // lanes)
        if per * vec > max_elems and lanes < 1024:
            continue
        key = (round(per * lanes / n_vec, 2), per * vec > 32, abs(lanes.bit_length() - 9))
        if best is None or key < best[0]:
            best = (key, lanes, per)
    _, lanes, per = best
    rows = max(1, 256 // lanes)
    while n_rows % rows:
        rows //= 2
    return vec, lanes, rows, per * lanes * vec


def _row_layout(rows, width, lanes, vec):
    """Fragment layout for a (rows, width) tile: row i on threads [i*lanes, (i+1)*lanes),
    each thread holding vec consecutive columns out of every lanes*vec. Given explicitly
    because layout inference finds no layout for multi-row tiles of non-power-of-two width."""

    def forward(i, j):
        return i * lanes + (j // vec) % lanes, (j // (lanes * vec)) * vec + j % vec

    return T.Fragment((rows, width), forward_fn=forward)


@tilelang.jit(out_idx=[-1])
def rmsnorm_kernel(n_rows, n_cols, dtype, vec, lanes, rows, padded):
    @T.prim_func
    def main(
        X: T.Tensor((n_rows, n_cols), dtype),
        W: T.Tensor((n_cols,), dtype),
        Y: T.Tensor((n_rows, n_cols), dtype),
    ):
        with T.Kernel(n_rows // rows, threads=rows * lanes) as bx:
            xf = T.alloc_fragment((rows, padded), "float32")
            sq = T.alloc_fragment((rows, padded), "float32")
            rstd = T.alloc_fragment((rows,), "float32")
            T.annotate_layout({xf: _row_layout(rows, padded, lanes, vec), sq: _row_layout(rows, padded, lanes, vec)})
            for i, j in T.Parallel(rows, padded):
                xf[i, j] = T.if_then_else(j < n_cols, T.cast(X[bx * rows + i, j], "float32"), 0.0)
            for i, j in T.Parallel(rows, padded):
                sq[i, j] = xf[i, j] * xf[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(rows):
                rstd[i] = T.rsqrt(rstd[i] * (1.0 / n_cols) + _EPS)
            for i, j in T.Parallel(rows, padded):
                if j < n_cols:
                    Y[bx * rows + i, j] = T.cast(xf[i, j] * rstd[i] * T.cast(W[j], "float32"), dtype)

    return main


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(cols))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, x.shape[-1])
        dtype = _DTYPES[x.dtype]
        kernel = rmsnorm_kernel(x2.shape[0], x2.shape[1], dtype, *_plan(x2.shape[0], x2.shape[1], dtype))
        return kernel(x2, self.weight.contiguous()).view(x.shape)
