"""The library every operator in this repository shares, in three layers.

Each layer imports only the layers below it (import-linter's ``layers`` contract in
``pyproject.toml``), and no module takes part in an import cycle (``tests/unit/test_imports.py``).

``shared.controller`` — the operator process (kopf through one adapter, prometheus_client,
aiohttp's server):

- ``shared.controller.builder``    an operator from its description and its reconciler class
- ``shared.controller.runtime``    the process: options, start-up and shut-down, leader election
- ``shared.controller.kopf_adapter``  the one module that imports kopf (watches, the process loop)
- ``shared.controller.watches``    what an operator watches, as data
- ``shared.controller.workqueue``  per-object reconcile loop: kicks from children, exact wake-ups, backoff
- ``shared.controller.retry``      per-object exponential backoff
- ``shared.controller.caches``     server-side label-filtered watches and owner -> children indexes
- ``shared.controller.informer``   a relisting watch for what kopf does not watch
- ``shared.controller.metrics``    controller-runtime compatible metrics on a private registry
- ``shared.controller.serving``    ``/metrics`` (HTTPS), ``/healthz``, ``/readyz``
- ``shared.controller.certs``      the serving certificate of ``/metrics``: mounted, else self-signed

``shared.client`` — talking to the API server (aiohttp):

- ``shared.client.kube``      the asynchronous Kubernetes client every write goes through
- ``shared.client.events``    Events about reconciled objects, posted through that client
- ``shared.client.leader``    leader election on a Lease, and the write fence
- ``shared.client.statuses``  status written whole, only when it changed
- ``shared.client.services``  converging the optional one-port Service
- ``shared.client.metricsauth``  who may read ``/metrics``: TokenReview, SubjectAccessReview

``shared.api`` — pure: Kubernetes objects as data, no I/O, no kopf, aiohttp or prometheus_client
(an operator's ``schema``, ``desired`` and ``status`` modules import only this layer):

- ``shared.api.conditions``   status conditions after the Kubernetes conventions
- ``shared.api.ownership``    owner references and standard labels of child objects
- ``shared.api.services``     the optional one-port Service: manifest and comparison
- ``shared.api.leases``       the leader-election Lease's name and RBAC rules
- ``shared.api.validation``   spec validation from the CRD's own OpenAPI schema
- ``shared.api.crd``          CustomResourceDefinitions as data
- ``shared.api.description``  one declarative description per operator, read by tools and handlers
- ``shared.api.metricsauth``  the ``/metrics`` filter's review bodies, decisions, caches, RBAC rules
- ``shared.api.quantity``, ``shared.api.versions``, ``shared.api.podsecurity``,
  ``shared.api.clock``  resource quantities, resourceVersions, the restricted pod security
  profile, the operators' notion of now (shiftable for tests and demos)

``shared`` never imports an operator (enforced by import-linter, see ``pyproject.toml``).
"""

# The release of the operators, their images and the bundle (equal to pyproject.toml's version,
# checked by a unit test).
__version__ = "0.1.0"
