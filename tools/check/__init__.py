"""Checks of the generated artefacts: CRD upgrade compatibility, OLM's own validation."""
