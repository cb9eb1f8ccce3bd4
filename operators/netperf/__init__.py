"""The Netperf operator: one-step pod-to-pod network benchmarks (``app.example.com/v1alpha1``).

- ``.schema``    the API and its CRD schema (one source of truth)
- ``.desired``   server and client pods, the netperf command line, the pod view (pure)
- ``.parse``     the client's termination message -> results with statistics (pure)
- ``.status``    status and conditions per phase (pure)
- ``.api``       every call to the Kubernetes API
- ``.handlers``  kopf wiring and the reconcile pass (the state machine)
"""
