"""GELU (exact, erf form) applied elementwise."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 16384
COLS = 8192


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "elementwise",
    "library_op": "torch.nn.functional.gelu",
    "library_aten": ["aten.gelu", "aten.erf"],
    "flops": "8 * ROWS * COLS",
    "bytes": "2 * ROWS * COLS * ELEM",
    "secret": {"count": 2, "ranges": {"ROWS": [12288, 32768, 256], "COLS": [4096, 16384, 64]},
               "dtypes": ["float16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"ROWS": 16, "COLS": 256}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-16384x8192", "set": {"ROWS": 16384, "COLS": 8192}, "dtype": "float16", "tags": ["gpu"]},
        {"name": "fp32-8192x8192", "set": {"ROWS": 8192, "COLS": 8192}, "dtype": "float32", "tags": ["gpu"]},
    ],
}
