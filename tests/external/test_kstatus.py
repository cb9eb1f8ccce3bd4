"""What kstatus (Flux health checks, Helm 4 ``--wait``, kpt, Config Sync) makes of our statuses.

Each state's status is computed by the operators' own pure status modules
(``tests/framework/readiness_cases.py``) and judged by the real library
(``tests/framework/kstatus.py``): work pending is ``InProgress``, what only a human can fix is
``Failed``, and ``Current`` means done; an up-to-date ``observedGeneration`` alone is not.
"""

import pytest

from tests.framework import kstatus, readiness_cases
from tests.framework.readiness_cases import webserver_invalid, ws, ws_pods


@pytest.mark.parametrize("kind", sorted(readiness_cases.ALL))
def test_each_state_is_in_progress_failed_or_current(kind):
    cases = readiness_cases.ALL[kind]()
    results = kstatus.compute(*(o for o, _ in cases.values()))
    assert {state: r["status"] for state, r in zip(cases, results, strict=True)} == {
        state: expected for state, (_, expected) in cases.items()
    }


def test_kstatus_reports_why_a_webserver_is_in_progress_or_failed():
    obj = readiness_cases.obj
    (waiting,) = kstatus.compute(obj(readiness_cases.webserver_schema, ws(ws_pods(5, ready=1)), 4))
    assert waiting["message"] == "1/5 pods ready"
    (failed,) = kstatus.compute(
        obj(readiness_cases.webserver_schema, webserver_invalid(None, message="bad"), 5)
    )
    assert failed["message"] == "spec.replicas: bad"
