"""The API client layer (aiohttp). Imports ``shared.api`` only.

- ``.kube``: the asynchronous client every request goes through; ``.fair``: its rate limit
  shared by namespace;
- ``.events``: Events about reconciled objects; ``.leader``: leader election on a Lease and the
  write fence;
- ``.statuses``: a status written whole, only when it changed; ``.services``: the optional
  one-port Service; ``.budgets``: the PodDisruptionBudget;
- ``.metricsauth``: who may read ``/metrics`` (TokenReview, SubjectAccessReview).
"""
