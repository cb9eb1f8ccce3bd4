"""The library every operator in this repository shares, in three layers.

Each layer imports only the layers below it (import-linter's ``layers`` contract in
``pyproject.toml``), and no module takes part in an import cycle (``tests/unit/test_imports.py``).

:mod:`shared.controller` — the operator process (kopf through one adapter, prometheus_client,
aiohttp's server):

- :mod:`shared.controller.builder`    an operator from its description and its reconciler class
- :mod:`shared.controller.runtime`    the process: options, start-up and shut-down, leader election
- :mod:`shared.controller.kopf_adapter`  the one module that imports kopf (watches, the process loop)
- :mod:`shared.controller.watches`    what an operator watches, as data
- :mod:`shared.controller.workqueue`  per-object reconcile loop: kicks from children, exact wake-ups, backoff
- :mod:`shared.controller.retry`      per-object exponential backoff
- :mod:`shared.controller.caches`     server-side label-filtered watches and owner -> children indexes
- :mod:`shared.controller.informer`   a relisting watch for what kopf does not watch
- :mod:`shared.controller.metrics`    controller-runtime compatible metrics on a private registry
- :mod:`shared.controller.serving`    ``/metrics`` (HTTPS), ``/healthz``, ``/readyz``
- :mod:`shared.controller.certs`      the serving certificate of ``/metrics``: mounted, else self-signed

:mod:`shared.client` — talking to the API server (aiohttp):

- :mod:`shared.client.kube`      the asynchronous Kubernetes client every write goes through
- :mod:`shared.client.events`    Events about reconciled objects, posted through that client
- :mod:`shared.client.leader`    leader election on a Lease, and the write fence
- :mod:`shared.client.statuses`  status written whole, only when it changed
- :mod:`shared.client.services`  converging the optional one-port Service
- :mod:`shared.client.metricsauth`  who may read ``/metrics``: TokenReview, SubjectAccessReview

:mod:`shared.api` — pure: Kubernetes objects as data, no I/O, no kopf, aiohttp or prometheus_client
(an operator's ``schema``, ``desired`` and ``status`` modules import only this layer):

- :mod:`shared.api.conditions`   status conditions after the Kubernetes conventions
- :mod:`shared.api.ownership`    owner references and standard labels of child objects
- :mod:`shared.api.services`     the optional one-port Service: manifest and comparison
- :mod:`shared.api.leases`       the leader-election Lease's name and RBAC rules
- :mod:`shared.api.validation`   spec validation from the CRD's own OpenAPI schema
- :mod:`shared.api.crd`          CustomResourceDefinitions as data
- :mod:`shared.api.description`  one declarative description per operator, read by tools and handlers
- :mod:`shared.api.metricsauth`  the ``/metrics`` filter's review bodies, decisions, caches, RBAC rules
- :mod:`shared.api.quantity`, :mod:`shared.api.versions`, :mod:`shared.api.podsecurity`,
  :mod:`shared.api.clock`  resource quantities, resourceVersions, the restricted pod security
  profile, the operators' notion of now (shiftable for tests and demos)

``shared`` never imports an operator (enforced by import-linter, see ``pyproject.toml``).
"""

# The release of the operators, their images and the bundle (equal to pyproject.toml's version,
# checked by a unit test).
__version__ = "0.1.0"
