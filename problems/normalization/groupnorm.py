"""GroupNorm over (C/G, H, W) of an NCHW tensor, with per-channel affine weight and bias."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N = 32
C = 320
H = 96
W = 96
G = 32


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.groups = groups
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.groups, self.weight, self.bias, 1e-5)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C, G]


KERNELGATE = {
    "category": "normalization",
    "library_op": "torch.nn.functional.group_norm",
    "library_aten": ["aten.native_group_norm"],
    "flops": "8 * N * C * H * W",
    "bytes": "(2 * N * C * H * W + 2 * C) * ELEM",
    "reduction_length": "C // G * H * W",
    "secret": {"count": 2, "ranges": {"N": [192, 256, 16], "C": [256, 640, 64], "H": [32, 64, 8], "W": [32, 64, 8]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"N": 2, "C": 8, "H": 8, "W": 8, "G": 4}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32x320x96x96-g32", "set": {"N": 32, "C": 320, "H": 96, "W": 96, "G": 32},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-32x640x64x64-g32", "set": {"N": 32, "C": 640, "H": 64, "W": 64, "G": 32},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
