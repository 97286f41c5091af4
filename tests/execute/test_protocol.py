"""The private channel, the typed protocol and the job spec: forged or malformed messages are rejected,
future seeds are never sent ahead."""

from __future__ import annotations

import json
import os

import pytest

from harness.execute.wire import protocol as P
from harness.execute.wire.channel import ChannelError, Endpoint, decode, encode
from harness.execute.shared.inputs import round_seed
from harness.execute.parent.options import RunOptions
from harness.execute.parent.session import Session

from _support import FIXTURES, device_context, task_for


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


def test_spec_carries_no_call_seeds_and_no_base_seed(tmp_path):
    opts = RunOptions(device="cpu", base_seed=987654321)
    sess = Session(task_for(FIXTURES / "mixed", "gelu.py", "gelu"), device_context(opts))
    spec = sess._spec(tmp_path / "c.py", tmp_path, b"k" * 32)
    text = json.dumps(P.encode(spec))
    assert "987654321" not in text
    for r in list(range(opts.rounds)) + list(range(1000, 1100)):
        assert str(round_seed(opts.base_seed, "smoke", r)) not in text


def test_every_message_round_trips_and_unknown_fields_are_refused():
    msg = P.CallReport(call_id=3, ok=True, stream_ms=0.25, output_types=("torch.Tensor",))
    wire = json.loads(json.dumps(P.encode(msg)))
    assert P.decode(wire) == msg
    with pytest.raises(P.ProtocolError, match="unknown field"):
        P.decode({**wire, "stream_ms_forged": 0.0})
    with pytest.raises(P.ProtocolError, match="expected a number"):
        P.decode({**wire, "stream_ms": "fast"})
    with pytest.raises(P.ProtocolError, match="expected an integer"):
        P.decode({**wire, "call_id": True})
    with pytest.raises(P.ProtocolError, match="unknown message kind"):
        P.decode({"kind": "timing", "v": P.VERSION})
    with pytest.raises(P.ProtocolError, match="protocol version"):
        P.decode({**wire, "v": 1})


def test_a_worker_may_send_only_worker_messages_here():
    """Exploit: a worker that sends the parent a parent->worker or checker message (e.g. a forged Verify reply)."""
    forged = P.encode(P.VerifyReply(ok=True, status="PASSED", detail=""))
    with pytest.raises(P.ProtocolError, match="unexpected message"):
        P.decode(forged, P.WORKER_TO_PARENT)
    with pytest.raises(P.ProtocolError, match="unexpected message"):
        P.decode(P.encode(P.Done()), (P.CallReport,))


def test_oversized_lists_and_strings_are_refused():
    wire = P.encode(P.CallReport(call_id=1, ok=True))
    with pytest.raises(P.ProtocolError, match="at most"):
        P.decode({**wire, "dsl_names": ["k"] * (P.MAX_LIST + 1)})
    with pytest.raises(P.ProtocolError, match="at most"):
        P.decode({**wire, "dsl_names": ["k" * (P.MAX_SOURCES_CHARS + 1)]})
