"""Help texts and the service state defaults and limits read from the one place that defines them.

Each test reads the source of truth (the constant or the option's default) and checks what a user sees
against it, so a changed default or limit cannot leave a help text or the service behind.
"""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from harness import cli
from harness.execute.parent.options import POOL_MAX
from harness.execute.parent.options import DEFAULTS

REFUSED_WITHOUT_OPT_IN = ("run",)
"""Subcommands that refuse to start without ``--yes-execute`` (``serve`` starts with a note instead)."""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _examples(text: str) -> list[list[str]]:
    """The ``kernelgate ...`` command lines of a help text as argv, without a trailing comment, redirection or
    the shell commands chained after them."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("kernelgate "):
            argv = shlex.split(line, comments=True)
            cut = [i for i, a in enumerate(argv) if a in (">", ">>", "|", "&&", ";", "2>&1")]
            out.append(argv[:cut[0]] if cut else argv)
    return out


def _all_examples() -> list[list[str]]:
    parser = cli.build_parser()
    texts = [parser.description or ""]
    for sp in _subparsers(parser).values():
        texts += [sp.description or "", sp.epilog or ""]
        texts += [(s.epilog or "") for s in _subparsers(sp).values()]
    return [e for t in texts for e in _examples(t)]


def test_every_help_example_is_accepted_as_written():
    """Bug it stops: ``kernelgate --help`` showed ``kernelgate run submissions/triton-reference``, which
    ``run`` refuses without ``--yes-execute``. Every example parses, and every example of a command that
    refuses to run candidates without the opt-in carries it."""
    examples = _all_examples()
    assert any(argv[1] == "run" for argv in _examples(cli.DESCRIPTION))
    assert len(examples) > 20, examples
    parser = cli.build_parser()
    for argv in examples:
        line = shlex.join(argv)
        try:
            args = parser.parse_args(argv[1:])
        except SystemExit as exc:  # argparse's usage error
            pytest.fail(f"help example does not parse ({exc}): {line}")
        if args.command in REFUSED_WITHOUT_OPT_IN:
            assert args.yes_execute, f"help example would be refused without --yes-execute: {line}"


def test_run_refuses_without_the_opt_in():
    """The check the examples are held to is the one ``run`` applies."""
    parser = cli.build_parser()
    args = parser.parse_args(["run", "submissions/triton-reference"])
    with pytest.raises(SystemExit, match="--yes-execute"):
        args.func(args)


def test_run_help_states_the_prestart_limit_from_its_constant():
    """Bug it stops: ``run --help`` said at most 8 pre-started workers per device where the pool held up to 16."""
    text = _subparsers(cli.build_parser())["run"].format_help()
    said = re.findall(r"at most (\d+) and never", " ".join(text.split()))
    assert said == [str(POOL_MAX)], said


def test_the_service_uses_the_run_options_defaults():
    """Bug it stops: the service's compile timeout was 600 s where ``kernelgate run``'s (RunOptions) is 300 s.
    The engine config, ``kernelgate serve``'s options and ``kernelgate run``'s options all read RunOptions."""
    from harness.serve.engine import EngineConfig

    fields = EngineConfig.__dataclass_fields__
    for name in ("compile_timeout_s", "round_timeout_s", "timing_timeout_s"):
        assert fields[name].default == getattr(DEFAULTS, name), name
    subs = _subparsers(cli.build_parser())
    for cmd in ("run", "serve"):
        args = subs[cmd].parse_args(["x"] if cmd == "run" else [])
        assert (args.compile_timeout, args.round_timeout, args.timing_timeout) == (
            DEFAULTS.compile_timeout_s, DEFAULTS.round_timeout_s, DEFAULTS.timing_timeout_s), cmd
