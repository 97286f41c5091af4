"""guards.dry_launches: the GPU precompile compiles Triton kernels without running or autotuning them.

Exploit/bug it stops: a precompile forward that really launched (and, worse,
autotune-benchmarked) kernels outside the device lock put GPU work on the
device while another candidate was being timed. Run in a subprocess under the
Triton interpreter, where a "warmup" launch does nothing, so the hooks' effect
is visible: no output written, no launch counted, no autotune choice cached
(a real autotune cannot run here: the interpreter has no benchmarker), and
launches after the block are real again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import torch, triton, triton.language as tl
    from harness.execute.worker import guards
    guards.install_triton_counter()

    @triton.jit
    def fill(y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, 1.0, mask=offs < n)

    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def tuned(y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, 2.0, mask=offs < n)

    y = torch.zeros(64)
    with guards.dry_launches():
        fill[(4,)](y, 64, BLOCK=16)
    assert not guards.dry_saw_autotune()
    with guards.dry_launches():
        fill[(4,)](y, 64, BLOCK=16)
        tuned[lambda m: (triton.cdiv(64, m["BLOCK"]),)](y, 64)
    assert guards.dry_saw_autotune()  # its first real call gets the GPU alone
    assert float(y.sum()) == 0.0, "a dry launch wrote its output"
    assert guards.COUNTER.triton == 0, guards.COUNTER.triton
    assert tuned.cache == {}, "a dry launch picked an autotune config"
    fill[(4,)](y, 64, BLOCK=16)
    assert float(y.sum()) == 64.0 and guards.COUNTER.triton == 1
    print("ok")
""")


def test_dry_launches_compile_only_and_leave_autotune_undecided():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
