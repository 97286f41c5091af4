"""The lint's rule registry: one record per rule, looked up by its stable id.

Every rule the linter can report is a :class:`Rule` registered once in
:data:`REGISTRY` (the catalog is :mod:`harness.diagnose.lint.rules`). A
rule names the source kinds its checks run on (:data:`KINDS`), the
severities it may emit, its one-line fix hint, and the fixture files that
show it firing; ``tests/diagnose/test_lint_registry.py`` lints those
fixtures and fails if one does not trigger its rule, or if a declared kind
or severity is shown by none of them.

Why a registry and not a tuple of names: the checker modules create their
findings through :meth:`RuleRegistry.finding`, which refuses a rule id, a
kind or a severity the catalog does not declare, so the catalog (what the
docs and ``--help`` say) cannot drift from what the checks emit. Registering
an id twice raises; looking up an unknown id raises with the closest known
ids ("did you mean").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from harness.diagnose.findings import SEVERITIES, Finding

KINDS = ("triton", "tilelang", "host", "cuda")
"""Source kinds a rule's checks run on: a ``@triton.jit`` kernel, a TileLang
``T.Kernel`` block and its factory, the host (PyTorch) code ``forward`` runs,
CUDA C lowered from a TileLang kernel."""


class UnknownRuleError(KeyError):
    """A rule id that is not registered; the message lists the closest known ids."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class Rule:
    """One lint rule: what it reports, where it looks, how to fix it, what shows it."""

    id: str
    """Stable id, e.g. ``sequential-reduction``; a finding's ``rule``. Never reworded."""
    kinds: tuple[str, ...]
    """Source kinds (:data:`KINDS`) whose checks can emit this rule."""
    severities: tuple[str, ...]
    """Severities the rule emits, most serious first (a subset of ``defect``, ``warning``, ``info``)."""
    hint: str
    """One line saying how to fix what the rule found; copied into every finding."""
    summary: str
    """One paragraph: what the rule matches and what it deliberately leaves alone."""
    fixtures: tuple[str, ...]
    """Repository-relative files (``tests/diagnose/fixtures/...`` or ``submissions/defects/...``)
    that trigger the rule; together they show every kind and severity above."""

    def __post_init__(self) -> None:
        where = f"lint rule {self.id!r}"
        if not self.id or self.id != self.id.strip().lower() or " " in self.id:
            raise ValueError(f"{where}: an id is lower-case words joined by '-', e.g. 'tiny-tile'")
        bad = [k for k in self.kinds if k not in KINDS]
        if not self.kinds or bad:
            raise ValueError(f"{where}: kinds {list(self.kinds)} must be a non-empty subset of {KINDS}")
        bad = [s for s in self.severities if s not in SEVERITIES or s == "fail"]
        if not self.severities or bad:
            raise ValueError(f"{where}: severities {list(self.severities)} must be a non-empty subset of "
                             "('defect', 'warning', 'info'); 'fail' is the anticheat's")
        if not self.hint.strip() or "\n" in self.hint:
            raise ValueError(f"{where}: the hint must be one non-empty line")
        if not self.fixtures:
            raise ValueError(f"{where}: name at least one fixture file that triggers it")

    def to_dict(self) -> dict:
        return {"id": self.id, "kinds": list(self.kinds), "severities": list(self.severities), "hint": self.hint,
                "summary": self.summary, "fixtures": list(self.fixtures)}


class RuleRegistry:
    """Rules by id, in registration order; refuses duplicates, suggests near misses."""

    def __init__(self) -> None:
        self._rules: dict[str, Rule] = {}

    def register(self, rule: Rule) -> Rule:
        """Add ``rule``; raises ``ValueError`` if its id is already registered."""
        if rule.id in self._rules:
            raise ValueError(f"lint rule {rule.id!r} is already registered; rule ids are unique "
                             "(pick a new id, or edit the existing entry in harness/diagnose/lint/rules.py)")
        self._rules[rule.id] = rule
        return rule

    def get(self, rule_id: str) -> Rule:
        """The rule called ``rule_id``; raises :class:`UnknownRuleError` naming the closest ids."""
        try:
            return self._rules[rule_id]
        except KeyError:
            close = difflib.get_close_matches(rule_id, list(self._rules), n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise UnknownRuleError(
                f"unknown lint rule {rule_id!r}{hint} (known: {', '.join(self._rules)})"
            ) from None

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self._rules

    def __iter__(self) -> Iterator[Rule]:
        return iter(self._rules.values())

    def __len__(self) -> int:
        return len(self._rules)

    def ids(self) -> tuple[str, ...]:
        return tuple(self._rules)

    def finding(self, rule_id: str, kind: str, severity: str, line: int | None, message: str) -> Finding:
        """A :class:`Finding` of a registered rule, with its hint.

        Raises ``ValueError`` when the rule does not declare ``kind`` or
        ``severity``: a check emitting something its catalog entry does not
        promise is a bug in the linter, found by the fixture tests.
        """
        rule = self.get(rule_id)
        if kind not in rule.kinds:
            raise ValueError(f"lint rule {rule_id!r} emitted from a {kind!r} check; it declares kinds {rule.kinds}")
        if severity not in rule.severities:
            raise ValueError(f"lint rule {rule_id!r} emitted severity {severity!r}; it declares {rule.severities}")
        return Finding(rule=rule_id, severity=severity, line=line, message=message, hint=rule.hint)


REGISTRY = RuleRegistry()
"""The lint's rules; filled by :mod:`harness.diagnose.lint.rules` (imported by the package)."""
