"""Leaderboard aggregates, ranking, determinism, untimed runs and the text table."""

from __future__ import annotations

import pytest
from synth_results import GM, LN1, LN2, SM, floor_ms, record, suite

from harness.jsonio import dumps, loads
from harness.report.leaderboard import SCHEMA, build_leaderboard, format_leaderboard, write_leaderboard


def _gen(lb: dict, label: str) -> dict:
    return next(g for g in lb["generators"] if g["label"] == label)


def test_schema_and_structure():
    lb = build_leaderboard(suite(), source="synthetic")
    assert lb["schema"] == SCHEMA
    assert [e["label"] for e in lb["ranking"]] == ["gen-a@2", "gen-a@1", "gen-b@1", "gen-c@1"]
    assert [e["rank"] for e in lb["ranking"]] == [1, 2, 3, 4]
    assert "mean speed-of-light score S" in lb["ranking_rule"]
    assert lb["inputs"]["n_superseded"] == 1 and lb["inputs"]["n_records"] == 15
    assert lb["thresholds"]["tau_lib"] == 0.8 and lb["thresholds"]["source"] == "records"
    assert len(lb["envs"]) == 2
    row = lb["entries"][0]
    for key in ("generator", "version", "candidate", "problem", "category", "workload", "status", "t_kernel_ms",
                "t_library_ms", "E_lib", "U_roof", "U_roof_library", "bound", "verdict", "S", "diagnostics"):
        assert key in row
    assert any("not comparable" in w for w in lb["warnings"])
    assert any("reward_hack" in w for w in lb["warnings"])


def test_superseded_record_is_ignored():
    lb = build_leaderboard(suite())
    gemm = [e for e in lb["entries"] if (e["generator"], e["version"], e["problem"]) == ("gen-a", "2", "gemm_square")]
    assert [e["status"] for e in gemm] == ["PASSED"]


def test_metrics_of_one_generator_by_hand():
    f = floor_ms
    recs = [
        # layernorm: both workloads correct, E_lib 1.25 and 0.8 -> fast_0.5 yes, fast_1 no
        record("g", "1", "layernorm", LN1, t_kernel=2 * f("layernorm", LN1), t_library=2.5 * f("layernorm", LN1)),
        record("g", "1", "layernorm", LN2, t_kernel=2.5 * f("layernorm", LN2), t_library=2 * f("layernorm", LN2)),
        # softmax: correct, E_lib 2.5 -> fast_2 yes
        record("g", "1", "softmax", SM, t_kernel=1.2 * f("softmax", SM), t_library=3 * f("softmax", SM)),
        # gemm: failed
        record("g", "1", "gemm_square", GM, status="RUNTIME_ERROR"),
        # a lowered record on a 4th problem is not attempted
        record("g", "1", "layernorm", LN1, candidate="tl.py", status="LOWERED", dsl="tilelang"),
    ]
    lb = build_leaderboard(recs)
    o = _gen(lb, "g@1")["overall"]
    assert o["n_attempted"] == 4 and o["n_passed"] == 3 and o["n_lowered"] == 1
    assert o["correctness_rate"] == pytest.approx(0.75)
    assert o["n_problems"] == 3 and o["n_problems_correct"] == 2
    fp = o["fast_p"]
    assert fp["0"] == pytest.approx(2 / 3)
    assert fp["0.5"] == pytest.approx(2 / 3)
    assert fp["0.8"] == pytest.approx(1 / 3)  # layernorm's slowest workload has E_lib == 0.8, not > 0.8
    assert fp["1"] == pytest.approx(1 / 3) and fp["2"] == pytest.approx(1 / 3)
    assert o["geomean_e_lib"] == pytest.approx((1.25 * 0.8 * 2.5) ** (1 / 3))
    s = [1 / (1 + 1 / 1.5), 1 / (1 + 1.5 / 1.0), 1 / (1 + 0.2 / 2.0), 0.0]
    assert o["mean_s"] == pytest.approx(sum(s) / 4)
    assert o["verdicts"]["failed"] == 1 and o["verdicts"]["lowered"] == 1
    assert set(_gen(lb, "g@1")["by_category"]) == {"normalization", "reduction", "gemm"}
    assert _gen(lb, "g@1")["by_category"]["gemm"]["mean_s"] == 0.0


def test_ranking_ties_break_on_correctness_then_e_lib():
    f = floor_ms("layernorm", LN1)
    recs = [
        # x and y: identical mean S (0 each: all fail / lowered-free), x has higher correctness? use untimed passes
        record("x", "1", "layernorm", LN1),  # PASSED untimed -> mean_s None
        record("y", "1", "layernorm", LN1, status="COMPILE_ERROR"),  # mean_s 0
        record("z", "1", "layernorm", LN1, t_kernel=2 * f, t_library=2 * f),  # mean_s 0.5
        record("w", "1", "layernorm", LN1, t_kernel=2 * f, t_library=2 * f, candidate="w.py"),
    ]
    lb = build_leaderboard(recs)
    labels = [e["label"] for e in lb["ranking"]]
    assert labels[:2] == ["w@1", "z@1"]  # equal S, equal correctness, equal E_lib: by name
    assert labels[2] == "y@1"  # S = 0 ranks above "no scored record"
    assert labels[3] == "x@1"


def test_deterministic_json(tmp_path):
    recs = suite()
    a = build_leaderboard(recs, source="s")
    b = build_leaderboard(list(reversed(recs)), source="s")
    assert dumps(a) == dumps(b)
    p1, p2 = tmp_path / "a.json", tmp_path / "b.json"
    write_leaderboard(p1, a)
    write_leaderboard(p2, build_leaderboard(recs, source="s"))
    assert p1.read_bytes() == p2.read_bytes()
    assert loads(p1.read_bytes())["schema"] == SCHEMA
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_write_rejects_non_leaderboard(tmp_path):
    with pytest.raises(ValueError, match="not a leaderboard"):
        write_leaderboard(tmp_path / "x.json", {"schema": "other"})


def test_untimed_results_render_dashes():
    recs = [record("cpu", "1", "layernorm", LN1), record("cpu", "1", "softmax", SM, status="INCORRECT_NUMERICAL")]
    lb = build_leaderboard(recs)
    o = _gen(lb, "cpu@1")["overall"]
    assert o["correctness_rate"] == 0.5
    assert o["fast_p"]["0"] == 0.5 and o["fast_p"]["1"] is None
    assert o["geomean_e_lib"] is None and o["geomean_u_roof"] is None and o["mean_s"] is None
    assert lb["thresholds"]["source"].startswith("default")
    text = format_leaderboard(lb)
    row = next(line for line in text.splitlines() if "cpu@1" in line)
    assert " - " in row and "50%" in row


def test_thresholds_argument_is_recorded_and_mismatch_warned():
    lb = build_leaderboard(suite(), thresholds={"tau_lib": 0.9, "tau_roof_memory": 0.5, "tau_roof_compute": 0.25})
    assert lb["thresholds"]["tau_lib"] == 0.9 and lb["thresholds"]["source"] == "argument"
    assert any("other thresholds" in w for w in lb["warnings"])


def test_format_by_category():
    lb = build_leaderboard(suite())
    flat = format_leaderboard(lb)
    by = format_leaderboard(lb, by="category")
    assert "  normalization" in by and "  normalization" not in flat
    assert "fast_1.5" in flat and "ranking:" in flat and "warning:" in flat
    with pytest.raises(ValueError):
        format_leaderboard(lb, by="problem")
