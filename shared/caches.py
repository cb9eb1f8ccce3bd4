"""Label-filtered watches and owner -> children indexes.

An operator must neither list nor hold objects that are not its own. kopf's handler
``labels=`` filters are client-side (the object is still listed and kept); the server-side
``settings.watching.label_selectors`` (kopf >= 1.45) are sent as ``labelSelector`` on LIST and
WATCH, so the API server never sends foreign pods at all. On top of that, an in-memory
``kopf.index`` maps (namespace, owner UID) to a small summary of each child, so a reconcile
looks its children up without an API call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kopf

from shared.ownership import controller_of, managed_selector

OwnerKey = tuple[str, str]
Summary = Callable[[Mapping[str, Any]], Any]


def watch_only_managed(settings: kopf.OperatorSettings, resources: Iterable[str], app: str) -> str:
    """Make every watch of the child ``resources`` server-side filtered to this app's children."""
    selector = managed_selector(app)
    for resource in resources:
        settings.watching.label_selectors[resource] = selector
    return selector


def owner_index_entry(body: Mapping[str, Any], summarize: Summary) -> dict[OwnerKey, Any] | None:
    """Index function body: ``{(namespace, controller UID): summary}``, or None for orphans."""
    ref = controller_of(body)
    if ref is None or not ref.get("uid"):
        return None
    meta = body["metadata"]
    return {(meta.get("namespace") or "", ref["uid"]): summarize(body)}


def children(index: Mapping[OwnerKey, Any], namespace: str, owner_uid: str) -> list[Any]:
    """The summaries of an owner's children from a kopf index (empty when it has none)."""
    store = index.get((namespace, owner_uid))
    return list(store) if store is not None else []


def register_owner_index(resource: str, index_id: str, summarize: Summary, app: str) -> None:
    """Register ``@kopf.index(resource, id=index_id)`` keyed by controller owner.

    The handler-level label filter is redundant with the server-side selector but keeps the
    index correct even when an operator runs without :func:`watch_only_managed`.
    """
    labels = dict(part.split("=", 1) for part in managed_selector(app).split(","))

    def index_fn(body: kopf.Body, **_: Any) -> dict[OwnerKey, Any] | None:
        return owner_index_entry(body, summarize)

    kopf.index(resource, id=index_id, labels=labels)(index_fn)
