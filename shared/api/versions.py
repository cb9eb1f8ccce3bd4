"""Which of two states of one name is the more recent, from their resourceVersions.

Pure data, in ``shared.api``, so the work queue, the caches and the status writer all use
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def revision(body: Mapping[str, Any]) -> int | None:
    """The body's resourceVersion as the etcd revision it is (None if not an integer)."""
    rv = str((body.get("metadata") or {}).get("resourceVersion") or "")
    return int(rv) if rv.isdigit() else None


def is_later(body: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether ``body`` is of a later object than ``than``, another UID of the same name.

    One name holds one object at a time, so every event of the earlier object has a smaller
    resourceVersion than any of the later one's: the API server's resourceVersions are etcd
    revisions, integers, which its own watch cache compares (clients are told not to rely on
    that; so only when both are integers). Else the later creationTimestamp; else (no way to
    tell) the event seen last.
    """
    rv_a, rv_b = revision(body), revision(than)
    if rv_a is not None and rv_b is not None:
        return rv_a > rv_b
    a, b = body.get("metadata") or {}, than.get("metadata") or {}
    created_a, created_b = a.get("creationTimestamp"), b.get("creationTimestamp")
    if created_a and created_b and created_a != created_b:
        return str(created_a) > str(created_b)  # RFC 3339 in UTC: ordered as strings
    return True
