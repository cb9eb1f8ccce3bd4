"""What the tests share: clusters, the real node, operator processes, waits, per-resource helpers.

Test modules import from here, never from each other (an import-linter contract); the
benchmarks and chaos (``tools/bench/``) use the same pieces.
"""
