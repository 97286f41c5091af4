"""Tokens file and rate limiter (harness/serve/auth.py)."""

from __future__ import annotations

import json

import pytest

from harness.serve.auth import Client, RateLimiter, TokensFileError, TokenTable, add_client, digest


def _write(tmp_path, clients) -> str:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"clients": clients}))
    return str(path)


def test_lookup_by_token_or_by_its_digest(tmp_path):
    table = TokenTable.from_file(_write(tmp_path, [
        {"name": "a", "token": "a" * 20}, {"name": "b", "token_sha256": digest("b" * 20), "rate_per_s": 2, "burst": 5}]))
    assert table.lookup("a" * 20).name == "a"
    assert table.lookup("b" * 20) == Client("b", digest("b" * 20), 2.0, 5)
    assert table.lookup("c" * 20) is None


@pytest.mark.parametrize("clients, words", [
    ([{"name": "a"}], "exactly one of 'token' and 'token_sha256'"),
    ([{"name": "a", "token": "short"}], "clients[0].token: must be a string of at least 16"),
    ([{"name": "a", "token_sha256": "xyz"}], "clients[0].token_sha256: must be 64"),
    ([{"name": "a", "token": "a" * 20, "rate_per_s": 0}], "clients[0].rate_per_s"),
    ([{"name": "a", "token": "a" * 20, "burst": 1.5}], "clients[0].burst"),
    ([{"name": "a", "token": "a" * 20, "role": "admin"}], "unknown field(s) ['role']"),
    ([{"name": "a", "token": "a" * 20}, {"name": "a", "token": "b" * 20}], "more than once"),
])
def test_bad_tokens_files_name_the_entry_and_field(tmp_path, clients, words):
    with pytest.raises(TokensFileError) as err:
        TokenTable.from_file(_write(tmp_path, clients))
    assert words in str(err.value) and "tokens.json" in str(err.value)


def test_add_client_stores_only_the_digest(tmp_path):
    path = tmp_path / "t.json"
    token = add_client(path, "trainer", 5.0, 100)
    text = path.read_text()
    assert token not in text and digest(token) in text
    assert TokenTable.from_file(path).lookup(token).burst == 100
    with pytest.raises(TokensFileError, match="exists already"):
        add_client(path, "trainer")


def test_token_bucket_refills_at_the_rate_and_refunds():
    now = [0.0]
    rl = RateLimiter(clock=lambda: now[0])
    c = Client("c", "0" * 64, rate_per_s=2.0, burst=4)
    assert rl.take(c, 4) == 0.0
    assert rl.take(c, 1) == pytest.approx(0.5)  # one credit comes back in 0.5 s
    now[0] = 1.0
    assert rl.take(c, 2) == 0.0 and rl.take(c, 1) > 0
    rl.refund(c, 2)
    assert rl.take(c, 2) == 0.0
