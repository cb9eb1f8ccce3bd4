"""The operators: one package each, same module layout, independent of one another.

:data:`PACKAGES` is the one list of them. Each package declares itself in
``operators/<name>/description.py`` (``DESCRIPTION``, a :class:`shared.api.description.OperatorDescription`),
and everything that enumerates operators (the CRDs, the OLM bundle, monitoring, images, the
documentation's API reference and metrics table) reads :func:`descriptions`;
``operators/<name>/__main__.py`` is the same two lines everywhere and calls :func:`main`, which
builds the operator from its description and its reconciler (:mod:`shared.controller.builder`). A new
operator is a new package plus its name here.

The packages are imported by name, never statically from here: ``operators.netperf`` imports
this package, so a static import of the others would make every operator depend on every
other one (import-linter's independence contract in ``pyproject.toml``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from shared.api.description import OperatorDescription

PACKAGES: tuple[str, ...] = ("netperf", "tdset", "webserver")


def description(name: str) -> OperatorDescription:
    """The description ``operators/<name>/description.py`` declares."""
    found = importlib.import_module(f"{__name__}.{name}.description").DESCRIPTION
    if not isinstance(found, OperatorDescription) or found.name != name:
        raise TypeError(f"{__name__}.{name}.description.DESCRIPTION is not the description of {name!r}")
    return found


def descriptions() -> tuple[OperatorDescription, ...]:
    """Every registered operator's description, in :data:`PACKAGES` order."""
    return tuple(description(name) for name in PACKAGES)


def main(package: str | None, argv: Sequence[str] | None = None) -> None:
    """``python -m operators.<name>``: build the operator from its description and reconciler,
    parse the options, run it.

    ``package`` is the ``__package__`` of the calling ``__main__`` (``operators.<name>``).
    """
    # The controller runtime (kopf, aiohttp, prometheus_client): only for a process that runs one.
    from shared.controller.builder import Operator
    from shared.controller.runtime import parse_options
    from shared.controller.workqueue import DEFAULT_MAX_CONCURRENT_RECONCILES

    if not package or not package.startswith(f"{__name__}."):
        raise SystemExit(f"run an operator as `python -m {__name__}.<name>`, not from {package!r}")
    op = description(package.rpartition(".")[2])
    operator = Operator(op, reconciler(op))
    args = sys.argv[1:] if argv is None else argv
    concurrency = op.max_concurrent_reconciles or DEFAULT_MAX_CONCURRENT_RECONCILES
    operator.run(parse_options(args, prog=op.name, max_concurrent_reconciles=concurrency))


def reconciler(op: OperatorDescription) -> Any:
    """The reconciler class ``op`` names (``module:Class``)."""
    module, _, name = op.reconcile.partition(":")
    return getattr(importlib.import_module(module), name)
