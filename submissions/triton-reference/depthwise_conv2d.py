"""Depthwise 3x3 convolution (padding 1, stride 1, bias) over NCHW, direct kernel.

Each program computes a BH x BW output tile of one (n, c) plane, where BW =
next_power_of_2(W) covers whole rows (so loads are contiguous along W) and BH
is a power of two picked to divide H when possible (BH * BW ~ 2048). The
nine taps are nine shifted, masked loads of the same input tile; the shift
dh * W + dw is a compile-time constant added to one precomputed pointer
tile, and the masks are outer products of row and column validity vectors.
Only the first touch of each input line comes from DRAM; the shifted
re-reads hit L1/L2, so traffic is ~ one read of x plus one write of y.
The nine weights and the bias are scalars per program; accumulation is fp32.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _dwconv3x3_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, H: tl.constexpr, W: tl.constexpr,
                      BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(0)
    tile_h = tl.program_id(1)
    c = plane % C
    rows = tile_h * BH + tl.arange(0, BH)
    cols = tl.arange(0, BW)
    base = tl.cast(plane, tl.int64) * (H * W)
    offs = rows[:, None] * W + cols[None, :]
    x_tile = x_ptr + base + offs
    acc = tl.zeros([BH, BW], dtype=tl.float32) + tl.load(b_ptr + c).to(tl.float32)
    for kh in tl.static_range(3):
        ih = rows + (kh - 1)
        row_ok = (ih >= 0) & (ih < H)
        for kw in tl.static_range(3):
            iw = cols + (kw - 1)
            col_ok = (iw >= 0) & (iw < W)
            wv = tl.load(w_ptr + c * 9 + (kh * 3 + kw)).to(tl.float32)
            v = tl.load(x_tile + ((kh - 1) * W + (kw - 1)), mask=row_ok[:, None] & col_ok[None, :], other=0.0)
            acc += v.to(tl.float32) * wv
    out_mask = (rows < H)[:, None] & (cols < W)[None, :]
    tl.store(y_ptr + base + offs, acc.to(y_ptr.dtype.element_ty), mask=out_mask)


def _pick_bh(H: int, BW: int) -> int:
    """Largest power-of-two row count with BH * BW <= 2048 that wastes the fewest rows of H."""
    best, best_eff = 1, 0.0
    bh = 1
    while bh * BW <= 2048:
        eff = H / (triton.cdiv(H, bh) * bh)
        if eff >= best_eff - 1e-9:
            best, best_eff = bh, eff
        bh *= 2
    return best


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N, C, H, W = x.shape
        y = torch.empty_like(x)
        bw = triton.next_power_of_2(W)
        bh = _pick_bh(H, bw)
        num_warps = min(8, max(1, bh * bw // 256))
        grid = (N * C, triton.cdiv(H, bh))
        _dwconv3x3_kernel[grid](x, self.conv.weight, self.conv.bias, y, C, H=H, W=W, BH=bh, BW=bw,
                                num_warps=num_warps)
        return y
