"""Depthwise 2D convolution over NCHW (groups = channels), 3x3 kernel, padding 1, with bias."""
import torch
import torch.nn as nn

N = 32
C = 256
H = 112
W = 112


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C]


KERNELGATE = {
    "category": "convolution",
    "library_op": "torch.nn.functional.conv2d",
    "library_aten": ["aten.convolution", "aten._convolution", "aten.cudnn_convolution", "aten._conv_depthwise2d"],
    "flops": "2 * N * C * 9 * H * W",
    "bytes": "(2 * N * C * H * W + 9 * C + C) * ELEM",
    "reduction_length": "9",
    "secret": {"count": 2, "ranges": {"N": [48, 64, 8], "C": [256, 512, 64], "H": [64, 128, 8], "W": [64, 128, 8]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"N": 1, "C": 8, "H": 8, "W": 8}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32x256x112x112", "set": {"N": 32, "C": 256, "H": 112, "W": 112},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-64x384x56x56", "set": {"N": 64, "C": 384, "H": 56, "W": 56},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
