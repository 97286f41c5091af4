"""Derived costs: meta-tensor forward with a time budget, fallbacks instead of failures, the on-disk cache."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from harness.problems import costcache
from harness.problems.derive import derive
from harness.problems.loader import ProblemError, load_module, load_problem

KB = Path(__file__).parents[1] / "fixtures" / "kernelbench"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


SLOW = """
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64, 64))

        def forward(self, x):
            for _ in range(STEPS):
                x = torch.tanh(x @ self.w)
            return x

    STEPS = 2_000_000   # minutes on meta tensors without a budget

    def get_inputs():
        return [torch.randn(8, 64)]

    def get_init_inputs():
        return []
"""


def test_budget_abandons_a_slow_forward_and_flops_are_unknown(tmp_path):
    path = write(tmp_path, "slow_rnn.py", SLOW)
    t0 = time.monotonic()
    p = load_problem(path, derive_budget=0.5)
    assert time.monotonic() - t0 < 120  # generous for a loaded CI machine; unbudgeted it takes many minutes
    (w,) = p.workloads
    assert not w.flops_known and w.flops == 0
    assert "ran past its 0.5 s CPU budget" in w.cost_note and "FLOPs and output bytes unknown" in w.cost_note
    assert w.output_bytes is None and w.input_bytes == 8 * 64 * 4 and w.param_bytes == 64 * 64 * 4
    assert w.min_bytes == w.input_bytes + w.param_bytes and (w.read_bytes, w.write_bytes) == (w.min_bytes, 0)
    assert p.category == "gemm"  # the matmuls seen before the deadline decide


def test_timed_out_entry_is_recomputed_with_a_larger_budget(tmp_path):
    path = write(tmp_path, "slow.py", SLOW.replace("2_000_000", "3"))
    module = load_module(path)
    key = costcache.cost_key("sha", {}, "float32")
    timed_out = derive(module, "float32", budget_s=None)
    costcache.store(key, type(timed_out).from_dict({**timed_out.to_dict(), "timed_out": True, "budget_s": 1.0}))
    assert costcache.lookup(key, budget_s=1.0) is not None
    assert costcache.lookup(key, budget_s=5.0) is None and costcache.lookup(key, budget_s=None) is None


ITEM_IN_INIT = """
    import torch

    class Model(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            rates = [x.item() for x in torch.linspace(0, 0.1, 4)]   # stochastic-depth rates, as in Swin
            self.rate = rates[-1]
            self.fc = torch.nn.Linear(n, n)

        def forward(self, x):
            return self.fc(x)

    N = 512

    def get_inputs():
        return [torch.randn(4, N)]

    def get_init_inputs():
        return [N]
"""


def test_item_in_the_constructor_builds_on_the_cpu_fallback(tmp_path):
    p = load_problem(write(tmp_path, "swinlike.py", ITEM_IN_INIT))
    (w,) = p.workloads
    assert w.flops_known and w.flops == 2 * 4 * 512 * 512
    assert w.param_bytes == (512 * 512 + 512) * 4 and w.output_bytes == 4 * 512 * 4
    assert "cannot be built on meta tensors" in w.cost_note and "item" in w.cost_note


ITEM_IN_FORWARD = """
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            k = int(x.abs().max().item()) + 1
            return x[:k]

    def get_inputs():
        return [torch.randn(16, 8)]

    def get_init_inputs():
        return []
"""


def test_a_forward_that_fails_on_meta_keeps_the_input_bytes(tmp_path):
    p = load_problem(write(tmp_path, "data_dependent.py", ITEM_IN_FORWARD))
    (w,) = p.workloads
    assert not w.flops_known and w.output_bytes is None and w.min_bytes == 16 * 8 * 4
    assert "the forward fails on meta tensors" in w.cost_note


def test_missing_optional_import_names_the_package(tmp_path):
    path = write(tmp_path, "mamba.py", "from einops_not_here_xyz import rearrange\nimport torch\n")
    with pytest.raises(ProblemError) as exc:
        load_problem(path)
    assert exc.value.field == "<module>"
    assert "imports 'einops_not_here_xyz'" in str(exc.value) and "pip install einops_not_here_xyz" in str(exc.value)


def test_get_inputs_that_cannot_run_on_meta_is_an_error_naming_the_fix(tmp_path):
    bad = ITEM_IN_FORWARD.replace("return [torch.randn(16, 8)]", "return [torch.randn(int(torch.ones(1).item()), 8)]")
    with pytest.raises(ProblemError, match="get_inputs\\(\\) cannot run on meta tensors.*declare 'flops' and 'bytes'"):
        load_problem(write(tmp_path, "bad_inputs.py", bad))


def test_costs_are_cached_by_content_and_reused(tmp_path, monkeypatch):
    path = tmp_path / "19_ReLU.py"
    path.write_text((KB / "19_ReLU.py").read_text())
    first = load_problem(path)
    files = list(costcache.cache_dir().glob("*.json"))
    assert files and all(json.loads(f.read_text())["input_bytes"] > 0 for f in files)

    from harness.problems import workloads

    def boom(*a, **k):
        raise AssertionError("derived again despite the cache")

    monkeypatch.setattr(workloads, "derive", boom)
    again = load_problem(path)
    assert again.workloads == first.workloads
    path.write_text(path.read_text() + "\n# edited\n")  # new bytes: a new key
    with pytest.raises(ProblemError, match="derived again"):
        load_problem(path)


def test_corrupt_cache_entry_is_a_miss(tmp_path):
    key = costcache.cost_key("x", {"N": 1}, "float16")
    folder = costcache.cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key}.json").write_text("{not json")
    assert costcache.lookup(key, budget_s=None) is None


def test_cache_off(monkeypatch):
    monkeypatch.setenv("KERNELGATE_CACHE", "off")
    assert costcache.cache_dir() is None
    assert costcache.lookup("k", budget_s=None) is None


RECURRENT = """
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.{layer}
            self.fc = torch.nn.Linear(OUT, 4)

        def forward(self, x):
            out, state = self.rnn(x)  # the state (h_n, or (h_n, c_n)) is returned too: its shapes count
            return (self.fc(out[:, -1, :]) if out.dim() == 3 else self.fc(out[-1])), state

    OUT = {out}

    def get_inputs():
        return [torch.randn({shape})]

    def get_init_inputs():
        return []
"""


@pytest.mark.parametrize("layer,out,shape", [
    ("LSTM(16, 32, num_layers=3, batch_first=True)", 32, "5, 7, 16"),
    ("LSTM(16, 32, num_layers=2, batch_first=True, bidirectional=True)", 64, "5, 7, 16"),
    ("LSTM(16, 32, num_layers=2, proj_size=8)", 8, "7, 5, 16"),
    ("GRU(16, 32, num_layers=2, bidirectional=True)", 64, "7, 5, 16"),
    ("RNN(16, 32, num_layers=2, nonlinearity='relu', batch_first=True)", 32, "5, 7, 16"),
    ("GRU(16, 32)", 32, "7, 16"),
])
def test_recurrent_arithmetic_matches_the_decomposed_forward(tmp_path, layer, out, shape):
    """The arithmetic LSTM/GRU/RNN cost equals FlopCounterMode's count of the real decomposition, shapes included."""
    path = write(tmp_path, "rnn.py", RECURRENT.format(layer=layer, out=out, shape=shape))
    module = load_module(path)
    fast, slow = derive(module, "float32"), derive(module, "float32", fast_recurrent=False)
    assert fast.flops == slow.flops > 0
    assert (fast.input_bytes, fast.output_bytes, fast.param_bytes) == (slow.input_bytes, slow.output_bytes,
                                                                        slow.param_bytes)
    assert fast.op_counts["recurrent"] == 1 and fast.note == ""
