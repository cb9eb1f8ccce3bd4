"""The Netperf operator: one-step pod-to-pod network benchmarks (``app.example.com/v1alpha1``).

- :mod:`.schema`    the API and its CRD schema (one source of truth)
- :mod:`.desired`   server and client pods, the netperf command line, the pod view (pure)
- :mod:`.parse`     the client's termination message -> results with statistics (pure)
- :mod:`.status`    status and conditions per phase (pure)
- :mod:`.api`       every call to the Kubernetes API
- :mod:`.handlers`  kopf wiring and the reconcile pass (the state machine)
"""
