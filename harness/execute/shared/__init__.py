"""Code that both the worker and the checker run: deterministic inputs, the forward on its own thread, profiling."""
