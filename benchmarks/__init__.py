"""Benchmarks of VHS against its peers and the raw request floor (`make bench`).

run.py is the entry point; docs/benchmarks.md is its output. pipeline.py and gc.py (with its
gc_*.py modules) each rewrite a marked section of that file (sections.py).
"""
