"""Sum over the last dimension of a 2D tensor."""
import torch
import torch.nn as nn

ROWS = 32768
COLS = 8192


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "reduction",
    "library_op": "torch.sum",
    "library_aten": ["aten.sum"],
    "flops": "ROWS * COLS",
    "bytes": "(ROWS * COLS + ROWS) * ELEM",
    "reduction_length": "COLS",
    "secret": {"count": 2, "ranges": {"ROWS": [16384, 32768, 512], "COLS": [6144, 32768, 64]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"ROWS": 16, "COLS": 256}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32768x8192", "set": {"ROWS": 32768, "COLS": 8192}, "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-4096x50000", "set": {"ROWS": 4096, "COLS": 50000}, "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
