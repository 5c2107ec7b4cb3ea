"""The garbage collector's benchmark (`python -m benchmarks gc`): throughput, memory, a hot id."""
