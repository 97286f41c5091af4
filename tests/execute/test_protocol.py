"""The framing of the worker's pipes (deadlines and caps), the typed protocol and the job spec: malformed
messages are rejected, future seeds are never sent ahead."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from harness.execute.wire import protocol as P
from harness.execute.wire.channel import ChannelClosed, ChannelError, ChannelTimeout, Endpoint
from harness.execute.shared.inputs import round_seed
from harness.execute.parent.options import RunOptions
from harness.execute.parent.session import Session

from _support import FIXTURES, device_context, task_for


def _pipe():
    r, w = os.pipe()
    return Endpoint(r, w), r, w


def test_endpoint_roundtrip_over_a_pipe():
    a, r, w = _pipe()
    a.send({"n": 1})
    a.send({"n": 2})
    assert a.recv(1.0) == {"n": 1} and a.has_buffered and a.recv(1.0) == {"n": 2}
    os.close(w)
    with pytest.raises(ChannelClosed):
        a.recv(1.0)


def test_half_a_message_then_nothing_is_a_timeout_that_ends():
    """Exploit: half a line on the result pipe, then a hang; the parent's read used to block for good."""
    a, r, w = _pipe()
    os.write(w, b'{"kind": "call_report", "v": 3, "call_')
    t0 = time.monotonic()
    with pytest.raises(ChannelTimeout) as info:
        a.recv(0.3)
    assert 0.25 < time.monotonic() - t0 < 5 and info.value.partial > 0
    with pytest.raises(ChannelTimeout) as info:
        a.recv(0.05)  # still nothing complete
    assert info.value.partial > 0


def test_junk_and_oversized_lines_are_channel_errors():
    """Exploit: a flood of bytes without an end of line would grow the parent's buffer without bound."""
    a, r, w = _pipe()
    a.max_bytes = 1 << 16
    os.write(w, b"[1, 2]\n")
    with pytest.raises(ChannelError, match="not a JSON object"):
        a.recv(1.0)
    os.write(w, b"not json\n")
    with pytest.raises(ChannelError, match="not JSON"):
        a.recv(1.0)
    b, r2, w2 = _pipe()
    b.max_bytes = 1 << 16
    flood = threading.Thread(target=lambda: os.write(w2, b"x" * (1 << 17)), daemon=True)
    flood.start()
    with pytest.raises(ChannelError, match="without an end of line"):
        b.recv(5.0)
    assert len(b._buf) <= (1 << 16) + (1 << 16)  # at most one read past the cap


def test_a_peer_that_never_reads_times_the_send_out():
    a, r, w = _pipe()
    with pytest.raises(ChannelTimeout, match="did not read"):
        for _ in range(10_000):  # the pipe's buffer fills; nobody reads it
            a.send({"pad": "x" * 4096}, timeout_s=0.2)


def test_spec_carries_no_call_seeds_and_no_base_seed(tmp_path):
    opts = RunOptions(device="cpu", base_seed=987654321)
    sess = Session(task_for(FIXTURES / "mixed", "gelu.py", "gelu"), device_context(opts))
    spec = sess._spec(tmp_path / "c.py", tmp_path)
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
