"""LayerNorm over the last dimension, with affine weight and bias."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 32768
COLS = 4096


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(cols))
        self.bias = nn.Parameter(0.5 * torch.randn(cols))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, 1e-5)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [COLS]


KERNELGATE = {
    "category": "normalization",
    "library_op": "torch.nn.functional.layer_norm",
    "library_aten": ["aten.native_layer_norm"],
    "flops": "8 * ROWS * COLS",
    "bytes": "(2 * ROWS * COLS + 2 * COLS) * ELEM",
    "reduction_length": "COLS",
    "secret": {"count": 2, "ranges": {"ROWS": [32768, 65536, 1024], "COLS": [2048, 8192, 64]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"ROWS": 16, "COLS": 256}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32768x4096", "set": {"ROWS": 32768, "COLS": 4096}, "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-65536x2560", "set": {"ROWS": 65536, "COLS": 2560}, "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
