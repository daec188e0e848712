"""Benchmark sections for ``python -m recallpack.bench``; each adapter has its own module."""
