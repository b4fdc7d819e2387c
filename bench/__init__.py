"""Benchmarks: they print figures; no test asserts a time."""
