"""Test doubles shipped with the package (used by tests, benchmarks and the demo command)."""
