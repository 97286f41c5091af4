"""The speed-of-light score ``S`` of one timed kernel: a pure function of three times.

    S = 1 / (1 + (t_kernel - t_floor) / (t_library - t_floor)),  clamped to [0, 1]

1 at the roofline floor, 0.5 at library speed, towards 0 as the kernel slows down. When the library is at or
below the measured floor (``t_library <= t_floor``: measurement noise near the roof) the denominator is not
positive and ``S = 0.5 * t_library / t_kernel`` instead (0.5 at library speed, the same direction), clamped to
[0, 1]. It lives in ``score/`` because both the reward (:mod:`harness.score.reward`) and the reports
(:mod:`harness.report.metrics`, which defines which records have an ``S``) use it, and scoring never imports the
report layer.
"""

from __future__ import annotations


def sol_score(t_kernel: float, t_library: float, t_floor: float) -> float:
    """Speed-of-light score in [0, 1] from the kernel's, the library's and the roofline floor's times (any one
    unit): 1 at the floor, 0.5 at library speed (see the module docstring)."""
    if t_kernel <= t_floor:
        return 1.0
    denom = t_library - t_floor
    s = 0.5 * t_library / t_kernel if denom <= 0 else 1.0 / (1.0 + (t_kernel - t_floor) / denom)
    return min(1.0, max(0.0, s))
