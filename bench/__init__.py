"""Benchmarks: they print figures; no test asserts a time.

Each module directly in `bench` is run with `python -m bench.<name>`: the benchmarks (`turns`,
`delegation`, `context`, `throughput`, `mcp_turns`, `faults`), and the programs a benchmark
starts as child processes (`bare_server`, `click_sender`, `mcp_server`, `profiled`). What they
are built from is in `bench.common`, which imports none of them; no module imports a benchmark.
docs/decisions/0059-benchmark-modules.md has the map; tests/bench/test_bench_imports.py keeps it so.
"""
