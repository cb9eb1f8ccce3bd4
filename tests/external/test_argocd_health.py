"""The Argo CD health checks documented in docs/health-checks.md, run on each kind's states.

The scripts are taken from the document itself, so what users copy is what is tested, and run
with Lua 5.1 (Argo CD's interpreter, gopher-lua, implements 5.1; Debian's ``lua5.1`` from
``make system-deps``) on the objects kstatus is tested with (``readiness_cases``): kstatus'
``Current`` must be Argo's ``Healthy``, ``InProgress`` ``Progressing``, ``Failed`` ``Degraded``.
"""

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.netperf import schema as netperf_schema
from operators.tdset import schema as tdset_schema
from operators.webserver import schema as webserver_schema
from tests.framework import readiness_cases

DOC = Path(__file__).resolve().parents[2] / "docs" / "health-checks.md"
SCHEMAS = {"WebServer": webserver_schema, "TDSet": tdset_schema, "Netperf": netperf_schema}
ARGO = {"Current": "Healthy", "InProgress": "Progressing", "Failed": "Degraded"}
LUA = shutil.which("lua5.1")


def argocd_cm() -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    (cm,) = [d for d in map(yaml.safe_load, blocks) if d.get("metadata", {}).get("name") == "argocd-cm"]
    return cm


def script(kind: str) -> str:
    schema = SCHEMAS[kind]
    return argocd_cm()["data"][f"resource.customizations.health.{schema.GROUP}_{schema.KIND}"]


def lua(value: Any) -> str:
    """``value`` as a Lua literal; None is left out, as Argo CD's conversion leaves it nil."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua(k)}] = {lua(v)}" for k, v in value.items() if v is not None) + "}"
    if isinstance(value, list):
        return "{" + ", ".join(lua(v) for v in value) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # Printable ASCII as is, anything else as Lua's decimal byte escapes.
    escaped = (chr(b) if 32 <= b < 127 and chr(b) not in '"\\' else f"\\{b}" for b in str(value).encode())
    return '"' + "".join(escaped) + '"'


def health(source: str, objects: list[dict]) -> list[tuple[str, str]]:
    """Run ``source`` once per object, each time freshly loaded with ``obj`` set, as Argo CD does."""
    assert "]==]" not in source
    run = "do local hs = assert(loadstring(source))(); print(hs.status .. '\\t' .. (hs.message or '')) end"
    program = f"local source = [==[{source}]==]\n" + "".join(f"obj = {lua(o)}\n{run}\n" for o in objects)
    assert LUA, "lua5.1 is missing: make system-deps installs it (Debian's lua5.1)"
    out = subprocess.run([LUA, "-"], input=program, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return [tuple(line.split("\t", 1)) for line in out.stdout.splitlines()]


def test_the_document_has_one_health_check_per_kind():
    keys = set(argocd_cm()["data"])
    assert keys == {f"resource.customizations.health.{s.GROUP}_{s.KIND}" for s in SCHEMAS.values()}


@pytest.mark.parametrize("kind", sorted(readiness_cases.ALL))
def test_each_state_is_healthy_progressing_or_degraded_like_kstatus_says(kind):
    cases = readiness_cases.ALL[kind]()
    results = health(script(kind), [o for o, _ in cases.values()])
    assert {state: status for state, (status, _) in zip(cases, results, strict=True)} == {
        state: ARGO[expected] for state, (_, expected) in cases.items()
    }


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_no_status_yet_is_progressing(kind):
    ((status, message),) = health(script(kind), [readiness_cases.obj(SCHEMAS[kind], None, 1)])
    assert (status, message) == ("Progressing", "waiting for the operator's first status")


def test_the_message_is_the_conditions_reason_and_message():
    cases = readiness_cases.webserver_cases()
    objects = [
        cases[s][0] for s in ("1 of 5 ready", "Degraded, invalid spec", "all ready", "new spec not yet seen")
    ]
    assert health(script("WebServer"), objects) == [
        ("Progressing", "WaitingForReady: 1/5 pods ready"),
        ("Degraded", "InvalidSpec: spec.replicas: must be at least 0"),
        ("Healthy", "ReplicasReady: 5/5 pods ready"),
        ("Progressing", "waiting for the operator to observe generation 5"),
    ]
