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


class AnsweringKube(RecordingKube):
    """Answers each patch as the API server does: with the object at a new resourceVersion."""

    def __init__(self, first_revision: int) -> None:
        super().__init__()
        self.revision = first_revision

    async def merge_patch(self, path: str, body: Any) -> dict[str, Any]:
        await super().merge_patch(path, body)
        self.revision += 1
        return {"metadata": {"resourceVersion": str(self.revision)}, **body}


def at(revision: int, status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {**BODY["metadata"], "resourceVersion": str(revision)}, "status": status}


def test_a_pass_that_reads_a_body_older_than_our_write_compares_with_our_write():
    """Status 3 on the body at 9; a pass writes 2 (the server answers 10); the next pass reads
    the body at 9 still and wants 3 again: 3 must be written, or 2 stays on the server."""
    kube = AnsweringKube(first_revision=9)
    writer = StatusWriter(kube, "g.io", "v1", "things")  # type: ignore[arg-type]
    assert asyncio.run(writer.write(at(9, {"ready": 3}), {"ready": 2}))
    assert writer.current(at(9, {"ready": 3})) == {"ready": 2}
    assert asyncio.run(writer.write(at(9, {"ready": 3}), {"ready": 3}))
    assert [patch for _, patch in kube.patches] == [{"status": {"ready": 2}}, {"status": {"ready": 3}}]
    # the echo of our last write, and then a body newer than it, are the truth again
    assert writer.is_echo(at(11, {"ready": 3}))
    assert writer.current(at(11, {"ready": 3})) == {"ready": 3}
    assert writer.current(at(12, {"ready": 7})) == {"ready": 7}
    assert not writer.is_echo(at(12, {"ready": 7}))
    assert asyncio.run(writer.write(at(12, {"ready": 7}), {"ready": 3}))
