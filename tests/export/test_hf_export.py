"""Hugging Face parquet export and KernelBench import, on local data only."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from synth_results import suite  # noqa: E402

from harness.export.hf import export_hf, flatten_result, import_kernelbench, read_parquet_rows, sanitize  # noqa: E402
from harness.problems.registry import load_registry  # noqa: E402
from harness.records import JobResult  # noqa: E402

datasets = pytest.importorskip("datasets")

KB_RELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that performs a ReLU activation."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 64


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
'''
KB_MATMUL = KB_RELU.replace("torch.relu(x)", "x @ x.T").replace("ReLU activation", "matmul")


def _kb_rows() -> list[dict]:
    return [
        {"code": KB_RELU, "level": 1, "name": "19_ReLU", "problem_id": 19},
        {"code": KB_MATMUL, "level": 1, "name": "1_Square matrix multiplication_", "problem_id": 1},
        {"code": KB_RELU, "level": 2, "name": "19_ReLU", "problem_id": 19},
    ]


def test_export_problems_and_results(tmp_path):
    reg = load_registry()
    recs = suite()
    paths = export_hf(reg, recs, tmp_path / "hf")
    assert set(paths) == {"problems", "results", "card"}
    probs = read_parquet_rows(paths["problems"])
    assert sorted(r["id"] for r in probs) == sorted(reg.problems)
    ln = next(r for r in probs if r["id"] == "layernorm")
    p = reg.get("layernorm")
    assert ln["code"] == p.path.read_text() and ln["version"] == p.version
    assert ln["library_op"] == p.library_op and ln["file"] == "normalization/layernorm.py"
    import json

    assert json.loads(ln["flops"]) == {w.name: w.flops for w in p.workloads}
    assert [w["name"] for w in json.loads(ln["workloads"])] == [w.name for w in p.workloads]

    rows = read_parquet_rows(paths["results"])
    assert len(rows) == len(recs)
    by_id = {(r["job_id"], r["created_at"]): r for r in rows}
    for rec in recs:
        row = by_id[(rec.job_id, rec.created_at)]
        assert row == flatten_result(rec) | {k: row[k] for k in row if isinstance(row[k], float) and math.isnan(row[k])}
        if rec.timing is not None:
            assert tuple(row["timing_samples_ms"]) == rec.timing.samples_ms
            assert row["screening_verdict"] == (rec.screening.verdict.value if rec.screening else None)
        else:
            assert row["timing_samples_ms"] is None
    card = paths["card"].read_text()
    assert "config_name: results" in card
    loaded = datasets.load_dataset("parquet", data_files=str(paths["problems"]), split="train",
                                   cache_dir=str(tmp_path / "cache"))
    assert loaded.num_rows == len(reg)


def test_export_without_results(tmp_path):
    paths = export_hf(load_registry(), None, tmp_path)
    assert set(paths) == {"problems", "card"} and not (tmp_path / "results.parquet").exists()
    assert "results" not in paths["card"].read_text().split("---")[1]


def test_round_trip_export_then_import_gives_the_same_problems(tmp_path):
    reg = load_registry()
    paths = export_hf(reg, None, tmp_path / "hf")
    written = import_kernelbench(paths["problems"], tmp_path / "problems")
    assert len(written) == len(reg)
    back = load_registry(tmp_path / "problems")
    assert not back.errors
    assert {pid: p.source_sha256 for pid, p in back.problems.items()} == {pid: p.source_sha256 for pid, p in reg.problems.items()}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "save_to_disk", "datasetdict"])
def test_import_kernelbench_layouts(tmp_path, fmt):
    ds = datasets.Dataset.from_list(_kb_rows())
    if fmt == "parquet":
        src = tmp_path / "kb.parquet"
        ds.to_parquet(str(src))
    elif fmt == "jsonl":
        src = tmp_path / "kb.jsonl"
        ds.to_json(str(src), lines=True)
    elif fmt == "save_to_disk":
        src = tmp_path / "kb_disk"
        ds.save_to_disk(str(src))
    else:
        src = tmp_path / "kb_dict"
        datasets.DatasetDict({"level_1": ds.select([0, 1]), "level_2": ds.select([2])}).save_to_disk(str(src))
    out = tmp_path / "out"
    written = import_kernelbench(src, out)
    rel = sorted(str(p.relative_to(out)) for p in written)
    assert rel == ["level1/19_ReLU.py", "level1/1_Square_matrix_multiplication_.py", "level2/19_ReLU.py"]
    assert (out / "level1" / "19_ReLU.py").read_text() == KB_RELU  # code written unchanged

    reg = load_registry(out / "level1")
    assert not reg.errors and set(reg.problems) == {"19_ReLU", "1_Square_matrix_multiplication_"}
    mm = reg.get("1_Square_matrix_multiplication_")
    assert mm.derived and mm.category == "gemm" and mm.workloads[0].flops == 2 * 16 * 64 * 16


def test_import_one_level_is_flat_and_level_filter(tmp_path):
    src = tmp_path / "kb.parquet"
    datasets.Dataset.from_list(_kb_rows()).to_parquet(str(src))
    written = import_kernelbench(src, tmp_path / "l2", level=2)
    assert [p.relative_to(tmp_path / "l2").as_posix() for p in written] == ["19_ReLU.py"]
    assert load_registry(tmp_path / "l2").get("19_ReLU").level == 2  # the sidecar, not the id's level-1 namesake
    with pytest.raises(ValueError, match="no row has level 3"):
        import_kernelbench(src, tmp_path / "l3", level=3)


def test_import_errors(tmp_path):
    bad = tmp_path / "bad.parquet"
    datasets.Dataset.from_list([{"text": "x"}]).to_parquet(str(bad))
    with pytest.raises(ValueError, match="expected KernelBench's"):
        import_kernelbench(bad, tmp_path / "o")
    dup = tmp_path / "dup.parquet"
    datasets.Dataset.from_list([_kb_rows()[0], _kb_rows()[0]]).to_parquet(str(dup))
    with pytest.raises(ValueError, match="both map to"):
        import_kernelbench(dup, tmp_path / "o")
    with pytest.raises(ValueError, match="unsupported format"):
        (tmp_path / "x.csv").write_text("a\n")
        import_kernelbench(tmp_path / "x.csv", tmp_path / "o")
    with pytest.raises(FileNotFoundError):
        import_kernelbench(tmp_path / "missing.parquet", tmp_path / "o")


def test_sanitize():
    assert sanitize("1_Square matrix multiplication_") == "1_Square_matrix_multiplication_"
    assert sanitize("50_conv_standard_2D__square_input__square_kernel") == "50_conv_standard_2D__square_input__square_kernel"
    assert sanitize("../../etc/passwd") == "etc_passwd"
    assert sanitize("///") == "problem"


def test_flatten_result_is_json_free_of_nested_records():
    rec: JobResult = suite()[1]
    row = flatten_result(rec)
    assert not any(isinstance(v, dict) for v in row.values())
    assert row["env_device_name"] == rec.env.device_name
    assert row["status"] == rec.status.value and row["flops"] == rec.flops
