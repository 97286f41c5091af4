"""SwiGLU gate: silu(a) * b, elementwise over two tensors."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 8192
COLS = 11008


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.silu(a) * b


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "elementwise",
    "library_op": "torch.nn.functional.silu",
    "library_aten": ["aten.silu", "aten.sigmoid", "aten.mul"],
    "flops": "5 * ROWS * COLS",
    "bytes": "3 * ROWS * COLS * ELEM",
    "secret": {"count": 2, "ranges": {"ROWS": [8192, 32768, 256], "COLS": [4096, 12288, 64]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"ROWS": 16, "COLS": 256}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-8192x11008", "set": {"ROWS": 8192, "COLS": 11008}, "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-6000x11008", "set": {"ROWS": 6000, "COLS": 11008}, "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
