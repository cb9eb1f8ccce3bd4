"""The library every operator in this repository shares, in three layers.

- ``shared.controller``: the operator process (kopf through one adapter, the work queue,
  watches and caches, metrics, probes);
- ``shared.client``: talking to the API server (the client, Events, leader election and the
  write fence, the shared writes);
- ``shared.api``: pure, Kubernetes objects and an operator's description as data.

Each layer imports only the layers below it (import-linter's ``layers`` contract in
``pyproject.toml``), no module takes part in an import cycle (``tests/unit/test_imports.py``),
and ``shared`` never imports an operator. Each subpackage's docstring lists its modules.
"""

# The release of the operators, their images and the bundle (equal to pyproject.toml's version,
# checked by a unit test).
__version__ = "0.1.0"
