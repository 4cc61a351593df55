"""Benchmarks: each module has `run() -> dict` and runs alone with `python -m bench.NAME`."""
