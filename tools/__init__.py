"""Developer tools that generate the project's artifacts (not shipped in any image)."""
