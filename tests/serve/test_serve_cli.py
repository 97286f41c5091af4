"""`kernelgate serve` argument handling (the subcommand's module entry point; no server is started)."""

from __future__ import annotations

import json

import pytest

from harness.commands.serve import main


def test_help_teaches_with_examples(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "examples:" in out and "--add-client rl-trainer" in out and "/v1/tasks" in out and "--executor ray" in out


@pytest.mark.parametrize("argv, words", [
    (["--no-auth"], "--results DIR is required"),
    (["--results", "r"], "give --tokens FILE"),
    (["--results", "r", "--no-auth", "--host", "0.0.0.0"], "loopback only"),
    (["--results", "r", "--no-auth", "--max-queue", "0"], "--max-queue must be at least 1"),
    (["--add-client", "x"], "needs --tokens FILE"),
])
def test_bad_arguments_say_what_to_do(argv, words):
    with pytest.raises(SystemExit, match=words):
        main(argv)


def test_a_bad_tokens_file_is_named(tmp_path):
    bad = tmp_path / "tokens.json"
    bad.write_text(json.dumps({"clients": [{"name": "a", "token": "short"}]}))
    with pytest.raises(SystemExit, match="tokens.json: clients\\[0\\].token"):
        main(["--results", str(tmp_path / "r"), "--tokens", str(bad)])


def test_add_client_prints_the_token_once(tmp_path, capsys):
    path = tmp_path / "tokens.json"
    assert main(["--add-client", "trainer", "--tokens", str(path), "--rate", "5", "--burst", "50"]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    entry = json.loads(path.read_text())["clients"][0]
    assert token.startswith("kg_") and token not in path.read_text()
    assert entry["name"] == "trainer" and entry["rate_per_s"] == 5 and entry["burst"] == 50
