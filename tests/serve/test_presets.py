"""The service's presets are the CLI's protocols (harness.serve.presets)."""

from __future__ import annotations

import pytest

from harness.measure.timing import TimingConfig
from harness.serve.presets import DEFAULT_PRESET, N_ROUNDS_MIN, PRESETS, get_preset


def test_quick_is_the_clis_quick_and_standard_its_default():
    """A record from the service's ``quick`` must be comparable with one from ``kernelgate run --quick``."""
    assert PRESETS["quick"].timing_config("cuda") == TimingConfig.for_device("cuda", quick=True)
    assert PRESETS["standard"].timing_config("cuda") == TimingConfig.for_device("cuda")
    assert DEFAULT_PRESET == "quick"


def test_every_preset_takes_the_cpu_protocol_on_the_cpu_and_enough_rounds():
    for preset in PRESETS.values():
        assert preset.timing_config("cpu") == TimingConfig.for_device("cpu")
        assert preset.rounds >= N_ROUNDS_MIN


def test_more_thorough_presets_take_more_samples():
    q, s, t = (PRESETS[k].timing_config("cuda") for k in ("quick", "standard", "thorough"))
    assert q.samples < s.samples < t.samples and q.budget_ms < s.budget_ms < t.budget_ms


def test_an_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match=r"'fast' is not one of \['quick', 'standard', 'thorough'\]"):
        get_preset("fast")


def test_one_timing_rule_for_every_caller():
    from harness.serve.presets import time_kernels, timing_default

    assert timing_default("cuda") and not timing_default("cpu")
    assert [time_kernels("cpu", t) for t in (None, True, False)] == [False, True, False]
    for preset in PRESETS.values():
        assert preset.run_options("cpu").time_kernels is False and preset.run_options("cuda").time_kernels is True
        assert preset.run_options("cpu", timing=True).time_kernels is True
