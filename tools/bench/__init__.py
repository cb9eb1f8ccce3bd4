"""Runs against a local cluster: benchmarks, chaos trials, real Netperf output for the parser.

The benchmarks' figures are in ``docs/benchmarks.md``, with the command that reproduces each;
``chaos`` is ``make chaos``; ``capture_netperf`` writes the parser's test fixtures.
"""
