"""Isolated execution: the runner (trusted parent), the candidate worker and the reference checker (stage 4)."""
