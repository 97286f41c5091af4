"""The contracts between the processes: every message (protocol), its framing (channel), output descriptors.

Imported by every side; holds no state and starts nothing."""
