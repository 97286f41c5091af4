"""Smoke tests for the core subcommands (each runs through harness.cli.main)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def test_every_subcommand_has_help(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"problems", "env", "run", "calibrate", "lint"} <= set(sub.choices)
    for name, sp in sub.choices.items():
        text = sp.format_help()
        assert len(text) > 200, f"'{name} --help' is too thin"


def test_problems_list_shows_suite(capsys):
    assert main(["problems", "list"]) == 0
    out = capsys.readouterr().out
    assert "20 problems in 5 categories" in out
    for pid in ("layernorm", "conv2d_3x3", "gemm_square", "softmax", "gelu"):
        assert pid in out


def test_problems_show_and_unknown(capsys):
    assert main(["problems", "show", "layernorm"]) == 0
    assert "native_layer_norm" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="did you mean 'layernorm'"):
        main(["problems", "show", "layernrom"])


def test_problems_show_kernelbench_file_is_derived(capsys):
    kb = ROOT / "tests" / "fixtures" / "kernelbench"
    assert main(["problems", "show", "1_Square_matrix_multiplication_", "--problems", str(kb), "--set", "N=128"]) == 0
    out = capsys.readouterr().out
    assert "derived" in out and "4.19 MFLOP" in out


def test_env_reports_cpu_path(capsys):
    assert main(["env", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "Triton interpreter" in out and "lowered to CUDA source" in out


def test_bad_set_option_is_a_clear_error():
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        main(["problems", "list", "--set", "oops"])


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "kernelgate" in out.stdout


RELU = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


def test_run_kernelbench_folder_with_mapping_and_set(tmp_path, capsys):
    """A KernelBench run folder against KernelBench problem files, fitted to the CPU with --set."""
    sub = tmp_path / "kb-run"
    sub.mkdir()
    (sub / "level_1_problem_19_sample_0_kernel.py").write_text(RELU)
    out = tmp_path / "out"
    code = main(["run", str(sub), "--device", "cpu", "--problems", str(ROOT / "tests" / "fixtures" / "kernelbench"),
                 "--kernelbench-map", "auto", "--set", "batch_size=4", "--set", "dim=256", "--only", "19_ReLU",
                 "--out", str(out), "--no-progress", "--yes-execute", "--leaderboard", str(out / "lb.json"),
                 "--report", str(out / "report")])
    assert code == 0
    text = capsys.readouterr().out
    assert "kb-run/level_1_problem_19_sample_0_kernel.py" in text and "PASSED" in text
    assert (out / "results.jsonl").exists()
    assert (out / "lb.json").exists() and (out / "report" / "report.html").exists()
    assert "kb-run" in text.split("leaderboard written")[0]
    # no --seed: a fresh secret base seed, recorded so the run can be replayed
    from harness.results.store import load_results

    (rec,) = load_results(out)
    assert isinstance(rec.base_seed, int) and f"--seed {rec.base_seed} replays" in text


def test_unreadable_problem_file_is_named_and_others_load(tmp_path, capsys):
    good = ROOT / "tests" / "fixtures" / "kernelbench" / "19_ReLU.py"
    (tmp_path / "19_ReLU.py").write_text(good.read_text())
    (tmp_path / "broken_link.py").symlink_to(tmp_path / "does_not_exist.py")
    assert main(["problems", "list", "--problems", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "broken_link.py: field '<file>': cannot be read" in captured.err
    assert "19_ReLU" in captured.out


@pytest.mark.parametrize("argv,match", [
    (["run"], "required"),
    (["run", "x", "--shard", "5/2"], "K must be between 1 and N"),
    (["run", "x", "--jobs", "many"], "invalid int value"),
    (["run", "x", "--gpu-memory-fraction", "1.5"], "--gpu-memory-fraction must be in (0, 1]"),
    (["run", "x", "--check-slots", "0"], "--check-slots must be at least 1"),
    (["problems"], "required"),
])
def test_bad_cli_arguments_are_clear(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    text = str(exc.value) + capsys.readouterr().err
    assert match in text


def test_missing_submission_folder_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="not a folder"):
        main(["run", str(tmp_path / "nope"), "--device", "cpu", "--out", str(tmp_path / "o"), "--no-timing",
              "--no-progress", "--yes-execute"])


def test_run_with_relative_out_folder(default_cpu_run):
    """The README's command uses a relative --out; workers run elsewhere, so every path they get is absolute.
    (The shared run of conftest.py: ``run sub ... --out runs/rel`` from the folder holding ``sub``.)"""
    from harness.results.store import load_results

    assert default_cpu_run.code == 0
    assert "PASSED" in default_cpu_run.out
    (rec,) = [r for r in load_results(default_cpu_run.results) if r.candidate == "sub/gelu.py"]
    assert rec.status.value == "PASSED"


@pytest.mark.parametrize("argv, hint", [
    (["--only", "layernrom"], "did you mean 'layernorm'"),
    (["--workloads", "smok"], "did you mean 'smoke'"),
    (["--only", "gelu", "--workloads", "smok"], "did you mean 'smoke'"),
    (["--tags", "smokee"], "did you mean 'smoke'"),
])
def test_run_refuses_selection_typos_before_anything_runs(tmp_path, argv, hint):
    """A typo in --only/--workloads/--tags used to exit 0 with zero records (and a false 'already recorded')."""
    sub = ROOT / "submissions" / "triton-reference"
    with pytest.raises(SystemExit, match=hint) as exc:
        main(["run", str(sub), "--device", "cpu", "--yes-execute", "--out", str(tmp_path / "out"), *argv])
    assert exc.value.code not in (0, None)
    assert not (tmp_path / "out" / "results.jsonl").exists()
