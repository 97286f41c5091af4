"""Tall-skinny matrix multiplication C = A @ B: many rows, few output columns."""
import torch
import torch.nn as nn

M = 32768
N = 192
K = 4096


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "gemm",
    "library_op": "torch.matmul",
    "library_aten": ["aten.mm", "aten.addmm", "aten.matmul"],
    "flops": "2 * M * N * K",
    "bytes": "(M * K + K * N + M * N) * ELEM",
    "reduction_length": "K",
    "secret": {"count": 2, "ranges": {"M": [24576, 65536, 1024], "N": [128, 256, 8], "K": [4096, 8192, 64]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"M": 128, "N": 24, "K": 64}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-32768x192x4096", "set": {"M": 32768, "N": 192, "K": 4096},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-24576x200x5000", "set": {"M": 24576, "N": 200, "K": 5000},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
