"""The WebServer operator: keeps N web-server pods, like a ReplicaSet (``demo.k8s.io/v1alpha1``).

- ``.schema`` the API and its CRD schema; ``.description`` the operator as data; ``.access``
  what a spec lets its author obtain, checked at admission;
- ``.desired`` pods to create and delete, the Service and the budget (pure); ``.rollout``
  revisions, progress deadline, rollback (pure); ``.status`` status and conditions (pure);
- ``.api`` every call to the Kubernetes API; ``.reconciler`` the reconcile pass.
"""
