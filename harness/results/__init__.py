"""Results: the append-only JSONL store (stage 7)."""
