"""Smoke tests of the report-side subcommands through ``harness.cli.main``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from synth_results import CEILINGS, suite  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.jsonio import loads, read_jsonl, write_json  # noqa: E402
from harness.results.store import ResultStore, load_results  # noqa: E402


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    store = ResultStore(tmp_path / "run")
    for r in suite():
        store.append(r)
    return tmp_path / "run"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Never read or write the user's calibration cache."""
    monkeypatch.setenv("KERNELGATE_CACHE", str(tmp_path / "kg-cache"))


@pytest.mark.parametrize("cmd", ["leaderboard", "compare", "report", "prompt", "export", "merge"])
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as exc:
        main([cmd, "--help"])
    assert exc.value.code == 0
    assert "examples:" in capsys.readouterr().out


def test_leaderboard(results_dir, tmp_path, capsys):
    out = tmp_path / "leaderboards" / "synthetic.json"
    assert main(["leaderboard", "--results", str(results_dir), "--by", "category", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "gen-a@2" in text and "  normalization" in text and "fast_1" in text
    lb = loads(out.read_bytes())
    assert lb["schema"] == "kernelgate.leaderboard/1" and lb["ranking"][0]["label"] == "gen-a@2"
    first = out.read_bytes()
    assert main(["leaderboard", "--results", str(results_dir), "--out", str(out)]) == 0
    assert out.read_bytes() == first


def test_leaderboard_missing_results(tmp_path):
    with pytest.raises(SystemExit, match="no results file"):
        main(["leaderboard", "--results", str(tmp_path / "nothing")])


def test_compare(results_dir, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(["compare", "gen-a@1", "gen-a@2", "--results", str(results_dir), "--n-boot", "300",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "geomean t_b/t_a" in text and "95% CI" in text
    assert loads(out.read_bytes())["improved"] == ["gemm_square", "layernorm", "softmax"]
    assert main(["compare", "gen-b", "gen-c", "--results", str(results_dir), "--n-boot", "200"]) == 0
    captured = capsys.readouterr()
    assert "different environments" in captured.out and "different environments" in captured.err
    with pytest.raises(SystemExit, match="has 2 versions"):
        main(["compare", "gen-a", "gen-b", "--results", str(results_dir)])


def test_report_with_ceilings_file(results_dir, tmp_path, capsys):
    ceil = tmp_path / "ceilings.json"
    write_json(ceil, CEILINGS)
    assert main(["report", "--results", str(results_dir), "--out", str(tmp_path / "rep"), "--ceilings", str(ceil)]) == 0
    assert (tmp_path / "rep" / "report.html").exists() and (tmp_path / "rep" / "report.md").exists()
    assert "ceilings from" in capsys.readouterr().err


def test_report_uses_cached_calibration_when_one_device(results_dir, tmp_path, capsys):
    from harness.measure.calibrate import cache_dir, device_key

    one_device = [r for r in suite() if r.env.device_name == "NVIDIA H200"]
    store = ResultStore(tmp_path / "one")
    for r in one_device:
        store.append(r)
    assert main(["report", "--results", str(tmp_path / "one"), "--out", str(tmp_path / "r1")]) == 0
    assert "no cached calibration" in capsys.readouterr().err
    write_json(cache_dir() / f"{device_key(one_device[0].env.to_dict())}.json", CEILINGS)
    assert main(["report", "--results", str(tmp_path / "one"), "--out", str(tmp_path / "r2")]) == 0
    assert "calibration cache" in capsys.readouterr().err
    assert main(["report", "--results", str(results_dir), "--out", str(tmp_path / "r3")]) == 0
    assert "come from 2 devices" in capsys.readouterr().err


def test_report_bad_ceilings(results_dir, tmp_path):
    bad = tmp_path / "c.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit, match="dram_bytes_per_s"):
        main(["report", "--results", str(results_dir), "--out", str(tmp_path / "r"), "--ceilings", str(bad)])


def test_prompt_single_all_and_feedback(results_dir, tmp_path, capsys):
    assert main(["prompt", "layernorm", "--dsl", "triton"]) == 0
    assert "# Task: write a Triton kernel for `layernorm`" in capsys.readouterr().out
    assert main(["prompt", "--all", "--dsl", "tilelang", "--out", str(tmp_path / "prompts")]) == 0
    assert (tmp_path / "prompts" / "softmax.tilelang.md").exists()
    with pytest.raises(SystemExit, match="several candidates"):
        main(["prompt", "layernorm", "--dsl", "triton", "--feedback", str(results_dir)])
    assert main(["prompt", "layernorm", "--dsl", "triton", "--feedback", str(results_dir), "--generator", "gen-b",
                 "--candidate", "layernorm", "--out", str(tmp_path / "fb.md")]) == 0
    text = (tmp_path / "fb.md").read_text()
    assert "## Your previous attempt (`layernorm.py`, gen-b@1)" in text and "sequential-reduction" in text
    with pytest.raises(SystemExit, match="did you mean"):
        main(["prompt", "layernorn", "--dsl", "triton"])
    with pytest.raises(SystemExit, match="one PROBLEM or --all"):
        main(["prompt", "--dsl", "triton"])


def test_export_and_import(results_dir, tmp_path, capsys):
    assert main(["export", "--format", "hf", str(tmp_path / "hf"), "--results", str(results_dir), "--latest"]) == 0
    assert (tmp_path / "hf" / "problems.parquet").exists() and (tmp_path / "hf" / "results.parquet").exists()
    assert main(["export", "--import-kernelbench", str(tmp_path / "hf" / "problems.parquet"),
                 "--out", str(tmp_path / "imported")]) == 0
    assert "problem file(s) written" in capsys.readouterr().out
    assert (tmp_path / "imported" / "layernorm.py").exists()
    with pytest.raises(SystemExit, match="needs --out"):
        main(["export", "--import-kernelbench", str(tmp_path / "hf" / "problems.parquet")])


def test_merge(results_dir, tmp_path, capsys):
    recs = suite()
    other = ResultStore(tmp_path / "other")
    other.append(recs[3])  # a duplicate of a record of results_dir
    extra = recs[4].replace(created_at="2025-02-01T00:00:00+00:00", run_id="rerun")
    other.append(extra)  # a rerun of a job: kept
    (other.path).open("a").write("{not json\n")
    out = tmp_path / "merged.jsonl"
    assert main(["merge", str(out), str(results_dir), str(other.path)]) == 0
    assert "1 duplicate(s) dropped, 1 invalid line(s) skipped" in capsys.readouterr().out
    merged = read_jsonl(out)
    assert [d["job_id"] for d in merged] == [r.job_id for r in recs] + [extra.job_id]
    assert len(load_results(out)) == len(recs) + 1
    # merging again into an existing file is refused unless it is an input
    with pytest.raises(SystemExit, match="exists"):
        main(["merge", str(out), str(results_dir)])
    assert main(["merge", str(out), str(out), str(results_dir)]) == 0
    assert len(read_jsonl(out)) == len(recs) + 1
