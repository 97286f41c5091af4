"""Submission folders: naming, manifests, DSL detection, KernelBench run files."""

from __future__ import annotations

import json

import pytest

from harness.candidates.discover import SubmissionError, detect_dsl, discover


def test_names_variants_and_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"generator": "gpt-x", "version": "7"}))
    (tmp_path / "layernorm.py").write_text("import triton\n")
    (tmp_path / "layernorm__v2.py").write_text("import tilelang\n")
    (tmp_path / "_helper.py").write_text("")
    man, cands = discover(tmp_path)
    assert man.generator == "gpt-x" and man.version == "7"
    assert [(c.problem_id, c.variant, c.dsl) for c in cands] == [("layernorm", "", "triton"), ("layernorm", "v2", "tilelang")]
    assert all(c.generator == "gpt-x" and len(c.sha256) == 64 for c in cands)


def test_no_manifest_uses_folder_name(tmp_path):
    (tmp_path / "gelu.py").write_text("import torch\n")
    man, _ = discover(tmp_path)
    assert man.generator == tmp_path.name and man.version == "0"


@pytest.mark.parametrize("text,match", [
    ("{not json", r"manifest.json:1: invalid JSON"),
    ('{"generator": "a", "colour": 1}', "unknown field"),
    ('{"generator": "a", "dsl": "cuda"}', "field 'dsl'"),
])
def test_malformed_manifest_names_file(tmp_path, text, match):
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(SubmissionError, match=match):
        discover(tmp_path)


def test_kernelbench_run_files_are_mapped(tmp_path):
    (tmp_path / "level_1_problem_19_sample_0_kernel.py").write_text("import triton\n")
    (tmp_path / "level_1_problem_19_sample_1_kernel.py").write_text("import triton\n")
    _, cands = discover(tmp_path, kernelbench_map="auto", problem_ids=["19_ReLU", "1_Square"])
    assert [(c.problem_id, c.variant) for c in cands] == [("19_ReLU", "sample0"), ("19_ReLU", "sample1")]
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"1/19": "relu"}))
    _, cands = discover(tmp_path, kernelbench_map=str(mapping))
    assert {c.problem_id for c in cands} == {"relu"}


def test_dsl_header_wins():
    assert detect_dsl("# kernelgate: dsl=tilelang\nimport triton\n") == "tilelang"
    assert detect_dsl("from triton import language as tl\n") == "triton"
    assert detect_dsl("def f(:\n") == "unknown"
