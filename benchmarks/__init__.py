"""Benchmarks: scripts that print figures; none of them asserts."""
