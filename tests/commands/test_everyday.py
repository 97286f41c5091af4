"""What a new user hits in the first hour: the CLI paths that must be right, each through ``harness.cli.main``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.results.store import load_results

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "submissions" / "triton-reference" / "gelu.py"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Never read or write the user's calibration cache."""
    monkeypatch.setenv("KERNELGATE_CACHE", str(tmp_path / "kg-cache"))


def _broken_problem_suite(tmp_path: Path) -> tuple[Path, Path]:
    """A problems folder where ``relu2.py`` raises at import, and a submission with a candidate for it."""
    probs = tmp_path / "probs"
    probs.mkdir()
    (probs / "gelu.py").write_text((ROOT / "problems" / "elementwise" / "gelu.py").read_text())
    (probs / "relu2.py").write_text("import torch\nraise RuntimeError('boom in the problem file')\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "relu2.py").write_text(GELU.read_text())
    return probs, sub


def test_a_problem_file_that_fails_at_import_is_not_blamed_on_the_candidate(tmp_path, capsys):
    """Was: the candidate got INVALID_CANDIDATE "'relu2.py' matches no loaded problem ... did you mean 'gelu'?"."""
    probs, sub = _broken_problem_suite(tmp_path)
    out = tmp_path / "out"
    assert main(["run", str(sub), "--problems", str(probs), "--device", "cpu", "--no-timing", "--no-progress",
                 "--yes-execute", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    (rec,) = load_results(out)
    assert rec.status.value == "HARNESS_ERROR" and rec.error.type == "ProblemNotLoaded"
    assert f"problem file {probs / 'relu2.py'} did not load" in rec.error.message
    assert "boom in the problem file" in rec.error.message and "fix the problem file" in rec.error.message
    assert "matches no loaded problem" not in text and "did not load" in text


def test_only_naming_a_problem_whose_file_failed_says_so(tmp_path):
    probs, sub = _broken_problem_suite(tmp_path)
    with pytest.raises(SystemExit, match="--only relu2: problem file .*relu2.py did not load.*boom") as exc:
        main(["run", str(sub), "--problems", str(probs), "--device", "cpu", "--yes-execute", "--only", "relu2",
              "--out", str(tmp_path / "out")])
    assert exc.value.code not in (0, None)


def test_lint_reads_a_markdown_reply_as_run_executes_it(tmp_path, capsys):
    """Was: 'reply.py:1:5: SyntaxError: invalid syntax' on the reply's prose, though 'run' executes its fence."""
    code = (ROOT / "submissions" / "defects" / "layernorm__tl_serial_row.py").read_text()
    assert main(["lint", str(ROOT / "submissions" / "defects" / "layernorm__tl_serial_row.py")]) == 0
    plain = capsys.readouterr().out
    line = int(plain.split("[sequential-reduction]")[0].rsplit(":", 2)[-2])
    reply = tmp_path / "layernorm.py"
    reply.write_text(f"Sure! Here is the kernel:\n\n```python\n{code}```\nIt is fast.\n")
    assert main(["lint", str(reply)]) == 0
    out = capsys.readouterr().out
    assert "SyntaxError" not in out and "code extracted from a Markdown reply: the ```python fence at lines 4-" in out
    assert f"{reply}:{line + 3}: [sequential-reduction]" in out  # the line in the reply, not in the fence
    bad = tmp_path / "gelu.py"
    bad.write_text("Sure!\n```python\ndef f(:\n```\n")
    assert main(["lint", str(bad)]) == 1
    assert "a Markdown reply whose 1 Python fence(s) do not parse: lines 3-3: line 1, column 7" in capsys.readouterr().out


def test_cpu_path_checks_correctness_without_timing_unless_asked(default_cpu_run, tmp_path, capsys):
    """Was: the quick start spent 28% of its worker time timing interpreted kernels whose CPU times get no verdict
    (65 s for one naive convolution). The CPU path now checks correctness only; --timing still times it.
    The run without --timing is the shared one (conftest.py: the same GELU, the same seed)."""
    assert default_cpu_run.code == 0
    assert "CPU path: correctness only, no timing" in default_cpu_run.err and "ceilings:" not in default_cpu_run.err
    (rec,) = [r for r in load_results(default_cpu_run.results) if r.candidate == "sub/gelu.py"]
    assert rec.status.value == "PASSED" and rec.correctness.rounds_passed >= 5
    assert rec.timing is None and rec.library_timing is None and rec.screening is None

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "gelu.py").write_text(GELU.read_text())
    base = ["run", str(sub), "--device", "cpu", "--no-progress", "--yes-execute", "--seed", "7"]
    assert main([*base, "--timing", "--out", str(tmp_path / "timed")]) == 0
    assert "no timing" not in capsys.readouterr().err
    (timed,) = load_results(tmp_path / "timed")
    assert timed.status.value == "PASSED" and timed.timing is not None and timed.library_timing is not None
    assert timed.screening is None  # timed on the CPU path, still no verdict


def test_gpu_path_still_times_by_default():
    from harness.serve.presets import timing_default  # the one rule of the CLI, the API and the service

    assert timing_default("cuda") is True and timing_default("cpu") is False


def _version(tmp_path: Path, version: str, files: dict[str, str]) -> Path:
    folder = tmp_path / f"mymodel-{version}"
    folder.mkdir()
    (folder / "manifest.json").write_text(f'{{"generator": "mymodel", "version": "{version}"}}')
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_resume_evaluates_an_unchanged_file_of_a_new_generator_version(tmp_path, capsys):
    """Was: a file identical in mymodel@1 and mymodel@2 had one result id, so --resume skipped v2's copy
    as already recorded. (A file that does not parse is recorded without a worker: the planner's --resume
    bookkeeping is the same for every record.)"""
    same = {"layernorm.py": "def forward(x:\n    return x\n"}
    v1, v2 = _version(tmp_path, "1", same), _version(tmp_path, "2", same)
    out = tmp_path / "out"
    base = ["run", "--device", "cpu", "--no-progress", "--yes-execute", "--out", str(out), "--resume"]
    assert main([*base[:1], str(v1), *base[1:]]) == 0
    assert main([*base[:1], str(v2), *base[1:]]) == 0
    assert "already recorded" not in capsys.readouterr().out
    recs = load_results(out)
    assert sorted((r.generator_version, r.status.value) for r in recs) == [("1", "COMPILE_ERROR"), ("2", "COMPILE_ERROR")]
    assert recs[0].job_id != recs[1].job_id
    assert main([*base[:1], str(v2), *base[1:]]) == 0  # v2 again: now it is recorded
    assert "1 candidate(s) already recorded, skipped" in capsys.readouterr().out
    assert len(load_results(out)) == 2

    assert main(["compare", "mymodel@1", "mymodel@2", "--results", str(out), "--n-boot", "100"]) == 0
    assert "only in" not in capsys.readouterr().out


def test_candidate_files_in_a_subfolder_are_named_not_ignored(tmp_path):
    sub = tmp_path / "sub"
    (sub / "attempts").mkdir(parents=True)
    (sub / "attempts" / "gelu.py").write_text(GELU.read_text())
    with pytest.raises(SystemExit, match=r"subfolders attempts/ \(1 file\) would not be evaluated.*--recursive") as exc:
        main(["run", str(sub), "--device", "cpu", "--no-progress", "--yes-execute", "--out", str(tmp_path / "out")])
    assert exc.value.code not in (0, None)


def test_bad_shard_is_refused_before_the_problems_load(monkeypatch):
    """Was: '--shard 3/2' was refused after 11 s of loading the problems."""
    import harness.problems.registry as registry

    def no_loading(*a, **k):
        raise AssertionError("the problems were loaded before --shard was checked")

    monkeypatch.setattr(registry, "load_registry", no_loading)
    with pytest.raises(SystemExit, match="--shard '3/2': K must be between 1 and N"):
        main(["run", "sub", "--shard", "3/2", "--yes-execute", "--device", "cpu"])


def test_run_summary_shows_the_whole_first_line_of_an_error():
    """Was: the terminal summary cut errors at 60 characters ("did you mean 'layernorm', 'rmsn")."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from synth_results import LN1, record

    from harness.commands.run import summary_table

    msg = ("'layernrom.py' matches no loaded problem: a candidate is named after a problem id ('ID.py' or "
           "'ID__VARIANT.py'); did you mean 'layernorm', 'rmsnorm', 'groupnorm'?")
    failed = record("g", "1", "layernorm", LN1, status="INVALID_CANDIDATE", error=msg + "\nsecond line")
    text = summary_table([failed])
    assert msg in text and "second line" not in text


def test_run_refuses_to_execute_candidates_without_yes_execute(tmp_path):
    """Was: without --yes-execute, 'run' printed a note and ran the candidates anyway."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "gelu.py").write_text(GELU.read_text())
    with pytest.raises(SystemExit, match="executes their code .* pass --yes-execute to confirm") as exc:
        main(["run", str(sub), "--device", "cpu", "--no-progress", "--out", str(tmp_path / "out")])
    assert exc.value.code not in (0, None)
    assert not (tmp_path / "out").exists() and not any(tmp_path.glob("**/results.jsonl"))


def test_cpu_workers_run_torch_on_one_thread(default_cpu_run):
    """Was: workers ran PyTorch with 2 OpenMP threads on a loaded 2-core machine, so library and kernel times
    measured thread wake-up (F.layer_norm on 16x256: 32 ms with 2 threads, 0.006 ms with 1). The candidate
    (``gelu__threads.py`` of the shared run, conftest.py) reports what its worker gives it through its error
    message."""
    assert default_cpu_run.code == 0
    (rec,) = [r for r in load_results(default_cpu_run.results) if r.candidate == "sub/gelu__threads.py"]
    assert rec.status.value == "RUNTIME_ERROR" and "threads=1 omp=1" in rec.error.message, rec.error
