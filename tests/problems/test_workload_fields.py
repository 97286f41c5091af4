"""Fields the engine needs: tensor bytes, the read/write split, level, mode, precision, to_dict round trips."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness.problems.loader import ProblemError, Workload, load_problem
from harness.problems.registry import load_registry

KB = Path(__file__).parents[1] / "fixtures" / "kernelbench"
LEVELS = KB / "levels"


def test_plain_file_bytes_and_split():
    p = load_problem(LEVELS / "level2" / "19_Conv2d_ReLU_BiasAdd_tiny.py")
    (w,) = p.workloads
    x = 2 * 4 * 12 * 12 * 4
    params = (8 * 4 * 3 * 3 + 8 + 8) * 4  # conv weight, conv bias, bias (8, 1, 1)
    out = 2 * 8 * 10 * 10 * 4
    assert (w.input_bytes, w.param_bytes, w.output_bytes) == (x, params, out)
    assert w.min_bytes == x + params + out and w.read_bytes + w.write_bytes == w.min_bytes
    assert w.write_bytes == out and w.read_bytes == x + params
    assert w.params == {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 12, "width": 12,
                        "kernel_size": 3, "bias_shape": (8, 1, 1)}
    assert p.kernelbench and p.default_mode == "train" and p.level == 2 and p.level_source == "folder level2/"
    assert p.category == "convolution" and p.category_source == "ops"


def test_annotated_problem_has_tensor_bytes_and_declared_split(tmp_path):
    p = load_registry().get("layernorm")
    smoke = p.workload("smoke")
    assert smoke.input_bytes == 16 * 256 * 4 and smoke.output_bytes == 16 * 256 * 4 and smoke.param_bytes == 2 * 256 * 4
    assert smoke.read_bytes + smoke.write_bytes == smoke.min_bytes and smoke.write_bytes == 16 * 256 * 4
    assert not p.kernelbench and p.default_mode == "eval" and p.category_source == "declared"
    gpu = p.workload("fp16-32768x4096")
    assert gpu.input_bytes == 32768 * 4096 * 2 and gpu.flops_known and gpu.cost_note == ""


def annotated(tmp_path: Path, meta: str) -> Path:
    path = tmp_path / "scale.py"
    path.write_text(textwrap.dedent("""
        import torch
        N = 64
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs(): return [torch.randn(N)]
        def get_init_inputs(): return []
    """) + meta + "\n")
    return path


def test_declared_read_and_write_bytes(tmp_path):
    p = load_problem(annotated(tmp_path, "KERNELGATE = {'category': 'elementwise', 'flops': 'N', "
                                         "'read_bytes': 'N * ELEM', 'write_bytes': '2 * N * ELEM'}"))
    (w,) = p.workloads
    assert (w.read_bytes, w.write_bytes, w.min_bytes) == (256, 512, 768)


@pytest.mark.parametrize("meta,field", [
    ("KERNELGATE = {'category': 'elementwise', 'flops': 'N', 'read_bytes': 'N'}", "read_bytes"),
    ("KERNELGATE = {'category': 'elementwise', 'flops': 'N', 'bytes': 'N', 'read_bytes': 'N', 'write_bytes': 'N'}",
     "read_bytes"),
    ("KERNELGATE = {'category': 'elementwise', 'bytes': 'N'}", "flops"),
    ("KERNELGATE = {'category': 'elementwise', 'mode': 'inference'}", "mode"),
    ("KERNELGATE = {'category': 'elementwise', 'level': 0}", "level"),
])
def test_bad_byte_metadata_names_the_field(tmp_path, meta, field):
    with pytest.raises(ProblemError) as exc:
        load_problem(annotated(tmp_path, meta))
    assert exc.value.field == field


def test_declared_level_and_mode(tmp_path):
    p = load_problem(annotated(tmp_path, "KERNELGATE = {'category': 'elementwise', 'level': 3, 'mode': 'train'}"))
    assert (p.level, p.level_source, p.default_mode) == (3, "KERNELGATE['level']", "train")


def test_level_from_a_sidecar(tmp_path):
    src = (LEVELS / "level1" / "26_GELU_.py").read_text()
    (tmp_path / "88_Other.py").write_text(src)
    assert load_problem(tmp_path / "88_Other.py").level is None
    (tmp_path / "kernelbench.json").write_text(json.dumps({"level": 2}))
    assert load_problem(tmp_path / "88_Other.py").level == 2
    (tmp_path / "kernelbench.json").write_text(json.dumps({"levels": {"88_Other": 4}}))
    assert load_problem(tmp_path / "88_Other.py").level == 4


def test_kernelbench_id_knows_its_level_anywhere():
    assert load_problem(KB / "19_ReLU.py").level == 1  # the fixture folder is not named level1


@pytest.mark.parametrize("precision,name,elem", [("float32", "default", 4), ("float16", "default-fp16", 2),
                                                 ("bfloat16", "default-bf16", 2)])
def test_precision_of_plain_files(precision, name, elem):
    (w,) = load_problem(KB / "19_ReLU.py", precision=precision).workloads
    assert (w.name, w.dtype) == (name, precision)
    assert w.input_bytes == 16 * 16384 * elem and w.atol == (1e-4 if elem == 4 else 1e-2)


def test_bad_precision():
    with pytest.raises(ProblemError, match="precision"):
        load_problem(KB / "19_ReLU.py", precision="float8")


def test_to_dict_round_trip_and_json():
    p = load_registry(LEVELS)
    for prob in p:
        d = prob.to_dict()
        json.dumps(d)
        for w, wd in zip(prob.workloads, d["workloads"]):
            assert Workload.from_dict(json.loads(json.dumps(wd))) == w
    assert d["level"] in (1, 2) and d["kernelbench"] is True and d["default_mode"] == "train"


def test_declared_cost_loads_even_when_get_inputs_fails_on_meta(tmp_path):
    path = tmp_path / "odd.py"
    path.write_text(textwrap.dedent("""
        import torch
        N = 64
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs(): return [torch.randn(int(torch.ones(1).item()) * N)]
        def get_init_inputs(): return []
        KERNELGATE = {'category': 'elementwise', 'flops': 'N', 'bytes': '2 * N * ELEM'}
    """))
    (w,) = load_problem(path).workloads
    assert (w.flops, w.min_bytes, w.input_bytes, w.read_bytes) == (64, 512, None, 512)
    assert "cannot run on meta tensors" in w.cost_note
