import asyncio
from typing import Any

from shared.statuses import StatusWriter

BODY = {"metadata": {"namespace": "ns", "name": "x", "uid": "u"}, "status": {"phase": "A"}}


class RecordingKube:
    """Stands in for the HTTP client only: records the patches a writer sends."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    async def merge_patch(self, path: str, body: Any) -> dict[str, Any]:
        self.patches.append((path, body))
        return {}


def test_writes_whole_status_once_and_only_when_changed():
    kube = RecordingKube()
    writer = StatusWriter(kube, "g.io", "v1", "things")  # type: ignore[arg-type]
    assert not asyncio.run(writer.write(BODY, {"phase": "A"}))  # same as the body's
    assert asyncio.run(writer.write(BODY, {"phase": "B", "list": [1]}))
    assert kube.patches == [
        ("/apis/g.io/v1/namespaces/ns/things/x/status", {"status": {"phase": "B", "list": [1]}})
    ]
    # the watch has not delivered our write yet: the body is old, but nothing is written again
    assert not asyncio.run(writer.write(BODY, {"phase": "B", "list": [1]}))
    assert writer.current(BODY) == {"phase": "B", "list": [1]}
    writer.forget("u")
    assert writer.current(BODY) == {"phase": "A"} and writer.last(BODY) is None
