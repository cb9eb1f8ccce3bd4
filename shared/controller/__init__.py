"""The controller runtime: the operator process around kopf — options, the per-object work
queue, watches and caches, metrics and probes. Imports ``shared.client`` and ``shared.api``."""
