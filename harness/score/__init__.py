"""Scoring: correctness comparison, roofline, gates and verdicts (stage 6)."""
