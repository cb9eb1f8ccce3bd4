"""The controller runtime: the operator process around kopf. Imports ``shared.client`` and
``shared.api``.

- ``.builder``: an operator from its description and reconciler; ``.runtime``: the process
  (options, start-up and shut-down, leader election); ``.kopf_adapter``: the one module that
  imports kopf; ``.watches``: what an operator watches, as data;
- ``.workqueue``: the per-object reconcile loop (kicks, exact wake-ups, backoff) and
  ``.retry``: its backoff;
- ``.caches``: label-filtered watches and owner -> children indexes; ``.informer``: a relisting
  watch for what kopf does not watch; ``.configmaps``: the labelled ConfigMaps objects read;
- ``.metrics``: controller-runtime compatible metrics; ``.serving``: ``/metrics`` (HTTPS),
  ``/healthz``, ``/readyz``; ``.certs``: the serving certificate, mounted else self-signed.
"""
