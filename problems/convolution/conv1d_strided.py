"""1D convolution over NCL, kernel 5, stride 2, padding 2, with bias."""
import torch
import torch.nn as nn

N = 32
C = 256
K = 256
L = 16000


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=5, stride=2, padding=2, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(N, C, L)]


def get_init_inputs():
    return [C, K]


KERNELGATE = {
    "category": "convolution",
    "library_op": "torch.nn.functional.conv1d",
    "library_aten": ["aten.convolution", "aten._convolution", "aten.cudnn_convolution"],
    "flops": "2 * N * K * C * 5 * ((L - 1) // 2 + 1)",
    "bytes": "(N * C * L + K * C * 5 + K + N * K * ((L - 1) // 2 + 1)) * ELEM",
    "reduction_length": "C * 5",
    "secret": {
        "count": 2, "dtypes": ["float16", "bfloat16"], "tags": ["gpu"],
        "ranges": {"N": [32, 48, 8], "C": [256, 512, 64], "K": [256, 512, 64], "L": [12000, 20000, 16]},
    },
    "workloads": [
        {"name": "smoke", "set": {"N": 1, "C": 8, "K": 8, "L": 33}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32x256x16000-k256", "set": {"N": 32, "C": 256, "K": 256, "L": 16000},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-16x512x12001-k384", "set": {"N": 16, "C": 512, "K": 384, "L": 12001},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
