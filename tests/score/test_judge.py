"""The judging rules as pure functions (harness.score.judge, clock, attribution): no subprocess here."""

from __future__ import annotations

import pytest

from harness.execute.wire import protocol as P
from harness.records import Status
from harness.score import attribution as attr
from harness.score import judge
from harness.score.clock import judge_clock, per_call, spread


def call(**kw) -> judge.CallFacts:
    base = dict(ok=True, launches=1, output_types=("torch.Tensor",))
    base.update(kw)
    return judge.CallFacts(**base)


def j(r, profiled=True, dsl="triton", device="cuda", aten=("aten.native_layer_norm",)):
    return judge.judge_call(r, dsl=dsl, device=device, library_aten=aten, profiled=profiled)


def test_an_honest_call_passes():
    assert j(call()) is None and j(call(), profiled=False, device="cpu") is None


def test_a_timing_report_that_is_not_a_set_of_times_is_a_reward_hack():
    """Exploit: a worker rewritten from inside reports NaN, infinite or negative times (the protocol's decoder
    takes any JSON number, Python's NaN and Infinity among them). Before this rule such a sample reached the
    set's statistics, where a NaN makes every comparison false, and the record."""
    for field in ("stream_ms", "device_ms", "enqueue_us", "idle_ms"):
        for bad in (float("nan"), float("inf"), -0.5):
            f = j(call(**{"stream_ms": 0.1, "device_ms": 0.12, field: bad}))
            assert f.status is Status.REWARD_HACK and f.evidence["mechanism"] == "timing_claim", (field, bad)
            assert f.evidence[field] == repr(bad)
    assert j(call(stream_ms=0.1, device_ms=0.12, enqueue_us=40.0, idle_ms=0.03)) is None
    # the wire form: NaN passes the decoder (a number), the judge refuses it
    wire = P.encode(P.CallReport(call_id=1, ok=True, launches=1, output_types=("torch.Tensor",),
                                 stream_ms=float("nan")))
    assert j(P.decode(wire)).evidence["mechanism"] == "timing_claim"


def test_the_protocol_s_messages_are_read_as_the_same_facts():
    """The session hands the judge its wire messages; they must mean what the facts mean, field by field."""
    import dataclasses

    fields = {f.name for f in dataclasses.fields(P.CallReport)}
    children = 2 if "new_children" in fields else 0  # a report without the field claims no child processes
    kw = dict(call_id=3, ok=False, error=P.Error("OutOfMemoryError", "CUDA out of memory", "tb"), out_of_memory=True,
              stream_ms=0.1, device_ms=0.2, enqueue_us=30.0, idle_ms=0.01, launches=2, aten_ops=("mm",),
              new_threads=1, new_children=2, output_types=("torch.Tensor",), lowered_sources=("src",),
              audit_blocked=("x",))
    report = P.CallReport(**{k: v for k, v in kw.items() if k in fields})
    assert judge.CallFacts.of(report) == judge.CallFacts(
        ok=False, error_type="OutOfMemoryError", error_message="CUDA out of memory", traceback_tail="tb",
        out_of_memory=True, stream_ms=0.1, device_ms=0.2, enqueue_us=30.0, idle_ms=0.01, launches=2,
        aten_ops=("mm",), new_threads=1, new_children=children, output_types=("torch.Tensor",), lowered=True,
        audit_blocked=("x",))
    assert judge.CallFacts.of(P.CallReport(call_id=1, ok=True)).lowered is False
    assert judge.CheckFacts.of(P.ErrorReply(status="HARNESS_ERROR", detail="d", out_of_memory=True)) == \
        judge.CheckFacts(ok=False, status="HARNESS_ERROR", detail="d", checker_failed=True, out_of_memory=True)
    assert judge.CheckFacts.of(P.VerifyReply(ok=False, status="INCORRECT_NUMERICAL", detail="d", max_excess=4.0)) == \
        judge.CheckFacts(ok=False, status="INCORRECT_NUMERICAL", detail="d", max_excess=4.0)
    assert judge.CheckFacts.of(P.CompareReply(ok=True, status="PASSED", detail="")).ok
    assert judge.judge_compare(P.ErrorReply(status="HARNESS_ERROR", detail="x", out_of_memory=True), 2).retry_alone


def test_audit_refusals_and_patched_functions_are_reward_hacks():
    f = j(call(audit_blocked=("sys._getframe: <frame>",)))
    assert f.status is Status.REWARD_HACK and f.evidence["mechanism"] == "audit_hook"
    f = judge.judge_tamper((), ("patched torch.nn.functional.layer_norm",))
    assert f.status is Status.REWARD_HACK and "layer_norm" in f.message
    assert judge.judge_tamper((), (), new_children=1).evidence["mechanism"] == "child_process"
    assert judge.judge_tamper((), ()) is None


def test_without_a_profiler_the_launch_counter_and_the_aten_recorder_decide():
    assert j(call(launches=0), profiled=False, device="cpu").evidence["mechanism"] == "no_dsl_kernel"
    # a `dsl=torch` header exempts nothing
    assert j(call(launches=0), profiled=False, device="cpu", dsl="torch").status is Status.REWARD_HACK
    f = j(call(aten_ops=("native_layer_norm", "empty")), profiled=False, device="cpu")
    assert f.evidence["mechanism"] == "library_fallback"
    # with a profiler the (claimed) launch count is not what decides
    assert j(call(launches=0)) is None


def test_an_out_of_memory_on_a_shared_gpu_asks_for_a_retry_alone():
    f = j(call(ok=False, error_type="OutOfMemoryError", error_message="CUDA out of memory", out_of_memory=True))
    assert f.status is Status.RUNTIME_ERROR and f.retry_alone and "OutOfMemoryError" in f.message
    assert not j(call(ok=False, error_type="OutOfMemoryError", out_of_memory=True), device="cpu").retry_alone
    assert not j(call(ok=False, error_type="ValueError", error_message="bad"), device="cuda").retry_alone


def test_threads_children_and_wrong_types():
    assert j(call(new_threads=1)).evidence["mechanism"] == "late_thread"
    assert j(call(new_children=2)).evidence["mechanism"] == "child_process"
    assert j(call(output_types=("MyTensor",))).status is Status.INCORRECT_DTYPE
    assert j(call(output_types=())).status is Status.INCORRECT_DTYPE


def test_library_identical_outputs_are_noted_not_judged():
    """Bug it stops: honest sequential-K fp32 GEMMs (Triton, TileLang) and fp32 GELUs were bit-identical to the
    library on the H200 and were called library fallbacks; identity is a note for an audit, not a verdict."""
    assert "bit-identical" in judge.fingerprint_note([1.0] * 5, [0.4] * 5)
    assert judge.fingerprint_note([1.0] * 5, [0.001] * 5) is None
    assert judge.fingerprint_note([0.6, 1.0, 1.0, 1.0, 1.0], [0.4] * 5) is None
    assert judge.fingerprint_note([None] * 5, [None] * 5) is None


def test_a_timed_call_that_does_not_match_is_a_reward_hack_with_its_position():
    bad = judge.CheckFacts(ok=False, status="INCORRECT_NUMERICAL", detail="3/4096 elements out of tolerance",
                           max_excess=40.0)
    f = judge.judge_verification(bad, 17, "timed")
    assert f.status is Status.REWARD_HACK and f.evidence["position"] == 17 and "secret position" in f.message
    assert f.evidence["max_excess"] == 40.0
    assert judge.judge_verification(judge.CheckFacts(ok=True, status="PASSED", detail=""), 3, "batch") is None
    failed = judge.CheckFacts(ok=False, status="HARNESS_ERROR", detail="x", checker_failed=True)
    assert judge.judge_verification(failed, 3, "batch").status is Status.HARNESS_ERROR


def test_markers_must_be_two_per_call():
    assert judge.judge_markers(10, 5) is None and judge.judge_markers(0, 5) is None
    assert judge.judge_markers(11, 5).evidence["mechanism"] == "profiler_markers"


def test_contention_flags_a_library_slowed_while_the_candidate_lived():
    f = judge.judge_contention(2.0, 0.01, 1.0, 0.01)
    assert f.status is Status.REWARD_HACK and f.evidence["mechanism"] == "library_contention"
    assert judge.judge_contention(1.24, 0.01, 1.0, 0.01) is None  # neighbours' noise (seen: 24%)
    assert judge.judge_contention(0.002, 0.01, 0.001, 0.01) is None  # tiny absolute difference


def test_a_microsecond_library_slowed_by_starting_neighbours_is_not_blamed():
    """False accusations it stops (an H200 service load test, smoke workloads, 12 in flight): five honest
    bundled kernels' libraries ran 3-11x slower while they lived, by 29-46 us, as other workers started beside
    them. Below CONTENTION_HACK_MS nobody is blamed; the record is rescored against the quiet time instead."""
    seen = [(0.043984, 0.006384), (0.051184, 0.004288), (0.035056, 0.007056), (0.069392, 0.023136),
            (0.039392, 0.010512)]
    for alive, quiet in seen:
        assert judge.judge_contention(alive, 0.05, quiet, 0.05) is None
        assert judge.slowed(alive, 0.05, quiet, 0.05) is not None  # rescored: a small spinner gains nothing
    assert judge.judge_contention(0.25, 0.05, 0.1, 0.05) is not None  # 150% and 0.15 ms: blamed


def test_a_library_slowed_by_neighbours_is_rescored_not_blamed():
    """False accusation it stops (on an H200): an honest TileLang bmm's library ran 57% slower while it lived
    (0.138 vs 0.088 ms) because neighbours were starting beside it; its own times were inflated alike. Below 2x
    nobody is blamed: the record is scored against the quiet library time, so a sabotage that small gains nothing."""
    import types

    from harness.execute.parent.timing_phase import TimingPhase, stats

    assert judge.judge_contention(0.138, 0.062, 0.088, 0.01) is None
    assert judge.slowed(0.138, 0.062, 0.088, 0.01) == pytest.approx(0.138 / 0.088 - 1)
    assert judge.slowed(0.12, 0.01, 0.1, 0.01) is None
    seen = []

    def screen(w, kt, lt):
        seen.append((kt.median_ms, lt.median_ms))
        return "screened"

    session = types.SimpleNamespace(dev=types.SimpleNamespace(screen_for=lambda p: screen), p=None)
    old = types.SimpleNamespace(status=Status.PASSED, timing=stats([0.19, 0.19, 0.19], "cuda_event"), warnings=(),
                                replace=lambda **kw: kw)
    quiet = stats([0.088, 0.088, 0.089], "cuda_event")
    new = TimingPhase(session)._rescore(None, old, 0.138, quiet)
    assert new["library_timing"] is quiet and new["screening"] == "screened" and seen == [(0.19, 0.088)]
    assert "57% slower" in new["warnings"][0]


def test_clock_agreement_host_bound_and_forgery():
    ok = judge_clock(event_kernel_ms=1.0, event_library_ms=1.2, enqueue_us=20, trusted_kernel_ms=1.1,
                     trusted_library_ms=1.25, kernel_spread=0.02, n=10)
    assert ok.hack is None and ok.source == "cuda_event" and ok.kernel_ms == 1.0
    host = judge_clock(event_kernel_ms=0.005, event_library_ms=0.006, enqueue_us=40, trusted_kernel_ms=0.045,
                       trusted_library_ms=0.01, kernel_spread=0.02, n=200)
    assert host.hack is None and host.source == "trusted_batch" and host.kernel_ms == 0.045 and host.library_ms == 0.01
    forged = judge_clock(event_kernel_ms=0.2, event_library_ms=1.2, enqueue_us=20, trusted_kernel_ms=1.0,
                         trusted_library_ms=1.2, kernel_spread=0.02, n=10)
    assert forged.hack is not None and forged.evidence["trusted_ms_per_call"] == 1.0
    # on the CPU path the worker's clock is the host's: an enqueue time explains nothing
    cpu = judge_clock(event_kernel_ms=0.2, event_library_ms=1.2, enqueue_us=5000, trusted_kernel_ms=1.0,
                      trusted_library_ms=1.2, kernel_spread=0.02, n=2, base_tolerance=1.0, host_bound_possible=False)
    assert cpu.hack is not None


def test_batch_arithmetic():
    assert per_call([12.0, 14.0], [2.0, 2.0], 10) == pytest.approx(1.0)
    assert spread([12.0, 14.0], [2.0, 2.0], 10) == pytest.approx(0.2 / 1.1)
    assert per_call([1.0], [2.0], 10) == 0.0 and per_call([], [], 10) == 0.0


def test_one_disturbed_batch_moves_nothing():
    """Bug it stops: the parent's clock read by a thread that waited for the interpreter lock made one of two
    batches 15x longer, and the median of the two scored a 0.13 ms kernel at 1.9 ms per call (on an H200).
    A wait only adds time: the shortest batch, less the shortest round trip, is the least disturbed."""
    quiet, stalled = [13.3, 180.0], [0.5, 0.4]  # 100 calls of 0.13 ms; the second batch waited 167 ms
    assert per_call(quiet, stalled, 100) == pytest.approx(0.129)
    d = judge_clock(event_kernel_ms=0.133, event_library_ms=0.156, enqueue_us=400,
                    trusted_kernel_ms=per_call(quiet, stalled, 100), trusted_library_ms=0.15,
                    kernel_spread=spread(quiet, stalled, 100), n=100)
    assert d.hack is None and d.source == "cuda_event" and d.kernel_ms == 0.133


def test_a_forger_cannot_widen_the_tolerance_by_delaying_a_batch():
    """A candidate controls its batches' spread: one batch delayed by seconds must not let a claim 3x too fast
    agree with the clock (the spread's share of the tolerance is capped)."""
    real = 1.0
    batches = [10 * real + 0.4, 10 * real + 0.4 + 5000.0]  # the second batch held for 5 s
    trusted = per_call(batches, [0.4, 0.4], 10)
    assert trusted == pytest.approx(real)
    d = judge_clock(event_kernel_ms=real / 3, event_library_ms=1.2, enqueue_us=30, trusted_kernel_ms=trusted,
                    trusted_library_ms=1.2, kernel_spread=spread(batches, [0.4, 0.4], 10), n=10)
    assert d.hack is not None and d.evidence["tolerance"] == pytest.approx(0.5)


def test_attribution_classes_and_the_fallback_rule():
    library = {"void at::native::vectorized_layer_norm_kernel<c10::Half, float>(int, float)"}
    rows = [attr.Row("_layernorm_fwd", 100.0, 5), attr.Row(next(iter(library)), 20.0, 5),
            attr.Row("void at::native::elementwise_kernel<copy>", 5.0, 5)]
    att = attr.attribute(rows, 5, library, {"_layernorm_fwd"})
    assert att.dsl_share == pytest.approx(100 / 125) and attr.fallback_reason(att) is None
    assert [k.kind for k in att.kernels] == ["dsl", "library", "aten"]
    assert att.kernels[0].us_per_call == 20.0
    fallback = attr.attribute([attr.Row("_dummy", 1.0, 5), attr.Row(next(iter(library)), 100.0, 5)], 5, library,
                              {"_dummy"})
    assert "library fallback" in attr.fallback_reason(fallback)


def test_data_movement_around_an_own_kernel_is_slow_not_a_fallback():
    """False accusation it stops (on an H200): the bundled defect rmsnorm__fp64_promotion casts its input
    to float64 and back with PyTorch around its own kernel; the casts were 64-79% of its GPU time and the honest,
    slow kernel was called a library fallback. Copies and casts compute nothing of the op: they are left out of
    the shares, so it is judged on speed. Computing the op with other aten kernels still is a fallback."""
    cast = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>"
    att = attr.attribute([attr.Row("_rmsnorm_fp64_kernel", 36.0, 5), attr.Row(cast, 64.0, 5)], 5, set(),
                         {"_rmsnorm_fp64_kernel"})
    assert [k.kind for k in att.kernels] == ["copy", "dsl"] and att.dsl_share == 1.0
    assert attr.fallback_reason(att) is None
    composite = attr.attribute([attr.Row("_decoy", 10.0, 5), attr.Row(cast, 30.0, 5),
                                attr.Row("void at::native::reduce_kernel<512, 1, ReduceOp<float, MaxOps>>", 30.0, 5),
                                attr.Row("void at::native::vectorized_elementwise_kernel<4, exp_kernel_cuda>", 30.0, 5)],
                               5, set(), {"_decoy"})
    assert composite.dsl_share == pytest.approx(10 / 70, abs=1e-4) and "library fallback" in attr.fallback_reason(composite)
    library = {"vectorized_elementwise_kernel<GeluCUDAKernelImpl>"}
    cover = attr.attribute([attr.Row("_gelu_kernel", 40.0, 5), attr.Row(next(iter(library)), 30.0, 5),
                            attr.Row(cast, 30.0, 5)], 5, library, {"_gelu_kernel"})
    assert "library op's own kernels" in attr.fallback_reason(cover)  # 30 of the 70 that compute: 43%
    # where the op itself moves data, a copy may be its work: a decoy beside PyTorch's copy is a fallback
    lib_copy = {"CatArrayBatchedCopy<float, unsigned int, 3, 128, 1>"}
    moved = attr.attribute([attr.Row("_decoy", 10.0, 5), attr.Row(cast, 90.0, 5)], 5, lib_copy, {"_decoy"})
    assert [k.kind for k in moved.kernels] == ["aten", "dsl"] and "library fallback" in attr.fallback_reason(moved)


def test_a_decoy_kernel_beside_the_librarys_is_still_a_fallback():
    """Exploit (seen on the H200): run an own GELU kernel as cover and return PyTorch's (DSL 54%, library 46%)."""
    library = {"vectorized_elementwise_kernel<GeluCUDAKernelImpl>"}
    att = attr.attribute([attr.Row("_gelu_kernel", 54.0, 5), attr.Row(next(iter(library)), 46.0, 5)], 5, library,
                         {"_gelu_kernel"})
    assert att.dsl_share >= attr.MIN_DSL_SHARE and "library op's own kernels" in attr.fallback_reason(att)


def test_a_claimed_dsl_name_never_turns_a_library_kernel_into_a_dsl_one():
    library = {"sm90_xmma_gemm_f16f16_f16f32"}
    att = attr.attribute([attr.Row("sm90_xmma_gemm_f16f16_f16f32", 100.0, 1)], 1, library,
                         {"sm90_xmma_gemm_f16f16_f16f32"})
    assert att.kernels[0].kind == "library" and att.dsl_share == 0.0


def test_torch_compile_and_vendor_kernels_are_not_the_candidates():
    att = attr.attribute([attr.Row("triton_poi_fused_gelu_0", 50.0, 1), attr.Row("nvjet_hsh_256x128", 50.0, 1)], 1,
                         set(), {"triton_poi_fused_gelu_0_helper"})
    assert {k.kind for k in att.kernels} == {"inductor", "vendor"} and attr.fallback_reason(att)


def test_a_long_forward_error_keeps_its_end_and_traceback():
    """Bug it stops: TileLang's errors begin with pages of TIR and end with what went wrong; the record kept only
    the first 300 characters (29 KernelBench kernels on the H200 said nothing but their TIR)."""
    tir = "# from tvm.script import tirx as T\n" + "    X = T.match_buffer(...)\n" * 200
    r = call(ok=False, error_type="TypeError", error_message=tir + "the real reason: argument 3 is not a Buffer",
             traceback_tail="Traceback: x")
    f = j(r)
    assert f.status is Status.RUNTIME_ERROR and f.message.endswith("argument 3 is not a Buffer")
    assert "characters ...]" in f.message and len(f.message) < 1400
    assert f.error["traceback_tail"] == "Traceback: x"
    assert judge.brief("short") == "short"


def test_dry_library_shares_are_every_library_op_of_a_complete_dry_record():
    from harness.score.judge import dry_library_shares

    shares = dry_library_shares({"sum": 64, "mul": 4096, "empty": 0}, 4096, ("aten.sum", "aten.mean"))
    assert shares == {"sum": 64 / 4096}  # small shares too: the op finishing partials is what the rule asks about
    assert dry_library_shares({}, 0, ("aten.sum",)) is None  # no complete dry record: nothing known
