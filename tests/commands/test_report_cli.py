"""Smoke tests of the report-side subcommands through ``harness.cli.main``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from synth_results import CEILINGS, ENV_CPU, LN1, SM, floor_ms, record, suite  # noqa: E402

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


# --- everyday use ----------------------------------------------------------------------------------------------



def _store(path: Path, records) -> Path:
    store = ResultStore(path)
    for r in records:
        store.append(r)
    return path


def _versions_sharing_a_job_id(tmp_path: Path) -> Path:
    """mymodel@1 and @2: layernorm.py unchanged (one job id for both, as job ids were made), softmax.py changed."""
    f, g = floor_ms("layernorm", LN1), floor_ms("softmax", SM)
    v1_ln = record("mymodel", "1", "layernorm", LN1, t_kernel=2 * f, t_library=1.5 * f, run_id="r1")
    v2_ln = record("mymodel", "2", "layernorm", LN1, t_kernel=2 * f, t_library=1.5 * f, run_id="r2",
                   created_at="2025-01-02T00:00:00+00:00").replace(job_id=v1_ln.job_id)
    v1_sm = record("mymodel", "1", "softmax", SM, t_kernel=3 * g, t_library=1.5 * g, run_id="r1")
    v2_sm = record("mymodel", "2", "softmax", SM, t_kernel=1.2 * g, t_library=1.5 * g, run_id="r2",
                   created_at="2025-01-02T00:00:00+00:00")
    assert v1_ln.job_id == v2_ln.job_id != v1_sm.job_id
    return _store(tmp_path / "run", [v1_ln, v1_sm, v2_ln, v2_sm])


def test_versions_sharing_a_job_id_stay_separate_entries(tmp_path, capsys):
    run = _versions_sharing_a_job_id(tmp_path)
    assert main(["leaderboard", "--results", str(run), "--json"]) == 0
    lb = loads(capsys.readouterr().out)
    assert lb["inputs"]["n_superseded"] == 0
    assert {(e["version"], e["problem"]) for e in lb["entries"]} == {("1", "layernorm"), ("1", "softmax"),
                                                                     ("2", "layernorm"), ("2", "softmax")}
    v1 = next(g for g in lb["generators"] if g["label"] == "mymodel@1")
    assert v1["overall"]["n_problems_correct"] == 2

    assert main(["compare", "mymodel@1", "mymodel@2", "--results", str(run), "--n-boot", "200",
                 "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert "only in" not in out
    cmp = loads((tmp_path / "cmp.json").read_bytes())
    assert cmp["only_a"] == [] and cmp["only_b"] == [] and cmp["summary"]["n_pairs"] == 2

    pytest.importorskip("pyarrow")
    assert main(["export", "--format", "hf", str(tmp_path / "hf"), "--results", str(run), "--latest"]) == 0
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "hf" / "results.parquet").to_pylist()
    assert sorted((r["generator_version"], r["problem_id"]) for r in rows) == [
        ("1", "layernorm"), ("1", "softmax"), ("2", "layernorm"), ("2", "softmax")]


def test_merge_keeps_records_of_two_versions_with_one_job_id_and_time(tmp_path, capsys):
    a = record("mymodel", "1", "layernorm", LN1)
    b = record("mymodel", "2", "layernorm", LN1).replace(job_id=a.job_id)  # same job id, same created_at
    out = tmp_path / "merged.jsonl"
    assert main(["merge", str(out), str(_store(tmp_path / "a", [a])), str(_store(tmp_path / "b", [b]))]) == 0
    assert "0 duplicate(s) dropped" in capsys.readouterr().out
    assert sorted(r.generator_version for r in load_results(out)) == ["1", "2"]


def _cpu_results(tmp_path: Path) -> Path:
    """Records of the CPU path written with a screening (older harness): one fast, one slow by host time."""
    f = floor_ms("layernorm", LN1)
    fast = record("cpu-fast", "1", "layernorm", LN1, t_kernel=1.1 * f, t_library=2 * f, env=ENV_CPU)
    slow = record("cpu-slow", "1", "layernorm", LN1, t_kernel=9 * f, t_library=2 * f, env=ENV_CPU)
    assert fast.screening is not None and slow.screening.verdict.value == "authoring_defect"
    return _store(tmp_path / "cpu", [slow, fast])


CPU_NOTE = "CPU path: correctness only, no performance verdict"


def test_cpu_path_records_carry_no_performance_verdict(tmp_path, capsys):
    run = _cpu_results(tmp_path)
    assert main(["leaderboard", "--results", str(run)]) == 0
    text = capsys.readouterr().out
    assert CPU_NOTE in text and "authoring_defect" not in text and "defect=" not in text
    assert main(["leaderboard", "--results", str(run), "--json"]) == 0
    lb = loads(capsys.readouterr().out)
    for e in lb["entries"]:
        assert e["verdict"] == "cpu_path" and e["E_lib"] is None and e["U_roof"] is None and e["S"] is None
        assert e["t_kernel_ms"] is None and e["bound"] is None
    assert all(r["mean_s"] is None and r["geomean_e_lib"] is None for r in lb["ranking"])  # not ranked by speed
    assert [r["label"] for r in lb["ranking"]] == ["cpu-fast@1", "cpu-slow@1"]  # by name, the last tie-break

    assert main(["compare", "cpu-slow", "cpu-fast", "--results", str(run), "--n-boot", "200"]) == 0
    text = capsys.readouterr().out
    assert CPU_NOTE in text and "cpu_path" in text and "geomean t_b/t_a: -" in text

    assert main(["report", "--results", str(run), "--out", str(tmp_path / "rep")]) == 0
    html = (tmp_path / "rep" / "report.html").read_text()
    md = (tmp_path / "rep" / "report.md").read_text()
    for page in (html, md):
        assert CPU_NOTE in page and "authoring_defect" not in page
    fast = next(r for r in load_results(run) if r.generator == "cpu-fast")
    e_lib = f"{fast.screening.e_lib:.3g}"
    assert e_lib not in html and e_lib not in md


def test_cpu_path_never_outranks_a_gpu_record_by_speed(tmp_path, capsys):
    f = floor_ms("layernorm", LN1)
    cpu = record("cpu-gen", "1", "layernorm", LN1, t_kernel=1.05 * f, t_library=3 * f, env=ENV_CPU)
    gpu = record("gpu-gen", "1", "layernorm", LN1, t_kernel=2.5 * f, t_library=2 * f)
    run = _store(tmp_path / "mixed", [cpu, gpu])
    assert main(["leaderboard", "--results", str(run), "--json"]) == 0
    lb = loads(capsys.readouterr().out)
    assert [r["label"] for r in lb["ranking"]] == ["gpu-gen@1", "cpu-gen@1"]


@pytest.mark.parametrize("argv,match", [
    (["compare", "gen-x", "gen-a@1"], "no generator 'gen-x' in these results; did you mean"),
    (["compare", "gen-a@1", "gen-a@3"], "did you mean 'gen-a@2', 'gen-a@1'"),
    (["report", "--baseline", "gen-bb"], "no generator 'gen-bb' in these results; did you mean 'gen-b'"),
    (["problems", "list", "--category", "normalisation"], "unknown category 'normalisation'; did you mean 'normalization'"),
    (["problems", "show", "layernrom"], "did you mean 'layernorm'"),
    (["problems", "show", "gemm"], "'gemm' is a category, not a problem: kernelgate problems list --category gemm"),
])
def test_unknown_names_get_did_you_mean_and_fail(argv, match, results_dir, tmp_path, capsys):
    if argv[0] in ("compare", "report"):
        argv = argv + ["--results", str(results_dir)] + (["--out", str(tmp_path / "r")] if argv[0] == "report" else [])
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    assert match in str(exc.value.code) + capsys.readouterr().err


@pytest.mark.parametrize("argv,match", [
    (["leaderbaord"], "invalid choice: 'leaderbaord'; did you mean 'leaderboard'?"),
    (["problems", "lst"], "did you mean 'list'?"),
    (["leaderboard", "--by", "categroy"], "did you mean 'category'?"),
])
def test_mistyped_choices_get_did_you_mean(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and match in capsys.readouterr().err


def test_report_says_why(tmp_path):
    """Failures show their error text, records their warnings and findings; the roofline names its points."""
    pytest.importorskip("matplotlib")
    recs = suite()
    long_error = ("triton.compiler.errors.CompilationError: at 12:8: the block size BLOCK_SIZE_N must be a power of "
                  "two, got 3000; pick one of 2048 or 4096\nTraceback line 2\nTraceback line 3")
    recs.append(record("gen-b", "1", "gemm_square", "fp16-8192", candidate="gemm_square__v9.py", status="COMPILE_ERROR",
                       error=long_error))
    recs.append(recs[2].replace(warnings=("kernel timing is noisy: IQR/median = 42% (> 10%)",)))
    run = _store(tmp_path / "run", recs)
    assert main(["report", "--results", str(run), "--out", str(tmp_path / "rep")]) == 0
    html = (tmp_path / "rep" / "report.html").read_text()
    md = (tmp_path / "rep" / "report.md").read_text()
    first_line = long_error.splitlines()[0]
    assert first_line in html and first_line in md and "Traceback line 3" in html  # the rest behind <details>
    assert "kernel timing is noisy: IQR/median = 42%" in html and "kernel timing is noisy" in md
    assert "serial loop" in html and "use tl.sum" in html  # the finding's message and hint, not only its rule
    assert "<title>gen-b@1 layernorm.py" in html  # roofline hover names


def test_report_compares_generator_versions_like_compare(results_dir, tmp_path, capsys):
    assert main(["report", "--results", str(results_dir), "--out", str(tmp_path / "rep"), "--n-boot", "300"]) == 0
    html = (tmp_path / "rep" / "report.html").read_text()
    md = (tmp_path / "rep" / "report.md").read_text()
    assert 'id="comparison"' in html and "## Generator comparison" in md
    assert main(["compare", "gen-a@1", "gen-a@2", "--results", str(results_dir), "--n-boot", "300",
                 "--json", str(tmp_path / "c.json")]) == 0
    pair = next(p for p in loads((tmp_path / "c.json").read_bytes())["pairs"]
                if (p["problem"], p["workload"]) == ("layernorm", LN1))
    cell = f"{pair['ratio']:.3f} [{pair['ci95'][0]:.3f}, {pair['ci95'][1]:.3f}]"
    assert cell in html and cell in md  # gen-a@2 against its previous version, the numbers of 'compare'


def test_lint_fails_on_a_file_that_does_not_parse(tmp_path, capsys):
    bad = tmp_path / "layernorm.py"
    bad.write_text("import torch\n\ndef forward(x:\n    return x\n")
    assert main(["lint", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:3:12: SyntaxError: '(' was never closed" in out and "1 that do not parse" in out


def test_compare_shows_whole_words_of_error_texts(tmp_path, capsys):
    words = ("CUDA out of memory while allocating the accumulator tile for program 17 of the persistent grid; "
             "reduce BLOCK_M or num_stages and try again")
    recs = [record("a", "1", "layernorm", LN1, t_kernel=1.0, t_library=1.0),
            record("b", "1", "layernorm", LN1, status="RUNTIME_ERROR", error=words)]
    assert main(["compare", "a", "b", "--results", str(_store(tmp_path / "r", recs)), "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    shown = " ".join(line.strip() for line in out.split("errors (first line")[1].splitlines()[1:] if line.strip()
                     and not line.startswith(("geomean", "correct:", "improved", "regressed", "mixed", "rule")))
    assert words in shown


def test_table_wraps_long_cells_at_words():
    from harness.commands._common import error_lines, table
    from harness.records import ErrorInfo

    msg = "the quick brown fox jumps over the lazy dog " * 3
    text = table([["x", msg.strip()]], ["id", "detail"], wrap={"detail": 30})
    lines = text.splitlines()[2:]
    assert len(lines) > 2 and all(len(line) <= 34 for line in lines)
    assert " ".join(line[4:].strip() for line in lines) == msg.strip()
    cell = error_lines(ErrorInfo("OutOfMemoryError", "a b c\nsecond line"), 20, where="runs/x/results.jsonl")
    assert cell.splitlines()[0] == "OutOfMemoryError: a" and "(more: runs/x/results.jsonl)" in cell


def test_results_default_to_runs_latest(results_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for argv in (["leaderboard"], ["compare", "gen-a@1", "gen-a@2"], ["report"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        text = str(exc.value.code)
        assert "runs/latest/results.jsonl" in text and "kernelgate run" in text and "--results" in text
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "latest").symlink_to(results_dir)
    assert main(["leaderboard"]) == 0 and "gen-a@2" in capsys.readouterr().out
    assert main(["compare", "gen-a@1", "gen-a@2", "--n-boot", "200"]) == 0
    assert main(["report"]) == 0
    assert (tmp_path / "runs" / "latest" / "report" / "report.html").exists()


def _all_parsers(parser, path=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                yield (*path, name), sp
                yield from _all_parsers(sp, (*path, name))


def test_every_subcommand_help_has_examples():
    from harness.cli import build_parser

    found = list(_all_parsers(build_parser()))
    assert {("leaderboard",), ("compare",), ("report",), ("lint",), ("problems", "list")} <= {p for p, _ in found}
    missing = [" ".join(p) for p, sp in found if "examples:" not in (sp.epilog or "")]
    assert not missing, f"'--help' without an 'examples:' epilog: {', '.join(missing)}"
