"""tools/kernelbench: the corpus manifest, its fetcher, and the independent KernelBench-protocol checker."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.candidates.discover import discover
from harness.problems.categories import kernelbench_map

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "kernelbench"
KB = ROOT / "tests" / "fixtures" / "kernelbench"
sys.path.insert(0, str(TOOLS))

import fetch_corpus  # noqa: E402 - from tools/kernelbench, put on the path above
import independent_check  # noqa: E402


# --------------------------------------------------------------------------- corpus.json

def test_corpus_manifest_is_complete_and_names_kernelbench_ids():
    data = json.loads((TOOLS / "corpus.json").read_text())
    ids = kernelbench_map()
    entries = data["entries"]
    assert len(entries) >= 100
    keys = {"repository", "path", "commit", "level", "problem_id", "dsl", "model", "licence", "sha256"}
    for e in entries:
        assert keys <= e.keys(), e
        assert ids[e["problem_id"]]["level"] == e["level"] and e["dsl"] in ("triton", "tilelang")
        assert len(e["commit"]) == 40 and len(e["sha256"]) == 64
        assert e["repository"] in data["repositories"]
    level1 = {e["problem_id"] for e in entries if e["level"] == 1}
    assert len(level1) == 100 and {e["dsl"] for e in entries} == {"triton", "tilelang"}
    assert len({e["model"] for e in entries}) >= 4
    assert len({(e["repository"], e["path"]) for e in entries}) == len(entries)


# --------------------------------------------------------------------------- fetch_corpus.py

KERNEL = "import triton\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def _git_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "src-repo"
    (repo / "out" / "level1").mkdir(parents=True)
    (repo / "out" / "level1" / "19_ReLU.py").write_text(KERNEL)
    (repo / "out" / "level1" / "1_Square_matrix_multiplication.py").write_text(KERNEL + "# second\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True, env=env, capture_output=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return repo, commit


def _entry(commit: str, path: str, pid: str, text: str, model: str = "some/model") -> dict:
    return {"repository": "someone/kernels", "path": path, "commit": commit, "level": 1, "problem_id": pid,
            "dsl": "triton", "model": model, "licence": "MIT", "sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_fetch_from_a_git_mirror_gives_kernelgate_names(tmp_path):
    repo, commit = _git_repo(tmp_path)
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"entries": [
        _entry(commit, "out/level1/19_ReLU.py", "19_ReLU", KERNEL),
        _entry(commit, "out/level1/1_Square_matrix_multiplication.py", "1_Square_matrix_multiplication_",
               KERNEL + "# second\n"),
        _entry(commit, "out/level1/19_ReLU.py", "19_ReLU", KERNEL),
        _entry(commit, "out/level1/missing.py", "19_ReLU", KERNEL),
        {**_entry(commit, "out/level1/19_ReLU.py", "26_GELU_", KERNEL), "sha256": "0" * 64},
    ]}))
    out = tmp_path / "subs"
    code = fetch_corpus.main(["--corpus", str(corpus), "--mirror", f"someone/kernels={repo}", "--out", str(out)])
    assert code == 0
    (folder,) = out.iterdir()
    assert folder.name == "kernels--some-model--triton"
    assert sorted(p.name for p in folder.glob("*.py")) == ["19_ReLU.py", "19_ReLU__2.py",
                                                           "1_Square_matrix_multiplication_.py"]
    sources = json.loads((folder / "sources.json").read_text())
    assert sources["1_Square_matrix_multiplication_.py"]["path"] == "out/level1/1_Square_matrix_multiplication.py"
    manifest, cands = discover(folder, levels={"19_ReLU": 1, "1_Square_matrix_multiplication_": 1})
    assert manifest.generator == "some/model" and manifest.dsl == "triton"
    assert sorted((c.problem_id, c.variant) for c in cands) == [
        ("19_ReLU", ""), ("19_ReLU", "2"), ("1_Square_matrix_multiplication_", "")]
    assert all(c.mapping_error is None for c in cands)


def test_fetch_from_a_folder_and_sha_mismatch_is_not_written(tmp_path, capsys):
    src = tmp_path / "dl" / "someone+kernels" / "out"
    src.mkdir(parents=True)
    (src / "a.py").write_text(KERNEL)
    (src / "b.py").write_text(KERNEL + "# edited after the corpus was built\n")
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"entries": [_entry("c" * 40, "out/a.py", "19_ReLU", KERNEL),
                                              _entry("c" * 40, "out/b.py", "26_GELU_", KERNEL)]}))
    assert fetch_corpus.main(["--corpus", str(corpus), "--from", str(tmp_path / "dl"), "--out", str(tmp_path / "o")]) == 0
    assert [p.name for p in (tmp_path / "o").glob("*/*.py")] == ["19_ReLU.py"]
    assert "sha256" in capsys.readouterr().err


# --------------------------------------------------------------------------- independent_check.py

GOOD = '''
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
WRONG = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
SHAPE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x[:1]\n"
BROKEN = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        raise RuntimeError('boom')\n"


def test_independent_check_on_cpu_with_the_triton_interpreter(tmp_path):
    problem = tmp_path / "problems" / "19_ReLU.py"
    problem.parent.mkdir()
    problem.write_text((KB / "19_ReLU.py").read_text().replace("dim = 16384", "dim = 2048"))
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for name, text in (("level_1_problem_19_sample_0_kernel.py", GOOD), ("19_ReLU__wrong.py", WRONG),
                       ("19_ReLU__shape.py", SHAPE), ("19_ReLU__broken.py", BROKEN), ("99_Nothing.py", WRONG)):
        (kernels / name).write_text(text)
    out = tmp_path / "check.jsonl"
    proc = subprocess.run([sys.executable, str(TOOLS / "independent_check.py"), "--problems", str(problem.parent),
                           "--kernels", str(kernels), "--out", str(out), "--device", "cpu", "--trials", "2",
                           "--jobs", "2"],  # one process per kernel: two at a time on the 2-core CI machine
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "skipped 99_Nothing.py" in proc.stderr
    recs = {Path(r["kernel"]).name: r for r in map(json.loads, out.read_text().splitlines())}
    good = recs["level_1_problem_19_sample_0_kernel.py"]
    assert good["status"] == "correct" and good["trials_passed"] == 2 and good["max_abs_diff"] == 0.0
    assert good["timing"].startswith("skipped") and good["kernel_ms"] is None and good["atol"] == 1e-2
    wrong = recs["19_ReLU__wrong.py"]
    assert wrong["status"] == "incorrect" and wrong["trials_passed"] == 0 and wrong["max_abs_diff"] > 0.5
    assert recs["19_ReLU__shape.py"]["status"] == "incorrect" and "shape mismatch" in recs["19_ReLU__shape.py"]["error"]
    assert recs["19_ReLU__broken.py"]["status"] == "error" and "boom" in recs["19_ReLU__broken.py"]["error"]
    assert all(r["torch"] and r["device"] == "cpu" for r in recs.values())


def test_independent_check_does_not_import_harness():
    text = (TOOLS / "independent_check.py").read_text()
    assert "harness" not in "".join(line for line in text.splitlines() if line.lstrip().startswith(("import", "from")))


def test_pairing_respects_the_level_of_the_problem_folder(tmp_path):
    level2 = tmp_path / "level2"
    level2.mkdir()
    (level2 / "19_ConvTranspose2d_GELU_GroupNorm.py").write_text("")
    k = tmp_path / "k"
    k.mkdir()
    (k / "level_1_problem_19_sample_0_kernel.py").write_text("")
    (k / "level_2_problem_19_sample_0_kernel.py").write_text("")
    pairs, notes = independent_check.pair_files(level2, k)
    assert [p[1].name for p in pairs] == ["level_2_problem_19_sample_0_kernel.py"]
    assert notes and "no level-1 problem 19" in notes[0]
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text("")
    pairs, notes = independent_check.pair_files(tmp_path, k)  # a folder of level folders
    assert sorted((p[0].parent.name, p[1].name) for p in pairs) == [
        ("level1", "level_1_problem_19_sample_0_kernel.py"), ("level2", "level_2_problem_19_sample_0_kernel.py")]


def test_kernelbench_evaluator_wrapper_refuses_a_wrong_checkout(tmp_path):
    proc = subprocess.run([sys.executable, str(TOOLS / "run_kernelbench_eval.py"), "--kernelbench", str(tmp_path),
                           "--out", str(tmp_path / "o.jsonl")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no src/kernelbench/eval.py" in proc.stderr


@pytest.mark.gpu
def test_independent_check_times_on_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    problem = tmp_path / "19_ReLU.py"
    problem.write_text((KB / "19_ReLU.py").read_text())
    kernel = tmp_path / "19_ReLU__k.py"
    kernel.write_text(GOOD)
    out = tmp_path / "c.jsonl"
    assert independent_check.main(["--pair", str(problem), str(kernel), "--out", str(out), "--device", "cuda"]) == 0
    rec = json.loads(out.read_text())
    assert rec["status"] == "correct" and rec["ref_ms"] > 0 and rec["kernel_ms"] > 0
