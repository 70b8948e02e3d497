"""Automatic caption metrics, agreement statistics, correlation and BISON statistics."""
