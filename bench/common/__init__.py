"""What the benchmarks are built from: no module here is run with `python -m`, and none imports one that is.

See `bench` for the layout; `tests/bench/test_bench_imports.py` keeps the imports acyclic and
pointing down. Import nothing here: the child programs (`bench.bare_server`, `bench.profiled`)
import `bench.common.children` and must stay light.
"""
