"""Candidate file names -> problem ids: KernelBench ids with '__' and trailing '_', run files with levels, maps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.candidates.discover import SubmissionError, discover
from harness.candidates.naming import ProblemIndex, match_file
from harness.problems.registry import load_registry

KB = Path(__file__).parents[1] / "fixtures" / "kernelbench"
LEVELS = {
    "19_ReLU": 1,
    "1_Square_matrix_multiplication_": 1,
    "50_conv_standard_2D__square_input__square_kernel": 1,
    "50_conv_standard_2D": 1,
    "19_ConvTranspose2d_GELU_GroupNorm": 2,
    "7_mystery": None,
}
INDEX = ProblemIndex(LEVELS)


def m(name: str, **kw):
    return match_file(Path(name), INDEX, **kw)


@pytest.mark.parametrize("name,pid,variant", [
    ("50_conv_standard_2D__square_input__square_kernel.py", "50_conv_standard_2D__square_input__square_kernel", ""),
    ("50_conv_standard_2D__square_input__square_kernel__v2.py", "50_conv_standard_2D__square_input__square_kernel", "v2"),
    ("50_conv_standard_2D__tuned.py", "50_conv_standard_2D", "tuned"),
    ("1_Square_matrix_multiplication_.py", "1_Square_matrix_multiplication_", ""),
    ("1_Square_matrix_multiplication___fast.py", "1_Square_matrix_multiplication_", "fast"),
    ("19_ReLU__a__b.py", "19_ReLU", "a__b"),
])
def test_longest_known_id_then_variant(name, pid, variant):
    got = m(name)
    assert (got.problem_id, got.variant, got.error) == (pid, variant, None)


@pytest.mark.parametrize("name,pid,variant", [
    ("level_1_problem_19_sample_0_kernel.py", "19_ReLU", "sample0"),
    ("level_2_problem_19_sample_3_kernel.py", "19_ConvTranspose2d_GELU_GroupNorm", "sample3"),
    ("level_1_problem_19_solution_2_kernel.py", "19_ReLU", "solution2"),
    ("level1_problem19_sample0.py", "19_ReLU", "sample0"),
    ("level_2_problem_19.py", "19_ConvTranspose2d_GELU_GroupNorm", ""),
    ("2_19.py", "19_ConvTranspose2d_GELU_GroupNorm", ""),
    ("1_19_4.py", "19_ReLU", "v4"),
])
def test_kernelbench_run_files_keep_their_level(name, pid, variant):
    got = m(name)
    assert (got.problem_id, got.variant, got.error, got.how) == (pid, variant, None, "kernelbench run file")


def test_a_level_2_file_never_maps_to_level_1():
    only_level1 = ProblemIndex({"19_ReLU": 1})
    got = match_file(Path("level_2_problem_19_sample_0_kernel.py"), only_level1)
    assert got.error and "level 2 problem 19, which is not loaded (levels loaded: 1)" in got.error
    assert "did you mean '19_ReLU'" in got.error


def test_run_file_for_a_problem_of_unknown_level_says_so():
    got = m("level_1_problem_7_sample_0_kernel.py")
    assert got.error and "7_mystery" in got.error and "no known level" in got.error


def test_run_file_without_level_needs_a_level_folder():
    assert "no level" in m("problem_19_sample_0.py").error
    got = m("problem_19_sample_0.py", folder_level=2)
    assert (got.problem_id, got.variant) == ("19_ConvTranspose2d_GELU_GroupNorm", "sample0")


def test_unmatched_file_gets_did_you_mean():
    got = m("19_Relu.py")
    assert got.how == "unmatched" and got.problem_id == "19_Relu"
    assert "matches no loaded problem" in got.error and "did you mean '19_ReLU'" in got.error


@pytest.mark.parametrize("key", ["level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_0_kernel", "1/19"])
def test_map_by_file_name_stem_or_level_number(key):
    got = m("level_1_problem_19_sample_0_kernel.py", mapping={key: "1_Square_matrix_multiplication_"})
    assert (got.problem_id, got.how, got.variant) == ("1_Square_matrix_multiplication_", "map", "sample0")


def test_map_to_an_unknown_problem_is_an_error():
    got = m("my_try.py", mapping={"my_try.py": "19_Relu"})
    assert got.error and "not a loaded problem" in got.error and "'19_ReLU'" in got.error


def test_map_of_a_free_name_keeps_the_stem_as_variant():
    got = m("my_try.py", mapping={"my_try.py": "19_ReLU"})
    assert (got.problem_id, got.variant) == ("19_ReLU", "my_try")


def test_without_known_ids_the_stem_splits_at_the_first_double_underscore():
    got = match_file(Path("layernorm__v2.py"), ProblemIndex({}))
    assert (got.problem_id, got.variant) == ("layernorm", "v2")


# --------------------------------------------------------------------------- through discover()

RELU = "import triton\nclass ModelNew: pass\n"


def test_discover_with_registry_levels_from_folders(tmp_path):
    reg = load_registry(KB)
    assert reg.get("19_Conv2d_ReLU_BiasAdd_tiny").level == 2 and reg.get("19_ReLU").level == 1
    (tmp_path / "level_2_problem_19_sample_0_kernel.py").write_text(RELU)
    (tmp_path / "level_1_problem_19_sample_0_kernel.py").write_text(RELU)
    (tmp_path / "50_conv_tiny_2D__square_input__square_kernel__v1.py").write_text(RELU)
    _, cands = discover(tmp_path, levels=reg.levels())
    got = {c.rel_path.split("/")[-1]: (c.problem_id, c.variant, c.mapping_error) for c in cands}
    assert got == {
        "50_conv_tiny_2D__square_input__square_kernel__v1.py": ("50_conv_tiny_2D__square_input__square_kernel", "v1", None),
        "level_1_problem_19_sample_0_kernel.py": ("19_ReLU", "sample0", None),
        "level_2_problem_19_sample_0_kernel.py": ("19_Conv2d_ReLU_BiasAdd_tiny", "sample0", None),
    }


def test_manifest_map_and_kernelbench_map_file(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"generator": "g", "map": {"try1.py": "19_ReLU"}}))
    (tmp_path / "try1.py").write_text(RELU)
    (tmp_path / "try2.py").write_text(RELU)
    mapfile = tmp_path.parent / "map.json"
    mapfile.write_text(json.dumps({"try2": "19_ReLU"}))
    _, cands = discover(tmp_path, levels={"19_ReLU": 1}, kernelbench_map=str(mapfile))
    assert [(c.problem_id, c.variant, c.mapped_by) for c in cands] == [("19_ReLU", "try1", "map"), ("19_ReLU", "try2", "map")]
    (tmp_path / "manifest.json").write_text(json.dumps({"map": {"a/b": "x"}}))
    with pytest.raises(SubmissionError, match="LEVEL/PROBLEM"):
        discover(tmp_path)


def test_two_files_for_the_same_problem_and_variant_are_flagged(tmp_path):
    (tmp_path / "level_1_problem_19_sample_0_kernel.py").write_text(RELU)
    (tmp_path / "level1_problem19_sample0.py").write_text(RELU)
    _, cands = discover(tmp_path, levels={"19_ReLU": 1})
    errors = [c.mapping_error for c in cands]
    assert errors.count(None) == 1 and "rename one" in [e for e in errors if e][0]


def test_subfolders_are_refused_by_name_or_recursed(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level2").mkdir()
    (tmp_path / "level1" / "problem_19_sample_0.py").write_text(RELU)
    (tmp_path / "level2" / "problem_19_sample_0.py").write_text(RELU)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "junk.py").write_text("")
    with pytest.raises(SubmissionError, match=r"subfolders level1/ \(1 file\), level2/ \(1 file\).*--recursive"):
        discover(tmp_path, levels=LEVELS)
    _, cands = discover(tmp_path, levels=LEVELS, recursive=True)
    assert [(c.rel_path.split("/", 1)[1], c.problem_id) for c in cands] == [
        ("level1/problem_19_sample_0.py", "19_ReLU"),
        ("level2/problem_19_sample_0.py", "19_ConvTranspose2d_GELU_GroupNorm"),
    ]


def test_ids_only_still_know_kernelbench_levels(tmp_path):
    """The older call (ids, no levels) maps run files for KernelBench's own ids via the checked-in map."""
    (tmp_path / "level_1_problem_19_sample_0_kernel.py").write_text(RELU)
    _, (cand,) = discover(tmp_path, problem_ids=["19_ReLU", "19_ConvTranspose2d_GELU_GroupNorm"])
    assert (cand.problem_id, cand.mapping_error) == ("19_ReLU", None)
