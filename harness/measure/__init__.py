"""Measurement: the timing protocol and the device's measured ceilings (stage 5)."""
