"""The private channel and the job spec: forged messages are rejected, future seeds are never sent ahead."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from harness import env as envmod
from harness.candidates.discover import discover
from harness.execute.channel import ChannelError, Endpoint, decode, encode
from harness.execute.inputs import round_seed
from harness.execute.runner import RunOptions, Session
from harness.problems.registry import load_registry

FIXTURES = Path(__file__).parent / "fixtures" / "mixed"


def test_forged_or_corrupted_messages_are_rejected():
    key = os.urandom(32)
    line = encode(key, {"event": "timing", "samples_ms": {"candidate": [0.001]}})
    assert decode(key, line.strip()) == {"event": "timing", "samples_ms": {"candidate": [0.001]}}
    with pytest.raises(ChannelError, match="authentication"):
        decode(os.urandom(32), line.strip())
    frame = json.loads(line)
    frame["body"] = frame["body"].replace("0.001", "0.0001")
    with pytest.raises(ChannelError, match="authentication"):
        decode(key, json.dumps(frame).encode())
    with pytest.raises(ChannelError, match="malformed"):
        decode(key, b'{"event": "done"}')


def test_endpoint_roundtrip_over_a_pipe():
    r, w = os.pipe()
    key = os.urandom(32)
    a = Endpoint(os.fdopen(r, "rb", buffering=0), w, key)
    a.send({"n": 1})
    a.send({"n": 2})
    assert a.recv() == {"n": 1} and a.has_buffered and a.recv() == {"n": 2}
    os.close(w)
    assert a.recv() is None


def test_spec_carries_no_round_seeds_and_no_base_seed(tmp_path):
    _, cands = discover(FIXTURES)
    cand = next(c for c in cands if c.rel_path == "mixed/gelu.py")
    prob = load_registry().get("gelu")
    opts = RunOptions(device="cpu", base_seed=987654321)
    sess = Session(cand, prob, prob.select(("smoke",)), opts, envmod.snapshot("cpu"), "run", None, threading.Lock(),
                   None, (), None)
    spec = sess._spec(tmp_path / "c.py", tmp_path, b"k" * 32)
    text = json.dumps(spec)
    assert "987654321" not in text
    for r in range(opts.rounds):
        assert str(round_seed(opts.base_seed, "smoke", r)) not in text
