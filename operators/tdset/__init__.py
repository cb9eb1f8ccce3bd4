"""The TDSet operator: a Deployment whose replica count follows a time-of-day schedule.

- ``.schema`` the API (``schedule.rs/v1``) and its CRD schema; ``.description`` the operator
  as data; ``.access`` what a spec lets its author obtain, checked at admission;
- ``.schedule`` the layered calendar (pure); ``.desired`` the Deployment and Service (pure);
  ``.target`` a ``scaleTargetRef`` and the claim put on it (pure); ``.status`` status and
  conditions (pure);
- ``.api`` every call to the Kubernetes API; ``.reconciler`` the reconcile pass.
"""
