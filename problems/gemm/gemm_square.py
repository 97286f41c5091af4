"""Square matrix multiplication C = A @ B."""
import torch
import torch.nn as nn

M = 8192
N = 8192
K = 8192


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
    "secret": {"count": 2, "ranges": {"M": [5632, 8192, 256], "N": [5632, 8192, 256], "K": [5632, 8192, 256]},
               "dtypes": ["float16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"M": 64, "N": 64, "K": 64}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-8192x8192x8192", "set": {"M": 8192, "N": 8192, "K": 8192},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "fp32-4096x4096x4096-notf32", "set": {"M": 4096, "N": 4096, "K": 4096},
         "dtype": "float32", "allow_tf32": False, "tags": ["gpu"]},
    ],
}
