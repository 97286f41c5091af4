"""Batched matrix multiplication C[i] = A[i] @ B[i]."""
import torch
import torch.nn as nn

BATCH = 16
M = 2048
N = 2048
K = 2048


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []


KERNELGATE = {
    "category": "gemm",
    "library_op": "torch.bmm",
    "library_aten": ["aten.bmm", "aten.baddbmm", "aten.matmul"],
    "flops": "2 * BATCH * M * N * K",
    "bytes": "BATCH * (M * K + K * N + M * N) * ELEM",
    "reduction_length": "K",
    "secret": {
        "count": 2, "dtypes": ["float16", "bfloat16"], "tags": ["gpu"],
        "ranges": {"BATCH": [32, 64, 8], "M": [1024, 2048, 128], "N": [1024, 2048, 128], "K": [1024, 2048, 128]},
    },
    "workloads": [
        {"name": "smoke", "set": {"BATCH": 2, "M": 64, "N": 64, "K": 64}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-16x2048x2048x2048", "set": {"BATCH": 16, "M": 2048, "N": 2048, "K": 2048},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-128x512x512x768", "set": {"BATCH": 128, "M": 512, "N": 512, "K": 768},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
