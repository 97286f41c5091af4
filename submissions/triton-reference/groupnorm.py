"""GroupNorm over NCHW (per-channel affine), one fused persistent kernel.

In NCHW a group (n, g) is one contiguous run of (C/G) * H * W elements, so a
program can own whole groups: a persistent grid of 2 programs per SM walks
the groups, and for each group

1. streams it once in TILE-sized chunks accumulating shifted fp32 sum and
   sum of squares in per-lane vectors (shift = the group's first element, so
   the variance has no catastrophic cancellation for inputs with a large
   mean), reduced with tl.sum at the end;
2. streams it again *backwards* and writes y = x * scale + shift. Walking
   back first re-reads the most recently loaded chunks, which are still in
   L2, so the second read mostly hits L2; with only ~2 groups per SM in
   flight the working set stays well inside the 60 MB L2.

TILE = min(8192, largest power of two <= H*W), so a chunk spans at most two
channels and the per-channel affine is a select between two precomputed
(scale, shift) pairs rather than a per-element division. 8 warps, 16-byte
vector accesses. Total DRAM traffic is close to one read and one write.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _groupnorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, num_groups, G, CPG, HW, group_size, eps,
                      TILE: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    lanes = tl.arange(0, TILE)
    n_tiles = tl.cdiv(group_size, TILE)
    for grp in range(pid, num_groups, nprog):
        base = tl.cast(grp, tl.int64) * group_size
        ref = tl.load(x_ptr + base).to(tl.float32)
        acc_s = tl.zeros([TILE], dtype=tl.float32)
        acc_q = tl.zeros([TILE], dtype=tl.float32)
        for t in range(0, n_tiles):
            idx = t * TILE + lanes
            m = idx < group_size
            v = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32)
            d = tl.where(m, v - ref, 0.0)
            acc_s += d
            acc_q += d * d
        mean_d = tl.sum(acc_s, axis=0) / group_size
        var = tl.maximum(tl.sum(acc_q, axis=0) / group_size - mean_d * mean_d, 0.0)
        mean = ref + mean_d
        rstd = 1.0 / tl.sqrt(var + eps)
        ch_base = (grp % G) * CPG
        for t in range(0, n_tiles):
            start = (n_tiles - 1 - t) * TILE
            idx = start + lanes
            m = idx < group_size
            ch0 = start // HW
            ch1 = tl.minimum(ch0 + 1, CPG - 1)
            s0 = tl.load(w_ptr + ch_base + ch0).to(tl.float32) * rstd
            s1 = tl.load(w_ptr + ch_base + ch1).to(tl.float32) * rstd
            t0 = tl.load(b_ptr + ch_base + ch0).to(tl.float32) - mean * s0
            t1 = tl.load(b_ptr + ch_base + ch1).to(tl.float32) - mean * s1
            second = idx >= (ch0 + 1) * HW
            scale = tl.where(second, s1, s0)
            shift = tl.where(second, t1, t0)
            v = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32)
            tl.store(y_ptr + base + idx, (v * scale + shift).to(y_ptr.dtype.element_ty), mask=m)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class ModelNew(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.groups = groups
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N, C = x.shape[0], x.shape[1]
        HW = x[0, 0].numel()
        G = self.groups
        cpg = C // G
        group_size = cpg * HW
        num_groups = N * G
        y = torch.empty_like(x)
        tile = min(8192, 1 << (HW.bit_length() - 1))
        num_warps = min(8, max(1, tile // 256))
        grid = (min(num_groups, 2 * _num_sms(x.device)),)
        _groupnorm_kernel[grid](x, self.weight, self.bias, y, num_groups, G, cpg, HW, group_size, self.eps,
                                TILE=tile, num_warps=num_warps)
        return y
