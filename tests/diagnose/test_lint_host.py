"""Host-code rules (harness/diagnose/lint/host.py): multi-pass launches, host syncs, fp64 in forward."""

from __future__ import annotations

import textwrap

from harness.diagnose.findings import Finding
from harness.diagnose.lint import lint_source

_HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"


def _lint(body: str) -> list[Finding]:
    return lint_source(_HEADER + textwrap.dedent(body))


def test_launches_in_exclusive_branches_are_not_multipass():
    findings = _lint(
        """
        @triton.jit
        def small_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        @triton.jit
        def big_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                n = x.numel()
                if n < 4096:
                    small_k[(1,)](x, y, n, BLOCK=4096)
                else:
                    big_k[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
                return y
        """
    )
    assert findings == []


def test_two_pass_stats_then_apply_is_only_a_warning():
    findings = _lint(
        """
        @triton.jit
        def stats(x_ptr, s_ptr, N, BLOCK: tl.constexpr):
            r = tl.program_id(0)
            c = tl.arange(0, BLOCK)
            tl.store(s_ptr + r, tl.sum(tl.load(x_ptr + r * N + c, mask=c < N, other=0.0), axis=0))

        @triton.jit
        def apply(x_ptr, s_ptr, y_ptr, N, BLOCK: tl.constexpr):
            r = tl.program_id(0)
            c = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + r * N + c, mask=c < N, other=0.0)
            tl.store(y_ptr + r * N + c, x / tl.load(s_ptr + r), mask=c < N)

        class ModelNew(nn.Module):
            def forward(self, x):
                M, N = x.shape
                s = torch.empty(M, device=x.device)
                y = torch.empty_like(x)
                stats[(M,)](x, s, N, BLOCK=1024)
                apply[(M,)](x, s, y, N, BLOCK=1024)
                return y
        """
    )
    assert [(f.rule, f.severity) for f in findings] == [("unfused-multipass", "warning")]


def test_cpu_side_item_and_dtype_comparisons_are_quiet():
    findings = _lint(
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                n = torch.tensor(x.shape).prod().item()   # CPU tensor: no device sync
                if x.dtype == torch.float64:               # a check, not a promotion
                    raise TypeError("fp64 unsupported")
                return x.view(n)
        """
    )
    assert findings == []


def test_host_sync_and_fp64_in_forward_helpers():
    findings = _lint(
        """
        def helper(x):
            torch.cuda.synchronize()
            return x.double()

        class ModelNew(nn.Module):
            def forward(self, x):
                return helper(x).float()
        """
    )
    assert {f.rule for f in findings} == {"host-sync-in-forward", "fp64-promotion"}
