"""Matrix multiplication C = A @ B with a long reduction dimension (K much larger than M and N)."""
import torch
import torch.nn as nn

M = 1024
N = 1024
K = 65536


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


KERNELGATE = {
    # a +1.5 shift makes each of the K=65536-term dot products ~1.5e5: past the fp16 maximum (65504)
    "input_transform": "scale",
    "category": "gemm",
    "library_op": "torch.matmul",
    "library_aten": ["aten.mm", "aten.addmm", "aten.matmul"],
    "flops": "2 * M * N * K",
    "bytes": "(M * K + K * N + M * N) * ELEM",
    "reduction_length": "K",
    "secret": {"count": 2, "ranges": {"M": [1024, 1536, 128], "N": [1024, 1536, 128], "K": [49152, 98304, 2048]},
               "dtypes": ["float16", "bfloat16"], "tags": ["gpu"]},
    "workloads": [
        {"name": "smoke", "set": {"M": 32, "N": 32, "K": 1024}, "dtype": "float32", "tags": ["smoke"]},
        {"name": "fp16-1024x1024x65536", "set": {"M": 1024, "N": 1024, "K": 65536},
         "dtype": "float16", "tags": ["gpu"]},
        {"name": "bf16-768x1280x61440", "set": {"M": 768, "N": 1280, "K": 61440},
         "dtype": "bfloat16", "tags": ["gpu"]},
    ],
}
