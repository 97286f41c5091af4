"""Lint of CUDA C lowered from TileLang kernels (``lint_cuda_source``).

On a machine without a GPU, TileLang kernels are lowered to CUDA source
instead of run (status ``LOWERED``); this module reads that source with
regular expressions (no compiler, no parse tree) and applies the rule ids
the Python-level checks use, so a lowered kernel's findings read like its
source's. It sees what TileLang generated, so it also catches what the
Python-level checks cannot resolve (a serial loop whose extent is known
only after specialisation). Lines are lines of the CUDA source.
"""

from __future__ import annotations

import re

from harness.diagnose.findings import Finding, sort_findings
from harness.diagnose.lint.rules import finding

KIND = "cuda"

_CU_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_CU_KERNEL = re.compile(
    r"__global__\s+void\s+(?:__launch_bounds__\(\s*(\d+)[^)]*\)\s*)?(\w+)\s*\(([^)]*)\)\s*\{"
)
_CU_FOR = re.compile(
    r"for\s*\(\s*(?:const\s+)?(?:unsigned\s+)?(?:int|long|int64_t|int32_t|uint32_t|size_t|long\s+long)\s+(\w+)\s*=\s*([^;]+);"
    r"\s*\1\s*<\s*([^;]+);[^)]*\)\s*\{"
)
_CU_CROSS = re.compile(r"AllReduce|__shfl|shfl_|atomic|warp_reduce|cub::|__reduce_|tl::gemm|wgmma|mma|cutlass", re.I)


def _match_brace(text: str, open_idx: int) -> int:
    depth = 0
    for i in range(open_idx, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _cu_int(s: str) -> int | None:
    s = s.strip().strip("()")
    return int(s) if re.fullmatch(r"-?\d+", s) else None


def lint_cuda_source(cuda_src: str) -> list[Finding]:
    """Findings for CUDA C lowered from a TileLang kernel (``sm_*`` target).

    Rules: ``sequential-reduction`` (a loop of >= 64 or unknown trips folding
    a global-memory element into an accumulator per iteration, in a kernel
    with no warp shuffle / ``AllReduce`` / atomic / MMA), ``fp64-promotion``
    (``double`` in a kernel whose tensors are not fp64), ``tiny-tile``
    (blocks under 32 threads, one thread per block with loops, or a single
    warp walking a long loop). Lines are lines of ``cuda_src``.
    """
    text = _CU_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), cuda_src)
    out: list[Finding] = []

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for km in _CU_KERNEL.finditer(text):
        bounds, name, params = km.group(1), km.group(2), km.group(3)
        start = km.end() - 1
        end = _match_brace(text, start)
        body = text[start:end + 1]
        base = start
        ptrs = set(re.findall(r"\*\s*(?:__restrict__\s+)?(\w+)\s*(?:,|$)", params))
        threads = int(bounds) if bounds else (None if "threadIdx" in body else 1)
        cross = bool(_CU_CROSS.search(body))
        loops = []
        for lm in _CU_FOR.finditer(body):
            var, lo, hi = lm.group(1), lm.group(2), lm.group(3)
            lo_i, hi_i = _cu_int(lo), _cu_int(hi)
            trip = hi_i - lo_i if lo_i is not None and hi_i is not None else None
            bstart = lm.end() - 1
            bend = _match_brace(body, bstart)
            loops.append((var, trip, hi.strip(), body[bstart:bend + 1], base + lm.start()))
        seq = False
        if not cross:
            for var, trip, hi, lbody, pos in loops:
                if trip is not None and trip < 64:
                    continue
                loaded: dict[str, str] = {}  # local = X[... j ...]: the element read this iteration
                for dm in re.finditer(r"\b[A-Za-z_][\w:]*\s+(\w+)\s*=\s*([^;]+);", lbody):
                    rhs = dm.group(2)
                    if re.search(rf"\b{re.escape(var)}\b", rhs):
                        ptr = next((p for p in ptrs if re.search(rf"\b{re.escape(p)}\s*(\[|\+)", rhs)), None)
                        if ptr is not None:
                            loaded[dm.group(1)] = ptr
                for st in re.finditer(r"([\w.]+(?:\[[^\]=;]*\])?)\s*(=|\+=|-=)\s*([^;]+);", lbody):
                    tgt, op, rhs = st.group(1), st.group(2), st.group(3)
                    if re.search(rf"\b{re.escape(var)}\b", tgt):
                        continue
                    t = re.escape(tgt)
                    folds = (
                        rf"^\(*\s*{t}\s*[-+]"  # acc = (acc + x)
                        rf"|(max|min|fmaxf|fminf|fmax|fmin)\(\s*{t}\s*,"  # acc = max(acc, x)
                        rf"|[-+]\s*{t}\s*\)*$"  # acc = (x + acc)
                    )
                    if op == "=" and not re.search(folds, rhs.strip()):
                        continue
                    src = None
                    if re.search(rf"\b{re.escape(var)}\b", rhs):
                        src = next((p for p in ptrs if re.search(rf"\b{re.escape(p)}\s*(\[|\+)", rhs)), None)
                    if src is None:
                        src = next((loaded[n] for n in loaded if re.search(rf"\b{re.escape(n)}\b", rhs)), None)
                    if src is None:
                        continue
                    who = f"a block of {threads} thread{'s' if threads != 1 else ''}" if threads else "each thread"
                    out.append(finding(
                        "sequential-reduction", KIND, "defect", line_of(pos),
                        f"CUDA kernel `{name}`: `for ({var} < {hi})` folds global `{src}` into `{tgt}` one element per "
                        f"iteration ({who}, no shuffle/AllReduce)",
                    ))
                    seq = True
                    break
                if seq:
                    break
        big = [lp for lp in loops if lp[1] is None or lp[1] >= 32]
        if not seq and threads is not None:
            if threads == 1 and big:
                out.append(finding(
                    "tiny-tile", KIND, "defect", line_of(big[0][4]),
                    f"CUDA kernel `{name}` runs one thread per block over a loop of `{big[0][2]}`",
                ))
            elif 1 < threads < 32:
                out.append(finding(
                    "tiny-tile", KIND, "defect", line_of(km.start()),
                    f"CUDA kernel `{name}`: __launch_bounds__({threads}) is under one warp",
                ))
            elif threads <= 32 and not cross and any(lp[1] is None or lp[1] >= 256 for lp in loops):
                out.append(finding(
                    "tiny-tile", KIND, "warning", line_of(km.start()),
                    f"CUDA kernel `{name}`: {threads} threads per block walk a long serial loop",
                ))
        if not re.search(r"\bdouble\s*\*", params):
            dm = re.search(r"\bdouble\b", body)
            if dm:
                n = len(re.findall(r"\bdouble\b", body))
                out.append(finding(
                    "fp64-promotion", KIND, "defect", line_of(base + dm.start()),
                    f"CUDA kernel `{name}` has {n} double-precision operation{'s' if n != 1 else ''} on non-fp64 data",
                ))
    return sort_findings(out)
