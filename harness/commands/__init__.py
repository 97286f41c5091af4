"""One module per ``kernelgate`` subcommand; each exposes ``register(subparsers)``."""
