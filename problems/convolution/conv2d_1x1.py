"""Pointwise (1x1) 2D convolution over NCHW, with bias."""
import torch
import torch.nn as nn

N = 128
C = 256
K = 256
H = 56
W = 56


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C, K]


KERNELGATE = {
    "category": "convolution",
    "library_op": "torch.nn.functional.conv2d",
    "library_aten": ["aten.convolution", "aten._convolution", "aten.cudnn_convolution"],
    "flops": "2 * N * K * C * H * W",
    "bytes": "(N * C * H * W + K * C + K + N * K * H * W) * ELEM",
    "reduction_length": "C",
    "secret": {
        "count": 2, "dtypes": ["float16", "bfloat16"], "tags": ["gpu"],
        "ranges": {"N": [96, 160, 16], "C": [192, 384, 64], "K": [192, 384, 64], "H": [56, 80, 8], "W": [56, 80, 8]},
    },
    "workloads": [
        {"name": "smoke", "set": {"N": 1, "C": 8, "K": 8, "H": 8, "W": 8}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-128x256x56x56-k256", "set": {"N": 128, "C": 256, "K": 256, "H": 56, "W": 56},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-64x192x56x56-k384", "set": {"N": 64, "C": 192, "K": 384, "H": 56, "W": 56},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
