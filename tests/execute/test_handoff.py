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

from harness.execute.wire.handoff import HandoffTampered, OutputReader, check_descriptors


def _desc(**kw):
    d = {"dtype": "float16", "shape": [4, 8], "stride": [8, 1], "nbytes": 64, "handle": "ab" * 64, "offset": 0}
    d.update(kw)
    return d


def test_well_formed_descriptors_pass():
    assert check_descriptors([_desc(), _desc(dtype="bfloat16", shape=[0], stride=[1], nbytes=0, handle=""),
                              _desc(shape=[8, 4], stride=[1, 8]), _desc(shape=[4, 8], stride=[0, 1], nbytes=16)])


@pytest.mark.parametrize("bad, what", [
    (_desc(nbytes=128), "nbytes"),                         # claims more bytes than the shape holds
    (_desc(dtype="object"), "dtype"),                     # not a tensor dtype
    (_desc(dtype="float32", nbytes=64), "nbytes"),         # dtype changed, byte count not
    (_desc(shape=[-1, 8]), "shape"),
    (_desc(shape=[4.0, 8]), "shape"),
    (_desc(shape=[1] * 17, nbytes=2), "shape"),
    (_desc(stride=[8]), "stride"),                          # one stride per dimension
    (_desc(stride=[-8, 1]), "stride"),
    (_desc(stride=[16, 1]), "nbytes"),                      # the strides span more bytes than it claims
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
    assert OutputReader(torch).export([torch.ones(3)]) is None


def test_export_sends_the_whole_handle_nul_bytes_included(monkeypatch):
    """A CUDA IPC handle is 64 raw bytes, NULs included; cutting it at the first NUL made every
    hand-off fail on the H200 (found there, 2026-11-30)."""
    import ctypes

    import torch

    from harness.execute.wire import handoff

    def get_range(pbase, psize, ptr):
        pbase._obj.value, psize._obj.value = ptr - 16, 1 << 20
        return 0

    def get_handle(phandle, base):
        ctypes.memmove(ctypes.addressof(phandle._obj), b"\x07\x00" * 32, 64)
        return 0

    class FakeDriver:
        cuMemGetAddressRange_v2 = staticmethod(get_range)
        cuIpcGetMemHandle = staticmethod(get_handle)
        cuCtxSynchronize = staticmethod(lambda: 0)

    monkeypatch.setattr(handoff, "_LIB", [FakeDriver(), None])
    reader = OutputReader(torch)
    reader.is_cuda = lambda t: True  # host memory standing in for the device's
    descs, keep = reader.export([torch.ones(4, 8, dtype=torch.float16)])
    assert descs[0]["handle"] == "0700" * 32 and descs[0]["offset"] == 16
    assert check_descriptors(descs) and keep[0].shape == (4, 8)


def test_checker_fails_a_tampered_descriptor_as_reward_hack():
    from harness.execute.wire import protocol as P
    from harness.execute.checker.main import handle
    from harness.problems.registry import load_registry

    prob = load_registry().get("gelu")
    w = [w for w in prob.workloads if w.is_smoke][0]
    ctx = P.Context(problem_path=str(prob.path), params=dict(w.params), dtype=w.dtype, device="cpu", model_seed=1,
                    input_transform=prob.input_transform, allow_tf32=False)
    req = P.Compare(ctx=ctx, seed=2, transform=0, atol=w.atol, rtol=w.rtol, reduction_length=w.reduction_length,
                    in_place=False, output_ipc=(_desc(nbytes=1 << 20),))  # claims 1 MiB behind a 4x8 fp16 output
    res = handle(req)
    assert not res.ok and res.status == "REWARD_HACK" and "tampered" in res.detail


# ----------------------------------------------------------------------------------------- the worker's reads


def _reader():
    import torch

    return torch, OutputReader(torch)


def test_a_file_round_trip_keeps_every_layout(tmp_path):
    """Outputs are read by address with their strides: a transposed view, an offset view, a broadcast (stride 0),
    bf16, bool and an empty tensor come back equal, and contiguous."""
    from harness.execute.wire.handoff import read_raw

    torch, reader = _reader()
    base = torch.randn(6, 5)
    outs = [base.t(), base[2:, 1:], torch.arange(4.0).expand(3, 4), torch.randn(7).bfloat16(),
            torch.tensor([True, False, True]), torch.empty(0, 3)]
    path = tmp_path / "out.raw"
    back = read_raw(str(path), reader.write(outs, path))
    assert len(back) == len(outs)
    for a, b in zip(outs, back):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b) and b.is_contiguous()


def test_a_file_rewritten_after_the_worker_wrote_it_is_tampered(tmp_path):
    from harness.execute.wire.handoff import read_raw

    torch, reader = _reader()
    path = tmp_path / "out.raw"
    digest = reader.write([torch.zeros(8)], path)
    data = path.read_bytes()
    path.write_bytes(data[:-4] + b"\x00\x00\x80\x3f")  # the last element made 1.0
    with pytest.raises(HandoffTampered, match="digest"):
        read_raw(str(path), digest)
    with pytest.raises(HandoffTampered, match="digest"):
        read_raw(str(path), None)


def test_the_read_calls_no_pickle_registry_and_no_python_method(tmp_path):
    """Exploit (session 16's red team, ``gelu__handoff_pickle_reducer.py``): ``torch.save`` consulted
    ``copyreg.dispatch_table``, which candidate code filled; its reducer saw which outputs were being checked.
    The reader takes nothing from a registry or from ``torch.Tensor``'s Python attributes."""
    import copyreg

    from harness.execute.wire.handoff import read_raw

    torch, reader = _reader()
    called = []
    saved = copyreg.dispatch_table.get(torch.Tensor)
    originals = {name: getattr(torch.Tensor, name) for name in ("detach", "to", "contiguous", "cpu", "__reduce_ex__")}
    copyreg.dispatch_table[torch.Tensor] = lambda t: called.append("copyreg") or torch.Tensor.__reduce_ex__(t, 2)
    for name in originals:
        setattr(torch.Tensor, name, lambda self, *a, _n=name, **k: called.append(_n) or originals[_n](self, *a, **k))
    try:
        path = tmp_path / "out.raw"
        digest = reader.write([torch.arange(5.0)], path)
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)
        if saved is None:
            copyreg.dispatch_table.pop(torch.Tensor, None)
        else:
            copyreg.dispatch_table[torch.Tensor] = saved
    assert called == []
    assert torch.equal(read_raw(str(path), digest)[0], torch.arange(5.0))


def test_outputs_that_are_not_plain_tensors_are_not_read(tmp_path):
    """A subclass (its Python methods would run on the worker's trusted thread), a lazy conjugate (its memory is
    not its values) and a sparse tensor are refused, not read."""
    from harness.execute.wire.handoff import NotPlain

    torch, reader = _reader()

    class Sneaky(torch.Tensor):
        pass

    for bad in (torch.randn(3).as_subclass(Sneaky), torch.randn(3, dtype=torch.complex64).conj(),
                torch.eye(3).to_sparse(), [1.0, 2.0]):
        with pytest.raises(NotPlain):
            reader.write([bad], tmp_path / "out.raw")
