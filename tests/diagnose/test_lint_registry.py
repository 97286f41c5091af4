"""The lint's rule registry: every rule is documented, and its fixtures really show it.

For each registered rule: a one-line hint, a summary, fixture files that
exist, and -- linting each fixture with one source kind's checks at a time --
every declared kind and every declared severity is produced by some fixture,
and every fixture produces the rule. The registry itself refuses duplicate
ids and suggests near misses for unknown ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.diagnose.findings import Finding
from harness.diagnose.lint import HINTS, KINDS, REGISTRY, RULES, Rule, UnknownRuleError, lint_source, lint_source_kind
from harness.diagnose.lint.registry import RuleRegistry

REPO = Path(__file__).resolve().parents[2]
FIXTURE_ROOTS = ("tests/diagnose/fixtures/", "submissions/defects/")
RULE_IDS = [r.id for r in REGISTRY]


def _by_kind(path: str) -> dict[str, list[Finding]]:
    """Findings of one fixture per source kind whose checks apply to it (``.cu``: cuda only)."""
    text = (REPO / path).read_text(encoding="utf-8")
    kinds = ("cuda",) if path.endswith(".cu") else tuple(k for k in KINDS if k != "cuda")
    return {k: lint_source_kind(text, k, filename=path) for k in kinds}


def test_registry_lists_the_public_rules_in_order():
    assert RULES == tuple(RULE_IDS) and len(RULES) == len(set(RULES))
    assert HINTS == {r.id: r.hint for r in REGISTRY}


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rule_is_documented(rule_id):
    rule = REGISTRY.get(rule_id)
    assert rule.hint.strip() and "\n" not in rule.hint
    assert len(rule.summary) > len(rule.hint) // 2
    assert rule.kinds and set(rule.kinds) <= set(KINDS)
    assert rule.fixtures
    for path in rule.fixtures:
        assert path.startswith(FIXTURE_ROOTS), f"{rule_id}: fixture {path} is outside {FIXTURE_ROOTS}"
        assert (REPO / path).is_file(), f"{rule_id}: fixture {path} does not exist"


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rule_fixtures_trigger_it_in_every_declared_kind_and_severity(rule_id):
    rule = REGISTRY.get(rule_id)
    kinds_seen: set[str] = set()
    severities_seen: set[str] = set()
    for path in rule.fixtures:
        hits = {k: [f for f in fs if f.rule == rule_id] for k, fs in _by_kind(path).items()}
        assert any(hits.values()), f"{path} does not trigger {rule_id}"
        for kind, fs in hits.items():
            if fs:
                kinds_seen.add(kind)
                severities_seen |= {f.severity for f in fs}
                assert all(f.hint == rule.hint for f in fs)
    assert kinds_seen == set(rule.kinds), f"{rule_id}: kinds shown by its fixtures {sorted(kinds_seen)}"
    assert severities_seen == set(rule.severities), f"{rule_id}: severities shown {sorted(severities_seen)}"


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_python_fixtures_trigger_the_rule_through_the_public_api(rule_id):
    """What a user runs (``lint_source`` with the detected DSL) also reports each .py fixture's rule."""
    for path in REGISTRY.get(rule_id).fixtures:
        if path.endswith(".py"):
            findings = lint_source((REPO / path).read_text(encoding="utf-8"), filename=path)
            assert rule_id in {f.rule for f in findings}, path


def test_every_defect_fixture_file_is_claimed_by_a_rule():
    claimed = {p for r in REGISTRY for p in r.fixtures}
    for folder in ("tests/diagnose/fixtures/lint/defect", "tests/diagnose/fixtures/lint/cuda"):
        for f in sorted((REPO / folder).iterdir()):
            if f.suffix in (".py", ".cu"):
                assert str(f.relative_to(REPO)) in claimed, f"{f.name} is not named by any rule's fixtures"


def _rule(rule_id: str = "demo-rule", **kw) -> Rule:
    fields = dict(kinds=("triton",), severities=("defect",), hint="do the fix", summary="what it matches",
                  fixtures=("tests/diagnose/fixtures/lint/defect/triton_add_block1.py",))
    fields.update(kw)
    return Rule(id=rule_id, **fields)


def test_duplicate_rule_id_is_refused():
    reg = RuleRegistry()
    reg.register(_rule())
    with pytest.raises(ValueError, match="already registered"):
        reg.register(_rule(hint="another hint"))
    with pytest.raises(ValueError, match="already registered"):
        REGISTRY.register(REGISTRY.get("tiny-tile"))
    assert len(reg) == 1


def test_unknown_rule_id_suggests_the_closest():
    with pytest.raises(UnknownRuleError, match="did you mean 'sequential-reduction'"):
        REGISTRY.get("sequential-reductions")
    with pytest.raises(UnknownRuleError, match="did you mean 'tiny-tile'"):
        REGISTRY.get("tiny-tiles")
    with pytest.raises(UnknownRuleError) as exc:
        REGISTRY.get("zzz")
    assert "did you mean" not in str(exc.value) and "known: sequential-reduction" in str(exc.value)
    assert "tiny-tile" in REGISTRY and "tiny-tiles" not in REGISTRY


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"kinds": ("python",)}, "kinds"),
        ({"kinds": ()}, "kinds"),
        ({"severities": ("fail",)}, "severities"),
        ({"hint": ""}, "hint"),
        ({"hint": "two\nlines"}, "hint"),
        ({"fixtures": ()}, "fixture"),
    ],
)
def test_malformed_rule_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        _rule(**kw)
    with pytest.raises(ValueError, match="lower-case"):
        _rule("Tiny Tile")


def test_a_finding_outside_the_declared_kinds_or_severities_is_refused():
    assert REGISTRY.finding("tiny-tile", "cuda", "warning", 3, "m").hint == HINTS["tiny-tile"]
    with pytest.raises(ValueError, match="kinds"):
        REGISTRY.finding("host-sync-in-forward", "triton", "defect", 1, "m")
    with pytest.raises(ValueError, match="severity"):
        REGISTRY.finding("non-coalesced-access", "triton", "defect", 1, "m")
    with pytest.raises(UnknownRuleError):
        REGISTRY.finding("tiny-tiles", "cuda", "defect", 1, "m")


def test_docs_describe_every_rule():
    text = (REPO / "docs" / "lint.md").read_text(encoding="utf-8")
    missing = [r for r in RULES if f"`{r}`" not in text]
    assert not missing, f"docs/lint.md does not describe {missing}"


def test_rule_records_serialise():
    d = REGISTRY.get("fp64-promotion").to_dict()
    assert d["id"] == "fp64-promotion" and d["kinds"] == ["triton", "tilelang", "host", "cuda"]
    assert set(d) == {"id", "kinds", "severities", "hint", "summary", "fixtures"}
