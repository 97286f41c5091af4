"""Candidate discovery: submission folders, manifests and problem mapping (stage 2)."""
