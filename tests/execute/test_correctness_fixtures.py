"""Value profiles and held-out shapes on the CPU path, as CI runs them (tests/execute/fixtures/correctness/).

* hacks/: kernels right on the public inputs and shape only (no max subtraction, one-pass variance, unmasked
  tiles, a hard-coded shape; on KernelBench's loss problems at their public size in half precision, a closed-form
  expectation and a strided subsample). Each must be INCORRECT, its error naming the value profile or the held-out
  shape that caught it; the loss hacks must pass the standard profile (the profiles are what catch them).
* honest/: Triton kernels of 14 KernelBench level-1 problems across the five categories (kernelbench/, reduced
  sizes), and the bundled reference kernels at their smoke sizes: each must pass every value profile the probe
  found fair and every held-out shape it was judged on.

Every run gates on the held-out shapes (``heldout_gate``), so a held-out failure is the record's status.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent.options import RunOptions
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry
from harness.problems.sizes import parse_set_items
from harness.records import Status

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "execute" / "fixtures" / "correctness"
KERNELBENCH = FIX / "kernelbench"
LOSS_HACKS = {"98_KLDivLoss__closed_form.py", "94_MSELoss__strided_subsample.py"}
PUBLIC_LOSS_SIZES = ["98_KLDivLoss:batch_size=128", "98_KLDivLoss:input_shape=(4096,)",
                     "94_MSELoss:batch_size=128", "94_MSELoss:input_shape=(4096,)"]
"""KernelBench's own sizes of its loss problems (the fixtures' files are reduced for the honest kernels)."""

CAUGHT_BY = {
    "softmax__no_max_subtraction.py": ("profile", {"large", "row_offset", "heavy_tail"}),
    "layernorm__one_pass_variance.py": ("profile", {"row_offset", "near_one"}),
    "sum_dim__unmasked_tiles.py": ("shape", None),
    "gelu__hardcoded_shape.py": ("shape", None),
    "98_KLDivLoss__closed_form.py": ("profile", {"flat"}),
    "94_MSELoss__strided_subsample.py": ("profile", {"large", "row_offset", "heavy_tail", "uniform", "many_zeros"}),
}


def _copy(names, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for n in names:
        (dest / n).write_bytes((FIX / "hacks" / n).read_bytes())
    (dest / "manifest.json").write_bytes((FIX / "hacks" / "manifest.json").read_bytes())
    return dest


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("correctness")
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=1, time_kernels=False,
                      compile_timeout_s=300, round_timeout_s=300, base_seed=20261205, heldout_gate=True)
    env = envmod.snapshot("cpu")
    hacks = sorted(p.name for p in (FIX / "hacks").glob("*.py"))
    bundled_hacks = _copy([h for h in hacks if h not in LOSS_HACKS], out / "src" / "hacks")
    loss_hacks = _copy(sorted(LOSS_HACKS), out / "src" / "loss-hacks")

    def run(name, folders, registry, tags=("smoke",)):
        req = EvalRequest(submissions=folders, registry=registry, out_dir=out / name, options=opts, env=env,
                          workload_tags=tags, progress=False)
        return name, evaluate(req)

    kb = load_registry(KERNELBENCH)
    kb_fp16 = load_registry(KERNELBENCH, overrides=parse_set_items(PUBLIC_LOSS_SIZES), precision="float16")
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(run, "hacks", [bundled_hacks], load_registry()),
                pool.submit(run, "loss-hacks", [loss_hacks], kb_fp16),
                pool.submit(run, "honest", [FIX / "honest"], kb),
                pool.submit(run, "references", [ROOT / "submissions" / "triton-reference"], load_registry())]
        return {name: records for name, records in (j.result() for j in jobs)}


def test_every_hack_is_incorrect_naming_what_caught_it(runs):
    records = {Path(r.candidate).name: r for r in runs["hacks"] + runs["loss-hacks"]}
    assert set(records) == set(CAUGHT_BY)
    for name, (kind, profiles) in CAUGHT_BY.items():
        r = records[name]
        assert r.status in (Status.INCORRECT_NUMERICAL, Status.INCORRECT_SHAPE, Status.RUNTIME_ERROR), (name, r.status)
        message = r.error.message
        if kind == "shape":
            assert "held-out shape" in message and r.heldout is not None and r.heldout.gated, (name, message)
            assert r.heldout.generalizes is False
        else:
            assert r.correctness.failed_profile in profiles, (name, r.correctness.failed_profile, message)
            assert f"value profile '{r.correctness.failed_profile}'" in message
        assert r.correctness is not None and r.correctness.worst is not None or r.status is not Status.INCORRECT_NUMERICAL


def test_the_loss_hacks_pass_the_public_distribution(runs):
    """At KernelBench's own size in half precision, the standard profile alone would have passed them."""
    for r in runs["loss-hacks"]:
        rounds = r.correctness.round_profiles
        assert rounds[0] == "normal" and r.correctness.failed_round > 0, (r.candidate, rounds)


def test_a_value_bug_found_at_a_heldout_shape_fails_the_workload_itself(runs):
    """A profile the public rounds did not reach runs at a held-out shape first; where it fails there, it runs at
    the public shape too, and the failure is the workload's (not only its generalization's)."""
    for r in runs["hacks"] + runs["loss-hacks"]:
        if CAUGHT_BY[Path(r.candidate).name][0] == "profile":
            assert "held-out shape" not in r.error.message, (r.candidate, r.error.message)


def _fair(r) -> set[str]:
    return {p.name for p in r.correctness.profiles if p.fair} | {"normal"}


def test_honest_kernels_pass_every_fair_profile_and_heldout_shape(runs):
    recs = runs["honest"] + runs["references"]
    assert len(runs["honest"]) == 14 and len(runs["references"]) == len(list((ROOT / "submissions" /
                                                                             "triton-reference").glob("*.py")))
    categories = {r.category for r in runs["honest"]}
    assert categories == {"elementwise", "normalization", "reduction", "convolution", "gemm"}
    bad = [(r.candidate, r.status.value, r.error.message[:300] if r.error else "") for r in recs
           if r.status is not Status.PASSED]
    assert not bad, bad
    for r in recs:
        assert r.heldout is not None and r.heldout.judged >= 1 and r.heldout.generalizes, (r.candidate, r.heldout)
        used = set(r.correctness.round_profiles) | {p for s in r.heldout.shapes for p in s.round_profiles}
        assert used == _fair(r), (r.candidate, r.correctness.round_profiles, r.heldout.shapes)  # every fair one
