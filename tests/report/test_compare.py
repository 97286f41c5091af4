"""Paired generator comparison: ratios, bootstrap CIs, noise rule, env warnings, name resolution."""

from __future__ import annotations

import pytest
from synth_results import ENV_OTHER, GM, LN1, LN2, SM, floor_ms, record, suite

from harness.report.compare import compare_generators, format_comparison, resolve_generator


def _pair(d: dict, problem: str, workload: str) -> dict:
    return next(p for p in d["pairs"] if (p["problem"], p["workload"]) == (problem, workload))


def test_same_run_uses_raw_kernel_time_ratio():
    d = compare_generators(suite(), "gen-a@1", "gen-b@1", n_boot=500)
    p = _pair(d, "layernorm", LN1)
    assert p["mode"] == "raw"
    assert p["ratio"] == pytest.approx(6.0 / 3.0)
    lo, hi = p["ci95"]
    assert lo < p["ratio"] < hi and lo > 1
    assert p["change"] == "slower"
    assert _pair(d, "softmax", SM)["change"] == "broke"
    assert _pair(d, "gemm_square", GM)["change"] == "fixed"
    assert d["regressed"] == ["layernorm", "softmax"] and d["improved"] == ["gemm_square"]
    assert d["summary"]["mode"] == "raw"


def test_different_runs_normalise_by_library_time():
    d = compare_generators(suite(), "gen-a@1", "gen-a@2", n_boot=500)
    p = _pair(d, "layernorm", LN1)
    assert p["mode"] == "library_normalized"
    assert p["ratio"] == pytest.approx(p["E_lib_a"] / p["E_lib_b"])
    assert p["change"] == "faster" and p["delta_S"] > 0
    s = d["summary"]
    lo, hi = s["ci95"]
    assert lo <= s["geomean_ratio"] <= hi < 1
    assert s["n_timed_pairs"] == 3 and s["n_pairs"] == 4
    assert d["improved"] == ["gemm_square", "layernorm", "softmax"] and not d["regressed"]
    assert not d["warnings"]  # same GPU, same versions


def test_changes_within_noise_or_below_min_effect_are_not_flagged():
    f = floor_ms("layernorm", LN1)
    noisy = [record("a", "1", "layernorm", LN1, t_kernel=2 * f, t_library=2 * f, rel_spread=0.2, seed=1),
             record("b", "1", "layernorm", LN1, t_kernel=1.97 * f, t_library=2 * f, rel_spread=0.2, seed=2)]
    p = compare_generators(noisy, "a", "b", n_boot=500)["pairs"][0]
    assert p["ci95"][0] < 1 < p["ci95"][1] and p["change"] == "same"
    # a device without a measured run-to-run floor: the interval is the within-run part alone
    tiny = [record("a", "1", "layernorm", LN2, t_kernel=2 * f, t_library=2 * f, rel_spread=0.001, seed=1, env=ENV_OTHER),
            record("b", "1", "layernorm", LN2, t_kernel=1.99 * f, t_library=2 * f, rel_spread=0.001, seed=2, env=ENV_OTHER)]
    d = compare_generators(tiny, "a", "b", n_boot=500)
    p = d["pairs"][0]
    assert p["ci95"][1] < 1  # statistically clear within the run ...
    assert p["change"] == "same"  # ... but a 0.5% change is below min_effect
    assert any("no run-to-run noise floor is recorded for NVIDIA H100" in w for w in d["warnings"])


def test_environment_mismatch_warns_and_is_printed():
    recs = suite() + [record("gen-d", "1", "layernorm", LN1, t_kernel=1.0, t_library=1.0, env=ENV_OTHER, run_id="r9")]
    d = compare_generators(recs, "gen-a@2", "gen-d", n_boot=200)
    assert any("different environments" in w for w in d["warnings"])
    text = format_comparison(d)
    assert "warning: the two generators ran in different environments" in text


def test_deterministic_for_a_seed():
    a = compare_generators(suite(), "gen-a@1", "gen-a@2", n_boot=300, seed=7)
    b = compare_generators(suite(), "gen-a@1", "gen-a@2", n_boot=300, seed=7)
    assert a == b


def test_only_one_side_and_untimed_pairs():
    recs = [record("a", "1", "layernorm", LN1), record("b", "1", "layernorm", LN1),
            record("a", "1", "softmax", SM)]
    d = compare_generators(recs, "a", "b", n_boot=200)
    assert d["only_a"] == ["softmax"] and d["pairs"][0]["change"] == "untimed"
    assert d["summary"]["geomean_ratio"] is None
    assert "no workload was timed on both sides" in format_comparison(d)


def test_resolve_generator_errors():
    recs = suite()
    assert resolve_generator(recs, "gen-b") == ("gen-b", "1")
    with pytest.raises(ValueError, match="has 2 versions"):
        resolve_generator(recs, "gen-a")
    with pytest.raises(ValueError, match="did you mean"):
        resolve_generator(recs, "gen-bb")
    with pytest.raises(ValueError, match="both sides"):
        compare_generators(recs, "gen-b", "gen-b@1")
    with pytest.raises(ValueError, match="n_boot"):
        compare_generators(recs, "gen-a@1", "gen-b", n_boot=10)


def test_format_comparison_text():
    text = format_comparison(compare_generators(suite(), "gen-a@1", "gen-a@2", n_boot=300))
    assert "geomean t_b/t_a" in text and "95% CI" in text and "b faster" in text
    assert "improved: gemm_square, layernorm, softmax" in text
