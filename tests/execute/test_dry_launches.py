"""guards.dry_launches: the GPU precompile compiles Triton kernels without running or autotuning them.

Exploit/bug it stops: a precompile forward that really launched (and, worse,
autotune-benchmarked) kernels outside the device lock put GPU work on the
device while another candidate was being timed. Run in a subprocess under the
Triton interpreter, where a "warmup" launch does nothing, so the hooks' effect
is visible: no output written, no launch counted, no autotune choice cached
(a real autotune cannot run here: the interpreter has no benchmarker), and
launches after the block are real again.

A dry forward ends at its first autotuned kernel (``DryAutotuned``, once every config is compiled): returning
nothing instead was kept by libraries that cache their first call's kernel and launch it directly afterwards
(FlagGems' ``LibEntry``), whose real calls then failed with "'NoneType' object is not subscriptable" on an H200,
an honest library blamed for the harness's precompile. The names of kernels compiled in a dry forward are kept
too: such a library's later launches never come back through ``run``, and the profiler's kernel table is matched
against these names (without them all 14 FlagGems wrappers were library fallbacks at 0% on the H200).
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

    class FirstCallCache:  # the shape of FlagGems' LibEntry: the first call's kernel is kept and reused
        def __init__(self, fn):
            self.fn, self.kept = fn, []
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                if not self.kept:
                    self.kept.append(self.fn.run(*args, grid=grid, warmup=False, **kwargs))
                return self.kept[0]
            return launch

    y = torch.zeros(64)
    with guards.dry_launches():
        fill[(4,)](y, 64, BLOCK=16)
    assert not guards.dry_saw_autotune()
    assert "fill" in guards.COUNTER.names  # compiled, never launched: its name is known
    entry = FirstCallCache(tuned)
    with guards.dry_launches():
        fill[(4,)](y, 64, BLOCK=16)
        try:
            entry[lambda m: (triton.cdiv(64, m["BLOCK"]),)](y, 64)
            raise AssertionError("the dry forward went on past an autotuned kernel")
        except guards.DryAutotuned:
            pass
    assert guards.dry_saw_autotune()  # its first real call gets the GPU alone
    assert entry.kept == [], "a dry autotuned launch left the library a kernel to keep"
    assert "tuned" in guards.COUNTER.names
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
