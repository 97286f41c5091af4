"""Elementwise relu(x + y) of two tensors."""
import torch
import torch.nn as nn

ROWS = 16384
COLS = 8192


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + y)


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "elementwise",
    "library_op": "torch.relu",
    "library_aten": ["aten.relu", "aten.add"],
    "flops": "2 * ROWS * COLS",
    "bytes": "3 * ROWS * COLS * ELEM",
    "secret": {"count": 2, "ranges": {"ROWS": [8192, 32768, 256], "COLS": [4096, 12288, 64]},
               "dtypes": ["float16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"ROWS": 16, "COLS": 256}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-16384x8192", "set": {"ROWS": 16384, "COLS": 8192}, "dtype": "float16", "tags": ["gpu"]},
    ],
}
