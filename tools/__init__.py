"""Developer tools (not shipped in any image), by purpose:

- ``tools.generate``: the committed artefacts made from the operators' descriptions (CRDs,
  the OLM bundle, alerts and dashboard, documentation pages, the catalog), each with a
  ``--check`` where ``make lint`` guards it;
- ``tools.check``: verdicts on those artefacts beyond "up to date" (CRD upgrade
  compatibility, the OLM tools' own validation);
- ``tools.bench``: runs against a local cluster that measure or stress the operators
  (benchmarks, chaos trials) or capture fixtures from a real node.

``system-deps.sh`` installs the OS packages (``make system-deps``). What the local cluster
runs, images and the pinned Go tools, is built by ``localcluster`` itself, which never
imports this package.
"""
