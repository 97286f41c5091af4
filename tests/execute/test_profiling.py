"""Kernel attribution of a profiler window (harness.execute.shared.profiling.attribute), with synthetic kernels."""

from __future__ import annotations

from harness.execute.shared.profiling import Kernel, attribute

MAIN, SIDE = 7, 9


def k(name, start, dur=1000, stream=MAIN):
    return Kernel(name, stream, start, dur)


def test_kernels_between_hold_and_end_markers_are_the_forwards():
    ks = [k("fill_flush", 0), k("spin_kernel", 10), k("my_kernel", 20), k("spin_kernel", 30),
          k("normal_inputs", 40), k("fill_flush", 50), k("spin_kernel", 60), k("my_kernel", 70), k("spin_kernel", 80)]
    att = attribute(ks)
    assert att.markers == 4
    assert att.rows["my_kernel"] == (2.0, 2, 0.0)
    assert att.rows["fill_flush"] == (0.0, 0, 2.0) and att.rows["normal_inputs"] == (0.0, 0, 1.0)


def test_work_on_another_stream_counts_as_the_forwards_wherever_it_runs():
    ks = [k("spin_kernel", 10), k("x", 20), k("spin_kernel", 30), k("hidden", 35, stream=SIDE)]
    assert attribute(ks).rows["hidden"] == (1.0, 1, 0.0)


def test_a_forged_marker_shifts_the_count():
    """Exploit: the candidate launches the marker kernel itself to hide work 'outside' the window."""
    ks = [k("spin_kernel", 10), k("spin_kernel", 15), k("library_gemm", 20), k("spin_kernel", 30)]
    att = attribute(ks)
    assert att.markers == 3  # judge.judge_markers: 3 markers for 1 call is a reward hack


def test_side_stream_work_is_measured_kernels_and_copies_alike():
    """What the side-stream confirmation reads (harness.measure.timing.confirm_side_work): the GPU time of kernels
    and copies on any stream but the markers'. A copy on the timed stream is ordered before the end event and is
    not counted; copies never enter the kernel table."""
    ks = [k("spin_kernel", 10), k("x", 20), k("Memcpy DtoD (Device -> Device)", 25, dur=500), k("spin_kernel", 30)]
    ks[2] = Kernel(ks[2].name, MAIN, 25, 500, copy=True)
    att = attribute(ks)
    assert att.side_us == 0.0 and "Memcpy DtoD (Device -> Device)" not in att.rows
    side = attribute([*ks, Kernel("Memset (Device)", SIDE, 35, 2000, copy=True), k("late", 40, 3000, SIDE)])
    assert side.side_us == 5.0 and side.rows["late"] == (3.0, 1, 0.0)
