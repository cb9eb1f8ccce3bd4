"""What the tests share: clusters, the real node, operator processes, waits, per-resource helpers.

Test modules import from here, never from each other (an import-linter contract); benchmarks
(``tools/bench/``) and ``tools/bench/chaos.py`` use the same pieces.
"""
