"""Maximum (values only) over the last dimension of a 2D tensor, one row per program.

The row is streamed in TILE = min(next_power_of_2(cols), 8192) chunks into a
per-lane running maximum (padding lanes load -inf) and reduced once with
tl.max at the end; rows of up to 8192 columns are a single chunk. num_warps =
TILE / 512 clamped to 4..16 for several 16-byte loads per thread. The max is
exact in the input dtype, and fp32 holds every fp16/bf16 value exactly.
Every element is read once: traffic rows * cols * ELEM plus the row maxima.
The row length is a compile-time constant, so row starts have known
alignment (e.g. 3000 bf16 columns = 16-byte aligned rows) and loads stay
16-byte vectors for widths that are not multiples of 16.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_TILE = 8192


@triton.jit
def _row_max_kernel(x_ptr, y_ptr, N_COLS: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, TILE)
    x_row = x_ptr + row * N_COLS
    acc = tl.full([TILE], -float("inf"), tl.float32)
    for start in range(0, N_COLS, TILE):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < N_COLS, other=-float("inf")).to(tl.float32)
        acc = tl.maximum(acc, x)
    tl.store(y_ptr + row, tl.max(acc, axis=0).to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        tile = min(triton.next_power_of_2(n_cols), MAX_TILE)
        num_warps = min(16, max(4, tile // 512))
        _row_max_kernel[(rows,)](x, y, N_COLS=n_cols, TILE=tile, num_warps=num_warps)
        return y
