"""The Netperf operator: one-step pod-to-pod network benchmarks (``app.example.com/v1alpha1``).

- ``.schema`` the API and its CRD schema; ``.description`` the operator as data; ``.access``
  what a spec lets its author obtain, checked at admission;
- ``.desired`` server and client pods, the netperf command line (pure); ``.parse`` the
  client's termination message -> results with statistics (pure); ``.status`` status and
  conditions per phase (pure);
- ``.cron``, ``.schedule``, ``.measurement``, ``.detector``, ``.regression``, ``.verdicts``:
  scheduled runs, their history and regression verdicts (pure);
- ``.api`` every call to the Kubernetes API; ``.reconciler`` the reconcile pass.
"""
