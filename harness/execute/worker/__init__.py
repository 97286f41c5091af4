"""The candidate's process (untrusted): imports the candidate, runs its calls, commits their outputs.

Everything it reports is a claim; the parent and the checker verify what they score."""
