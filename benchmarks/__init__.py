"""Benchmarks of VHS (`python -m benchmarks NAME`); their figures go into docs/benchmarks.md."""
