"""Put generated files on disk, or with ``--check`` only name those that differ: one loop for all.

``make manifests``, ``make bundle`` and ``make docs`` each render every file they own as
path -> text and hand it to ``sync``; ``make lint`` runs the bundle's and the docs'
``--check``, which writes nothing and fails on a hand edit or a forgotten regeneration.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (tests render elsewhere)."""
    return str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def sync(files: Mapping[Path, str], *, check: bool, what: str, extra: Iterable[Path] = ()) -> int:
    """Make each of ``files`` hold its text and delete ``extra``; with ``check``, change nothing.

    ``extra`` are files the generator owns that are no longer generated (an operator removed).
    Checking, every file that differs, is missing or is extra is named on stderr after
    ``what`` (what is out of date and the command that fixes it) and the result is 1; else 0.
    Writing prints each file written or removed and returns 0.
    """
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    extra = list(extra)
    if check:
        if stale or extra:
            names = ", ".join(shown(p) for p in [*stale, *extra])
            print(f"{what}: {names}", file=sys.stderr)
            return 1
        return 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path])
        print(f"wrote {shown(path)}")
    for path in extra:
        path.unlink()
        print(f"removed {shown(path)}")
    return 0
