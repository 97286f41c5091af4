"""BatchNorm in inference mode (running statistics) over NCHW, with affine weight and bias."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N = 32
C = 256
H = 112
W = 112


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=1e-5)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C]


KERNELGATE = {
    "category": "normalization",
    "library_op": "torch.nn.functional.batch_norm",
    "library_aten": ["aten.native_batch_norm", "aten._native_batch_norm_legit_no_training",
                     "aten._native_batch_norm_legit", "aten.cudnn_batch_norm"],
    "flops": "4 * N * C * H * W",
    "bytes": "(2 * N * C * H * W + 4 * C) * ELEM",
    "secret": {"count": 2, "ranges": {"N": [96, 160, 16], "C": [256, 384, 32], "H": [56, 112, 8], "W": [56, 112, 8]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"N": 2, "C": 8, "H": 8, "W": 8}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32x256x112x112", "set": {"N": 32, "C": 256, "H": 112, "W": 112},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-128x192x56x56", "set": {"N": 128, "C": 192, "H": 56, "W": 56},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
