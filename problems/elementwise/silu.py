"""SiLU (x * sigmoid(x)) applied elementwise."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 16384
COLS = 8192


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "elementwise",
    "library_op": "torch.nn.functional.silu",
    "library_aten": ["aten.silu", "aten.sigmoid"],
    "flops": "4 * ROWS * COLS",
    "bytes": "2 * ROWS * COLS * ELEM",
    "secret": {"count": 2, "ranges": {"ROWS": [12288, 32768, 256], "COLS": [4096, 16384, 64]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"ROWS": 16, "COLS": 256}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-16384x8192", "set": {"ROWS": 16384, "COLS": 8192}, "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-12000x11008", "set": {"ROWS": 12000, "COLS": 11008}, "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
