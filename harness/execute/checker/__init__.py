"""The trusted checker process: float64 references, the library baseline, reading committed outputs."""
