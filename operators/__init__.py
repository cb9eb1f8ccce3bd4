"""The operators: one package each, same module layout, independent of one another.

``PACKAGES`` is the one list of them. Each package declares itself in
``operators/<name>/description.py`` (``DESCRIPTION``, a ``shared.api.description.OperatorDescription``),
and everything that enumerates operators (the CRDs, the OLM bundle, monitoring, images, the
documentation's API reference and metrics table) reads ``descriptions``;
``operators/<name>/__main__.py`` calls ``shared.controller.builder.run(DESCRIPTION, Reconciler)``.
A new operator is a new package plus its name here.

The packages are imported by name, never statically from here: ``operators.netperf`` imports
this package, so a static import of the others would make every operator depend on every
other one (import-linter's independence contract in ``pyproject.toml``).
"""

from __future__ import annotations

import importlib

from shared.api.description import OperatorDescription

PACKAGES: tuple[str, ...] = ("netperf", "tdset", "webserver")


def description(name: str) -> OperatorDescription:
    """The description ``operators/<name>/description.py`` declares."""
    found = importlib.import_module(f"{__name__}.{name}.description").DESCRIPTION
    if not isinstance(found, OperatorDescription) or found.name != name:
        raise TypeError(f"{__name__}.{name}.description.DESCRIPTION is not the description of {name!r}")
    return found


def descriptions() -> tuple[OperatorDescription, ...]:
    """Every registered operator's description, in ``PACKAGES`` order."""
    return tuple(description(name) for name in PACKAGES)
