"""Result ids: one per (candidate content, generator@version, problem, workload, protocol, environment)."""

from __future__ import annotations

from types import SimpleNamespace

from harness.problems.registry import load_registry
from harness.records import EnvSnapshot
from harness.results.ids import job_id

ENV = EnvSnapshot(device_kind="cpu", device_name="x", device_uuid=None, driver=None, python="3.11", torch="2.13",
                  triton="3.6", tilelang=None, harness="0", sandbox="none")


def _cand(generator: str, version: str) -> SimpleNamespace:
    return SimpleNamespace(sha256="ab" * 32, generator=generator, generator_version=version, problem_id="layernorm")


def test_an_unchanged_file_in_two_generator_versions_gets_two_ids():
    """Issue: mymodel@1 and mymodel@2 shipping the same layernorm.py shared one id, so --resume skipped v2's copy
    and leaderboard/compare dropped v1's record as superseded."""
    prob = load_registry().get("layernorm")
    w = prob.workloads[0]
    ids = {job_id(_cand(g, v), prob, w, ENV) for g, v in (("mymodel", "1"), ("mymodel", "2"), ("other", "1"))}
    assert len(ids) == 3
    same = job_id(_cand("mymodel", "1"), prob, w, ENV)
    assert same == job_id(_cand("mymodel", "1"), prob, w, ENV)  # stable: --resume still finds its own records


def test_protocol_choices_are_part_of_the_id():
    prob = load_registry().get("layernorm")
    w = prob.workloads[0]
    c = _cand("m", "1")
    assert len({job_id(c, prob, w, ENV), job_id(c, prob, w, ENV, mode="train"),
                job_id(c, prob, w, ENV, baseline="compile")}) == 3
