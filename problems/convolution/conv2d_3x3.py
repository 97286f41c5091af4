"""2D convolution over NCHW, 3x3 kernel, stride 1, padding 1, with bias."""
import torch
import torch.nn as nn

N = 64
C = 128
K = 128
H = 112
W = 112


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=True)

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
    "flops": "2 * N * K * C * 9 * H * W",
    "bytes": "(N * C * H * W + K * C * 9 + K + N * K * H * W) * ELEM",
    "reduction_length": "C * 9",
    "secret": {
        "count": 2, "dtypes": ["float16", "bfloat16"], "tags": ["gpu"],
        "ranges": {"N": [64, 128, 16], "C": [128, 256, 64], "K": [128, 256, 64],
                   "H": [80, 112, 8], "W": [80, 112, 8]},
    },
    "workloads": [
        {"name": "smoke", "set": {"N": 1, "C": 8, "K": 8, "H": 8, "W": 8}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-64x128x112x112-k128", "set": {"N": 64, "C": 128, "K": 128, "H": 112, "W": 112},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-128x256x56x56-k256", "set": {"N": 128, "C": 256, "K": 256, "H": 56, "W": 56},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
