"""The VHS test harness, shared by the tests and the benchmarks (tests/README.md)."""
