"""KernelGate: an evaluation harness for Triton and TileLang GPU kernels.

Pipeline (one subpackage per stage): problems -> candidates -> build ->
execute -> measure -> score -> results -> report, with :mod:`harness.cli` on
top. Importing the package does no work: no CUDA, no file writes.
"""

from harness.version import __version__  # noqa: F401 - the package's version, defined once


def __getattr__(name: str):
    """``from harness import evaluate`` (and the batch and async forms), imported on first use."""
    if name in ("evaluate", "evaluate_batch", "evaluate_async"):
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
