"""The library every operator in this repository shares.

- :mod:`shared.conditions`  status conditions after the Kubernetes conventions
- :mod:`shared.ownership`   owner references and standard labels of child objects
- :mod:`shared.caches`      server-side label-filtered watches and owner -> children indexes
- :mod:`shared.statuses`    status written whole, only when it changed
- :mod:`shared.clock`       the operators' notion of now (shiftable for tests and demos)
- :mod:`shared.services`    the optional one-port Service in front of an operator's pods
- :mod:`shared.validation`  spec validation from the CRD's own OpenAPI schema
- :mod:`shared.retry`       per-object exponential backoff
- :mod:`shared.reconcile`   handler decorator: metrics + retry policy
- :mod:`shared.workqueue`   per-object reconcile loop: kicks from children, exact wake-ups, backoff
- :mod:`shared.metrics`     controller-runtime compatible metrics on a private registry
- :mod:`shared.serving`     ``/metrics``, ``/healthz``, ``/readyz``
- :mod:`shared.runtime`     options, logging and kopf settings common to all operators
- :mod:`shared.description` one declarative description per operator, read by tools and handlers

``shared`` never imports an operator (enforced by import-linter, see ``pyproject.toml``).
"""

# The release of the operators, their images and the bundle (equal to pyproject.toml's version,
# checked by a unit test).
__version__ = "0.1.0"
