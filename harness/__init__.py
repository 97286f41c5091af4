"""KernelGate: an evaluation harness for Triton and TileLang GPU kernels.

Pipeline (one subpackage per stage): problems -> candidates -> build ->
execute -> measure -> score -> results -> report, with :mod:`harness.cli` on
top. Importing the package does no work: no CUDA, no file writes.
"""

__version__ = "0.1.0"
