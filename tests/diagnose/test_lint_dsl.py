"""One DSL label for discovery and the lint (harness/candidates/dsl.py), and the two really agree.

``kernelgate run`` labels a candidate through discovery and passes the label
to the lint; ``kernelgate lint`` lets the lint detect it. Both must reach the
same label and hence the same findings, for every bundled submission and
every fixture candidate.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.candidates.discover import discover
from harness.candidates.discover import detect_dsl as discovery_detect_dsl
from harness.candidates.dsl import DSLS, DslScan, header_dsl, scan_dsl
from harness.diagnose.lint import detect_dsl, lint_source

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "lint"


@pytest.mark.parametrize(
    ("name", "dsl"),
    [
        ("good/triton_gemm_tiled.py", "triton"),
        ("good/tilelang_gemm_pipelined.py", "tilelang"),
        ("defect/tilelang_layernorm_serial_row.py", "tilelang"),
    ],
)
def test_detect_dsl(name, dsl):
    assert detect_dsl((FIXTURES / name).read_text()) == dsl


def test_detect_dsl_torch_and_unparsable():
    assert detect_dsl("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n") == "torch"
    # imports triton but defines no @triton.jit kernel: labelled by its imports (discovery always did; the lint
    # used to say "torch"). The lint's findings do not depend on it: with no kernel, no kernel rule has work.
    assert detect_dsl("import triton\nimport torch\n") == "triton"
    assert lint_source("import triton\nimport torch\n") == lint_source("import triton\nimport torch\n", dsl="torch")
    assert detect_dsl("import tilelang\ndef broken(:\n") == "tilelang"


_TRITON_KERNEL = """
@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""
_TILELANG_KERNEL = """
@tilelang.jit(out_idx=[-1])
def add(N, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(N, threads=128) as bx:
            C[bx] = A[bx]
    return main
"""


@pytest.mark.parametrize(
    ("source", "dsl", "reason"),
    [
        ("# kernelgate: dsl=tilelang\nimport triton\n", "tilelang", "header"),
        ("# kernelgate: dsl=torch\nimport triton\nimport triton.language as tl\n" + _TRITON_KERNEL, "torch", "header"),
        ("# kernelgate: dsl=cuda\nimport torch\n", "torch", "imports"),  # an unknown header value is ignored
        ("import triton\nimport triton.language as tl\nimport tilelang\n" + _TRITON_KERNEL, "triton", "kernels"),
        ("import triton\nimport tilelang\nimport tilelang.language as T\n" + _TILELANG_KERNEL, "tilelang", "kernels"),
        ("from triton import jit\nimport triton.language as tl\n" + _TRITON_KERNEL.replace("@triton.jit", "@jit"),
         "triton", "kernels"),
        ("import triton\nimport triton.language as tl\nimport tilelang\nimport tilelang.language as T\n"
         + _TRITON_KERNEL + _TILELANG_KERNEL, "tilelang", "kernels-both"),
        ("from triton import language as tl\n", "triton", "imports"),
        ("import torch\n", "torch", "imports"),
        ("x = 1\n", "unknown", "none"),
        ("def f(:\n", "unknown", "none"),
        ("import triton\nimport torch\ndef broken(:\n", "triton", "imports-unparsable"),
        ("import torch\n\x00\n", "torch", "imports-unparsable"),
    ],
)
def test_dsl_decision_rules(source, dsl, reason):
    scan = scan_dsl(source)
    assert (scan.dsl, scan.reason) == (dsl, reason)
    assert detect_dsl(source) == discovery_detect_dsl(source) == dsl
    assert DslScan.from_dict(scan.to_dict()) == scan


def test_header_dsl_only_accepts_labels():
    assert header_dsl("import torch\n# kernelgate: dsl=triton\n") == "triton"
    assert header_dsl("# kernelgate: dsl=cuda\n") is None
    assert set(DSLS) == {"triton", "tilelang", "torch", "unknown"}


def test_file_with_kernels_of_both_dsls_gets_both_rule_sets():
    # a Triton kernel with a one-element block and a TileLang kernel computing one element per block
    src = ("import torch\nimport triton\nimport triton.language as tl\nimport tilelang\nimport tilelang.language as T\n"
           + textwrap.dedent(_TRITON_KERNEL) + textwrap.dedent(_TILELANG_KERNEL)
           + "\ndef launch(x, y):\n    k[(x.numel(),)](x, y, x.numel(), BLOCK=1)\n")
    assert detect_dsl(src) == "tilelang"
    messages = [f.message for f in lint_source(src) if f.rule == "one-element-per-program"]
    assert any("`k`" in m for m in messages) and any("add.main" in m for m in messages), messages
    assert lint_source(src) == lint_source(src, dsl="tilelang") == lint_source(src, dsl="triton")
    assert lint_source(src, dsl="torch") == []  # a declared torch label runs host rules only


PROBLEM_FIXTURES = REPO / "tests" / "fixtures" / "kernelbench"  # KernelBench reference problems, not candidates


def _candidate_folders() -> list[Path]:
    roots = [REPO / "submissions", *sorted((REPO / "tests").glob("**/fixtures"))]
    folders = {p.parent for root in roots for p in root.glob("**/*.py") if not p.is_relative_to(PROBLEM_FIXTURES)}
    return sorted(folders)


CANDIDATE_FOLDERS = _candidate_folders()


def test_agreement_covers_the_bundled_submissions_and_fixtures():
    names = {str(f.relative_to(REPO)) for f in CANDIDATE_FOLDERS}
    assert {"submissions/defects", "submissions/triton-reference", "submissions/tilelang-reference",
            "tests/diagnose/fixtures/lint/defect", "tests/execute/fixtures/mixed"} <= names
    for folder in CANDIDATE_FOLDERS:  # discovery lists every candidate file, so the agreement test sees them all
        files = sorted(p.name for p in folder.glob("*.py") if not p.name.startswith("_"))
        assert sorted(c.path.name for c in discover(folder)[1]) == files, folder


@pytest.mark.parametrize("folder", CANDIDATE_FOLDERS, ids=lambda f: str(f.relative_to(REPO)))
def test_lint_and_discovery_agree_on_every_file(folder):
    """Discovery's label (manifest, header, or detection) is the lint's, and so are the findings either path gives."""
    _, candidates = discover(folder)
    assert candidates, folder
    for cand in candidates:
        text = cand.path.read_text(encoding="utf-8", errors="replace")
        assert cand.dsl == detect_dsl(text), f"{cand.rel_path}: discovery says {cand.dsl!r}, lint {detect_dsl(text)!r}"
        run_label = cand.dsl if cand.dsl in ("triton", "tilelang", "torch") else None  # what the pipeline passes
        assert lint_source(text, filename=str(cand.path)) == lint_source(text, filename=str(cand.path), dsl=run_label)
