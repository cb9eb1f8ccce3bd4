"""Where an operator's memory goes: a breakdown dumped from inside the running process.

Used by ``python -m tools.bench.scale --memory ... --breakdown``; not run on its own. The
operator is started with this module's directory as a ``sitecustomize`` (``site_dir``, put
first on ``PYTHONPATH``), which, when ``BENCH_MEMTRACE`` names a file, starts ``tracemalloc``
and on ``SIGUSR2`` writes that file (JSON) with:

- ``structures``: the bytes reachable from each cache of the process (every instance of the
  informer's ``Store``, the work queue's ``Controller``, ``StatusWriter``, ``OwnerCache``, kopf's
  ``ResourceMemories`` and its per-object worker queues), each object counted once, for the first
  structure that reaches it, and the number of entries each holds;
- ``modules``: the live bytes tracemalloc attributes to each source file (the innermost frame of
  the allocation), the 25 largest, and the total traced.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

ENV = "BENCH_MEMTRACE"

SITECUSTOMIZE = r"""
import os, signal, sys, json, gc, tracemalloc

_path = os.environ.get("BENCH_MEMTRACE")
if _path:
    tracemalloc.start(1)

    def _deep(obj, seen):
        size, stack = 0, [obj]
        while stack:
            o = stack.pop()
            if id(o) in seen or isinstance(o, (type, type(sys))):
                continue
            if callable(o) and not isinstance(o, (dict, list)):
                continue
            seen.add(id(o))
            size += sys.getsizeof(o)
            if isinstance(o, dict):
                stack.extend(o.keys()); stack.extend(o.values())
            elif isinstance(o, (list, tuple, set, frozenset)):
                stack.extend(o)
            elif hasattr(o, "__dict__") and not isinstance(o, type):
                stack.append(vars(o))
            elif hasattr(o, "__slots__"):
                for s in o.__slots__ if isinstance(o.__slots__, (tuple, list)) else (o.__slots__,):
                    if hasattr(o, s):
                        stack.append(getattr(o, s))
            elif type(o).__name__ == "deque":
                stack.extend(o)
        return size

    def _fields(o):
        # The containers an object holds, not its references to clients, loops or callbacks.
        return [v for v in vars(o).values() if isinstance(v, (dict, list, set))]

    def _structures():
        names = {
            "Store": lambda o: ("informer.Store", o._objects, len(o)),
            "Controller": lambda o: ("workqueue.Controller", _fields(o), len(getattr(o, "_bodies", ()))),
            "StatusWriter": lambda o: ("statuses.StatusWriter", o._last, len(o._last)),
            "OwnerCache": lambda o: ("caches.OwnerCache", _fields(o), len(getattr(o, "_versions", ()))),
            "ResourceMemories": lambda o: ("kopf.ResourceMemories", o._items, len(o._items)),
        }
        found = []
        for o in gc.get_objects():
            pick = names.get(type(o).__name__)
            if pick is not None and type(o).__module__.split(".")[0] in ("shared", "kopf"):
                found.append(pick(o))
        seen, out = set(), {}
        # Bodies are shared between structures: the work queue's store first, as the holder.
        order = ["workqueue.Controller", "informer.Store", "statuses.StatusWriter", "caches.OwnerCache",
                 "kopf.ResourceMemories"]
        found.sort(key=lambda f: order.index(f[0]))
        for name, root, count in found:
            size = _deep(root, seen)
            entry = out.setdefault(name, {"bytes": 0, "entries": 0, "instances": 0})
            entry["bytes"] += size
            entry["entries"] += count
            entry["instances"] += 1
        return out

    def _dump(signum, frame):
        snapshot = tracemalloc.take_snapshot()
        stats = snapshot.statistics("filename")
        total = sum(s.size for s in stats)
        modules = [{"file": s.traceback[0].filename, "bytes": s.size, "blocks": s.count} for s in stats[:25]]
        data = {"structures": _structures(), "modules": modules, "traced": total,
                "tasks": _tasks()}
        with open(_path + ".tmp", "w") as f:
            json.dump(data, f)
        os.replace(_path + ".tmp", _path)

    def _tasks():
        try:
            import asyncio
            tasks = sum(1 for o in gc.get_objects() if isinstance(o, asyncio.Task) and not o.done())
            queues = [o for o in gc.get_objects() if isinstance(o, asyncio.Queue)]
            return f"{tasks}; asyncio queues {len(queues)} holding {sum(q.qsize() for q in queues)} items"
        except Exception:
            return -1

    signal.signal(signal.SIGUSR2, _dump)
"""


def site_dir() -> Path:
    """A directory holding the ``sitecustomize`` above, to put first on ``PYTHONPATH``."""
    d = Path(tempfile.mkdtemp(prefix="memtrace-"))
    (d / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return d


def env(out: Path) -> dict[str, str]:
    """The operator's extra environment for a breakdown written to ``out``."""
    paths = [str(site_dir())] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {ENV: str(out), "PYTHONPATH": os.pathsep.join(paths)}


def describe(data: dict[str, object]) -> str:
    """The breakdown as lines of text.

    tracemalloc slows the process and costs memory of its own: the breakdown is for attribution;
    RSS figures come from runs without it.
    """
    lines = ["structure                 | instances | entries | MiB (reachable, counted once)"]
    structures = data.get("structures") or {}
    assert isinstance(structures, dict)
    for name, s in sorted(structures.items(), key=lambda kv: -kv[1]["bytes"]):
        lines.append(f"{name:25} | {s['instances']:9} | {s['entries']:7} | {s['bytes'] / 2**20:.1f}")
    modules = data.get("modules") or []
    assert isinstance(modules, list)
    lines.append(
        f"tracemalloc: {float(data.get('traced') or 0) / 2**20:.1f} MiB traced; live asyncio tasks "
        f"{data.get('tasks')}; largest by allocating file:"
    )
    for m in modules[:15]:
        lines.append(f"  {m['bytes'] / 2**20:7.1f} MiB {m['blocks']:8} blocks  {m['file']}")
    return "\n".join(lines)


def load(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data
