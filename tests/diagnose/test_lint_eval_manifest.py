"""The held-out lint corpus manifest (tools/lint_eval/manifest.json) is well formed and tracks the rule registry.

The measurement itself needs local copies of the public repositories (see
docs/lint.md); this test only checks what can be checked offline: every entry
is pinned, labelled with known rules and a one-line reason, the splits are
balanced per pool, and the corpus's rule list is the registry's.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.diagnose.lint import RULES

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "lint_eval"))

import corpus  # noqa: E402


@pytest.fixture(scope="module")
def manifest():
    return corpus.load_manifest()


def test_corpus_rules_are_the_registry_rules():
    assert corpus.RULE_IDS == RULES


def test_manifest_entries_are_pinned_and_labelled(manifest):
    assert len(manifest.kernels) >= 60
    for k in manifest.kernels:
        commit = manifest.commit(k.repo)
        assert len(commit) == 40 and int(commit, 16) >= 0, k.id
        assert k.labels or k.clean, k.id
        assert all(reason.strip() for reason in k.labels.values()), k.id


def test_splits_alternate_within_each_pool(manifest):
    per_pool = Counter((k.pool, k.split) for k in manifest.kernels)
    for pool in {k.pool for k in manifest.kernels}:
        assert abs(per_pool[(pool, "A")] - per_pool[(pool, "B")]) <= 1, pool


def test_bad_entries_are_refused():
    good = {"id": "x-01", "pool": "p", "split": "A", "repo": "o/r", "path": "a.py", "record": None,
            "labels": {}, "clean": "elementwise"}
    corpus.Kernel.from_dict(good)
    for bad, match in (({"split": "C"}, "split"), ({"labels": {"tiny-tiles": "why"}}, "unknown rule"),
                       ({"clean": ""}, "clean"), ({"colour": 1}, "unknown field")):
        with pytest.raises(corpus.CorpusError, match=match):
            corpus.Kernel.from_dict({**good, **bad})


def test_model_output_code_takes_the_first_fenced_block():
    assert corpus.model_output_code("text\n```python\nx = 1\n```\nmore") == "x = 1\n"
    assert corpus.model_output_code("import triton\n") == "import triton\n"
