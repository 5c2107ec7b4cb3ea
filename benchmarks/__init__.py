"""Benchmarks of VHS against its peers and the raw request floor (`make bench`).

run.py is the entry point; docs/benchmarks.md is its output.
"""
