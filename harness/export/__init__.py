"""Export and import: problems and results as Hugging Face ``datasets`` parquet, KernelBench data in.

``datasets`` is imported inside the functions of :mod:`harness.export.hf`.
"""
