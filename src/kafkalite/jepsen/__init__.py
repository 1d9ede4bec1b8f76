"""Fault benches as Jepsen builds them: nodes in network namespaces, a nemesis, workloads and a checker.

Used by `tests/jepsen/` (short runs in the suite) and `bench/` (long runs); a test harness above the broker.
"""
