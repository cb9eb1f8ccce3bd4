"""Generators of committed files: CRDs, bundle, alerts and dashboard, documentation, catalog.

Each writes what the operators' descriptions say the files must hold; ``--check`` (where there
is one) writes nothing and fails on a difference, through the one loop in
``tools.generate.sync.sync``.
"""
