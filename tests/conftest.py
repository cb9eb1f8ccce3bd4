"""Test-suite wide settings."""

from hypothesis import settings

# No timing thresholds in tests: speed is measured in benchmarks, and a 2-core CI machine that
# is also compiling or running a control plane must not fail a property test on a slow example.
settings.register_profile("project", deadline=None, print_blob=True)
settings.load_profile("project")
