"""Softmax over the last dimension of a 2D tensor."""
import torch
import torch.nn as nn

ROWS = 32768
COLS = 4096


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "reduction",
    "library_op": "torch.softmax",
    "library_aten": ["aten._softmax", "aten.softmax"],
    "flops": "5 * ROWS * COLS",
    "bytes": "2 * ROWS * COLS * ELEM",
    "reduction_length": "COLS",
    "secret": {"count": 2, "ranges": {"ROWS": [16384, 32768, 512], "COLS": [3072, 16384, 64]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"ROWS": 16, "COLS": 256}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32768x4096", "set": {"ROWS": 32768, "COLS": 4096}, "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-16384x10000", "set": {"ROWS": 16384, "COLS": 10000}, "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
