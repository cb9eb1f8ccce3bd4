"""The pure layer: Kubernetes objects and an operator's description as data.

No I/O and no kopf, aiohttp, kubernetes or prometheus_client (import-linter's ``forbidden``
contract), so tools, generators and an operator's ``schema``/``desired``/``status`` modules use
it without paying for a client or a controller.

Modules: ``.description`` (one declarative description per operator), ``.crd``, ``.validation``
(specs against the CRD's own schema), ``.conditions``, ``.ownership``, ``.services``,
``.budgets``, ``.leases``, ``.access``, ``.metricsauth``, ``.correlator``, ``.lru``, ``.quantity``,
``.versions``, ``.podsecurity``, ``.clock`` (the operators' shiftable notion of now).
"""
