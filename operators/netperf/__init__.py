"""The Netperf operator (placeholder: the operator itself lands in its own issue)."""
