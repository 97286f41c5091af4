"""The CUDA IPC output hand-off: what the checker accepts from an untrusted worker (no GPU needed).

Exploits the rules stop: a worker that sends descriptors naming more bytes
than its outputs hold (the checker would read past the allocation, or a
dtype/shape that makes a wrong-sized tensor), a misaligned offset (the
checker's own kernels would fault on it and poison its CUDA context, failing
every later candidate on that GPU), or fields that are not plain JSON numbers
and strings. Each is REWARD_HACK: an honest worker never sends one.
"""

from __future__ import annotations

import pytest

from harness.execute.handoff import HandoffTampered, check_descriptors, export_outputs


def _desc(**kw):
    d = {"dtype": "float16", "shape": [4, 8], "nbytes": 64, "handle": "ab" * 64, "offset": 0}
    d.update(kw)
    return d


def test_well_formed_descriptors_pass():
    assert check_descriptors([_desc(), _desc(dtype="bfloat16", shape=[0], nbytes=0, handle="")])


@pytest.mark.parametrize("bad, what", [
    (_desc(nbytes=128), "nbytes"),                         # claims more bytes than the shape holds
    (_desc(dtype="object"), "dtype"),                     # not a tensor dtype
    (_desc(dtype="float32", nbytes=64), "nbytes"),         # dtype changed, byte count not
    (_desc(shape=[-1, 8]), "shape"),
    (_desc(shape=[4.0, 8]), "shape"),
    (_desc(shape=[1] * 17, nbytes=2), "shape"),
    (_desc(offset=-8), "offset"),
    (_desc(offset=3), "offset"),                           # misaligned for float16
    (_desc(handle="ab"), "handle"),
    (_desc(nbytes=True), "nbytes"),
    ({**_desc(), "extra": 1}, "exactly"),
    ("not a dict", "exactly"),
])
def test_malformed_descriptors_are_refused(bad, what):
    with pytest.raises(HandoffTampered, match=what):
        check_descriptors([bad])


def test_too_many_outputs_are_refused():
    with pytest.raises(HandoffTampered, match="at most"):
        check_descriptors([_desc()] * 65)


def test_export_without_a_cuda_driver_falls_back_to_a_file():
    import torch

    # no GPU here: the export is impossible, and the worker must take the file path
    assert export_outputs([torch.ones(3)]) is None


def test_export_sends_the_whole_handle_nul_bytes_included(monkeypatch):
    """A CUDA IPC handle is 64 raw bytes, NULs included; cutting it at the first NUL made every
    hand-off fail on the H200 (found there, 2026-11-30)."""
    import ctypes

    import torch

    from harness.execute import handoff

    def get_range(pbase, psize, ptr):
        pbase._obj.value, psize._obj.value = ptr - 16, 1 << 20
        return 0

    def get_handle(phandle, base):
        ctypes.memmove(ctypes.addressof(phandle._obj), b"\x07\x00" * 32, 64)
        return 0

    class FakeDriver:
        cuMemGetAddressRange_v2 = staticmethod(get_range)
        cuIpcGetMemHandle = staticmethod(get_handle)

    monkeypatch.setattr(handoff, "_LIB", [FakeDriver(), None])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    descs, keep = handoff.export_outputs([torch.ones(4, 8, dtype=torch.float16)])
    assert descs[0]["handle"] == "0700" * 32 and descs[0]["offset"] == 16
    assert check_descriptors(descs) and keep[0].shape == (4, 8)


def test_checker_fails_a_tampered_descriptor_as_reward_hack():
    from harness.execute import protocol as P
    from harness.execute.checker import handle
    from harness.problems.registry import load_registry

    prob = load_registry().get("gelu")
    w = [w for w in prob.workloads if w.is_smoke][0]
    ctx = P.Context(problem_path=str(prob.path), params=dict(w.params), dtype=w.dtype, device="cpu", model_seed=1,
                    input_transform=prob.input_transform, allow_tf32=False)
    req = P.Compare(ctx=ctx, seed=2, transform=0, atol=w.atol, rtol=w.rtol, reduction_length=w.reduction_length,
                    in_place=False, output_ipc=(_desc(nbytes=1 << 20),))  # claims 1 MiB behind a 4x8 fp16 output
    res = handle(req)
    assert not res.ok and res.status == "REWARD_HACK" and "tampered" in res.detail
