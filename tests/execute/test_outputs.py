"""Committed outputs: what the checker accepts from an untrusted worker, and the order it checks it in.

Exploits the rules stop: descriptors naming more bytes than an output holds (the checker would read past the
allocation), a misaligned offset (the checker's kernels would fault and poison its CUDA context), fields that are
not plain JSON numbers and strings (each REWARD_HACK: an honest worker never sends one); and outputs shaped to make
the checker do the work: a 4-byte tensor expanded with stride 0 to 2**38 elements made the checker allocate 1 TiB
(HARNESS_ERROR on the CPU, TOO_LARGE on a GPU, neither the candidate's): it is the candidate's wrong output,
decided from the descriptors before a byte is read.
"""

from __future__ import annotations

import os

import pytest

from harness.execute.checker.outputs import expected_of, read, still_equal
from harness.execute.wire import protocol as P
from harness.execute.wire.outputs import (CommitMalformed, LayoutMismatch, check_descriptors, check_layout, overlaps)
from harness.execute.worker.outputs import NotPlain, OutputReader


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
    with pytest.raises(CommitMalformed, match=what):
        check_descriptors([bad])


def test_too_many_outputs_are_refused():
    with pytest.raises(CommitMalformed, match="at most"):
        check_descriptors([_desc()] * 65)


@pytest.mark.parametrize("shape, stride, shares", [
    ([4, 8], [8, 1], False), ([8, 4], [1, 8], False), ([4, 8], [16, 1], False),  # padded rows share nothing
    ([4, 8], [0, 1], True), ([4, 8], [1, 1], True), ([3, 3], [2, 1], True),      # stride 0, overlapping windows
    ([1, 8], [0, 1], False), ([5], [0], True), ([], [], False),
])
def test_overlap_is_told_from_the_strides(shape, stride, shares):
    assert overlaps(shape, stride) is shares


@pytest.mark.parametrize("desc, status, what", [
    (_desc(shape=[4, 9], nbytes=72, stride=[9, 1]), "INCORRECT_SHAPE", "shape"),
    (_desc(dtype="float32", nbytes=128), "INCORRECT_DTYPE", "dtype"),
    (_desc(stride=[0, 1], nbytes=16), "INCORRECT_SHAPE", "share memory"),
    (_desc(stride=[1, 0], nbytes=8), "INCORRECT_SHAPE", "share memory"),
    (_desc(stride=[1 << 25, 1], nbytes=(3 * (1 << 25) + 8) * 2), "INCORRECT_SHAPE", "spread"),
])
def test_outputs_that_are_not_the_references_are_the_candidates(desc, status, what):
    with pytest.raises(LayoutMismatch, match=what) as info:
        check_layout(check_descriptors([desc]), [([4, 8], "float16")])
    assert info.value.status == status


def test_the_number_of_outputs_must_be_the_references():
    with pytest.raises(LayoutMismatch, match="2 output"):
        check_layout(check_descriptors([_desc(), _desc()]), [([4, 8], "float16")])


# ----------------------------------------------------------------------------------------- files


def _write(tmp_path, tensors, name="out.raw"):
    import torch

    path = tmp_path / name
    OutputReader(torch).write(tensors, str(path))
    return P.Committed(path=str(path))


def test_a_file_round_trip_keeps_every_layout(tmp_path):
    """Outputs are read by address with their strides: a transposed view, an offset view, bf16, bool and an
    empty tensor come back equal, and contiguous."""
    import torch

    base = torch.randn(6, 5)
    outs = [base.t(), base[2:, 1:], torch.randn(7).bfloat16(), torch.tensor([True, False, True]), torch.empty(0, 3)]
    back = read(_write(tmp_path, outs), expected_of(outs), str(tmp_path))
    assert len(back) == len(outs)
    for a, b in zip(outs, back):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b) and b.is_contiguous()
    assert still_equal(_write(tmp_path, outs, "again.raw"), back)  # a file cannot change while its worker is stopped


def test_a_stride0_expansion_to_2_38_elements_is_refused_before_any_copy(tmp_path):
    """Exploit: four bytes expanded with stride 0; reading it would materialize 1 TiB in the checker."""
    import torch

    huge = torch.zeros(1).expand(2 ** 38)
    committed = _write(tmp_path, [huge])
    assert os.path.getsize(committed.path) < 200  # the worker wrote its four bytes, not 1 TiB
    with pytest.raises(LayoutMismatch, match="shape") as info:
        read(committed, [([1024], "float32")], str(tmp_path))
    assert info.value.status == "INCORRECT_SHAPE"
    with pytest.raises(LayoutMismatch, match="share memory"):  # the right shape, but every element the same memory
        read(committed, [([2 ** 38], "float32")], str(tmp_path))


def test_a_file_whose_size_is_not_its_header_is_malformed(tmp_path):
    import torch

    committed = _write(tmp_path, [torch.zeros(8)])
    with open(committed.path, "ab") as f:
        f.write(b"\0" * 8)
    with pytest.raises(CommitMalformed, match="declares"):
        read(committed, [([8], "float32")], str(tmp_path))
    (tmp_path / "junk.raw").write_bytes(b"not json\n")
    with pytest.raises(CommitMalformed, match="JSON"):
        read(P.Committed(path=str(tmp_path / "junk.raw")), [([8], "float32")], str(tmp_path))


def test_a_committed_file_must_be_a_regular_file_in_the_hand_off_folder(tmp_path):
    """Exploit: a worker naming a project file (or a link to one) as its output."""
    import torch

    folder = tmp_path / "handoff"
    folder.mkdir()
    outside = _write(tmp_path, [torch.zeros(8)])
    with pytest.raises(CommitMalformed, match="hand-off folder"):
        read(outside, [([8], "float32")], str(folder))
    (folder / "link.raw").symlink_to(outside.path)
    with pytest.raises(CommitMalformed, match="cannot be opened"):
        read(P.Committed(path=str(folder / "link.raw")), [([8], "float32")], str(folder))
    with pytest.raises(CommitMalformed, match="nothing was committed"):
        read(P.Committed(), [([8], "float32")], str(folder))


def test_the_write_calls_no_pickle_registry_and_no_python_method(tmp_path):
    """Exploit (``gelu__handoff_pickle_reducer.py``): ``torch.save`` consulted ``copyreg.dispatch_table``, which
    candidate code filled. The reader takes nothing from a registry or from ``torch.Tensor``'s Python
    attributes."""
    import copyreg

    import torch

    called = []
    saved = copyreg.dispatch_table.get(torch.Tensor)
    originals = {name: getattr(torch.Tensor, name) for name in ("detach", "to", "contiguous", "cpu", "__reduce_ex__")}
    copyreg.dispatch_table[torch.Tensor] = lambda t: called.append("copyreg") or torch.Tensor.__reduce_ex__(t, 2)
    for name in originals:
        setattr(torch.Tensor, name, lambda self, *a, _n=name, **k: called.append(_n) or originals[_n](self, *a, **k))
    try:
        committed = _write(tmp_path, [torch.arange(5.0)])
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)
        if saved is None:
            copyreg.dispatch_table.pop(torch.Tensor, None)
        else:
            copyreg.dispatch_table[torch.Tensor] = saved
    assert called == []
    assert torch.equal(read(committed, [([5], "float32")], str(tmp_path))[0], torch.arange(5.0))


def test_outputs_that_are_not_plain_tensors_are_not_read(tmp_path):
    """A subclass (its Python methods would run in the worker's loop), a lazy conjugate (its memory is not its
    values) and a sparse tensor are refused, not read."""
    import torch

    class Sneaky(torch.Tensor):
        pass

    reader = OutputReader(torch)
    for bad in (torch.randn(3).as_subclass(Sneaky), torch.randn(3, dtype=torch.complex64).conj(),
                torch.eye(3).to_sparse(), [1.0, 2.0]):
        with pytest.raises(NotPlain):
            reader.write([bad], str(tmp_path / "out.raw"))


# ----------------------------------------------------------------------------------------- CUDA IPC, faked


def test_export_without_a_cuda_driver_is_none():
    import torch

    assert OutputReader(torch).export([torch.ones(3)]) is None  # host memory: the worker writes a file instead


def test_export_sends_the_whole_handle_once_per_allocation(monkeypatch):
    """A CUDA IPC handle is 64 raw bytes, NULs included (cutting it at the first NUL made every read fail on a
    GPU); outputs in one allocation share one export."""
    import torch

    from harness.execute.shared import cuda_ipc

    exported = []
    monkeypatch.setattr(cuda_ipc, "synchronize", lambda: None)
    monkeypatch.setattr(cuda_ipc, "address_range", lambda ptr: (ptr - ptr % 4096, 1 << 20))
    monkeypatch.setattr(cuda_ipc, "export_handle", lambda base: exported.append(base) or ("0700" * 32))
    reader = OutputReader(torch)
    reader.is_cuda = lambda t: True  # host memory standing in for the device's
    block = torch.ones(64, dtype=torch.float16)
    descs = reader.export([block[:32].view(4, 8), block[32:].view(4, 8)])
    assert [d["handle"] for d in descs] == ["0700" * 32] * 2 and len(exported) <= 2
    assert check_descriptors(descs)


def test_a_second_read_that_differs_is_seen(monkeypatch):
    """On a GPU the checker reads committed bytes twice: a kernel of the worker still writing between the reads
    shows. (The driver is faked; what is tested is the comparison, NaN payloads included.)"""
    import torch

    from harness.execute.checker import outputs as co

    first = [torch.tensor([1.0, float("nan")])]
    same = [first[0].clone().view(torch.uint8)]
    changed = [torch.tensor([2.0, float("nan")]).view(torch.uint8)]
    committed = P.Committed(ipc=({"dtype": "float32", "shape": [2], "stride": [1], "nbytes": 8, "handle": "ab" * 64,
                                  "offset": 0},))
    monkeypatch.setattr(co, "_ipc_bytes", lambda descs: [t.clone() for t in same])
    assert still_equal(committed, first)
    monkeypatch.setattr(co, "_ipc_bytes", lambda descs: [t.clone() for t in changed])
    assert not still_equal(committed, first)


def test_the_checker_calls_malformed_descriptors_reward_hack_and_a_huge_expansion_incorrect(tmp_path):
    import torch

    from harness.execute.checker.main import handle
    from harness.problems.registry import load_registry

    prob = load_registry().get("gelu")
    w = [w for w in prob.workloads if w.is_smoke][0]
    ctx = P.Context(problem_path=str(prob.path), params=dict(w.params), dtype=w.dtype, device="cpu", model_seed=1,
                    input_transform=prob.input_transform, allow_tf32=False)

    def compare(outputs):
        return handle(P.Compare(ctx=ctx, seed=2, transform=0, atol=w.atol, rtol=w.rtol,
                                reduction_length=w.reduction_length, in_place=True, outputs=outputs,
                                handoff_dir=str(tmp_path)))
    res = compare(P.Committed(ipc=(_desc(nbytes=1 << 20),)))  # claims 1 MiB behind a 4x8 fp16 output
    assert not res.ok and res.status == "REWARD_HACK" and "malformed" in res.detail
    res = compare(_write(tmp_path, [torch.zeros(1).expand(2 ** 38)]))
    assert not res.ok and res.status == "INCORRECT_SHAPE", res


def test_the_idle_probe_tells_a_time_sliced_gpu_from_an_idle_one():
    """A probe kernel of the checker's waits for another context's running kernel to yield its time slice: far
    slower than the checker's idle baseline means busy. (The GPU is faked: a clock and probe latencies.)"""
    from harness.execute.checker.gpu_idle import BUSY_FLOOR_US, IdleProbe

    latencies = iter([8e-6] * 21 + [2e-3, 2e-3, 9e-6])  # idle baseline, then two busy probes, then idle
    now = {"t": 0.0}

    def probe():
        now["t"] += 0.01
        return next(latencies)
    p = IdleProbe(probe, clock=lambda: now["t"])
    assert p.calibrate() == pytest.approx(8.0)
    assert not p.busy(50.0) and p.busy(BUSY_FLOOR_US + 1)
    idle, us = p.wait_idle(wait_s=1.0)
    assert idle and us == pytest.approx(9.0)
    stuck = IdleProbe(lambda: 5e-3, clock=lambda: now.__setitem__("t", now["t"] + 0.02) or now["t"])
    stuck.baseline_us = 8.0
    assert stuck.wait_idle(wait_s=0.05) == (False, pytest.approx(5000.0))


def test_an_ipc_read_waits_for_an_idle_gpu_and_counts_a_busy_start(monkeypatch):
    """The checker probes before it reads committed device memory; a read that started busy is counted (a fact
    for the record), the bytes' second read decides."""
    import torch

    from harness.execute.checker import outputs as co
    from harness.execute.checker.gpu_idle import IdleProbe

    probe = IdleProbe(lambda: 1.0)  # never idle
    probe.baseline_us = 5.0
    monkeypatch.setattr(co, "_PROBE", [probe])
    monkeypatch.setattr(co, "_ipc_bytes", lambda descs: [torch.zeros(64, dtype=torch.uint8)])
    monkeypatch.setitem(co.STATE, "busy_reads", 0)
    committed = P.Committed(ipc=(_desc(),))
    (out,) = read(committed, [([4, 8], "float16")])
    assert out.shape == (4, 8) and co.STATE["busy_reads"] == 1


def test_a_padded_layout_of_a_small_output_is_accepted():
    """Honest: a GEMM storing whole 64-column tiles into a padded buffer returns the view of its 24 columns (2.7x
    its elements); no element shares memory and the span costs the checker nothing."""
    padded = _desc(dtype="float32", shape=[32, 24], stride=[64, 1], nbytes=(31 * 64 + 24) * 4)
    check_layout(check_descriptors([padded]), [([32, 24], "float32")])


def test_a_fifo_named_as_the_committed_file_is_refused_without_blocking(tmp_path):
    """Exploit: a FIFO renamed over the committed file; opening it for reading would wait for a writer, and the
    only processes that could write are stopped: the checker would hang until the parent gave up on it."""
    import threading

    folder = tmp_path / "handoff"
    folder.mkdir()
    fifo = folder / "c1.out.raw"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(_read_or_error(fifo, folder)), daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "the read blocked on a FIFO"
    assert isinstance(got[0], CommitMalformed) and "not a regular file" in str(got[0])


def _read_or_error(path, folder):
    try:
        return read(P.Committed(path=str(path)), [([8], "float32")], str(folder))
    except Exception as exc:  # noqa: BLE001
        return exc
