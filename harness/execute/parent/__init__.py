"""The harness process (trusted): plans the calls, talks to workers and checkers, keeps the clock.

It never imports candidate code and never touches the GPU; what it scores is decided by harness.score."""
