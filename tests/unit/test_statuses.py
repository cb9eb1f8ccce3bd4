import asyncio
from typing import Any

import pytest

from shared.api.errors import ApiError, SupersededError
from shared.client.statuses import StatusWriter

BODY = {"metadata": {"namespace": "ns", "name": "x", "uid": "u"}, "status": {"phase": "A"}}


class RecordingKube:
    """Stands in for the HTTP client only: records the patches a writer sends."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []
        self.uids: list[str | None] = []

    async def json_patch(self, path: str, operations: list[Any], *, uid: str | None = None) -> dict[str, Any]:
        # The writer sends the whole status in one "add" (and the UID as a precondition).
        assert [op["op"] for op in operations] == ["add"] and operations[0]["path"] == "/status"
        self.patches.append((path, {"status": operations[0]["value"]}))
        self.uids.append(uid)
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

    async def json_patch(self, path: str, operations: list[Any], *, uid: str | None = None) -> dict[str, Any]:
        await super().json_patch(path, operations, uid=uid)
        self.revision += 1
        return {"metadata": {"resourceVersion": str(self.revision)}, "status": operations[0]["value"]}


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


def test_every_write_carries_the_uid_of_the_body_it_was_computed_from():
    kube = RecordingKube()
    writer = StatusWriter(kube, "g.io", "v1", "things")  # type: ignore[arg-type]
    assert asyncio.run(writer.write(BODY, {"phase": "B"}))
    assert kube.uids == ["u"]


def test_the_status_is_sent_whole_each_key_replaced():
    """None deletes a key, a nested object is replaced (never merged into), other keys stay."""
    kube = RecordingKube()
    writer = StatusWriter(kube, "g.io", "v1", "things")  # type: ignore[arg-type]
    body = {**BODY, "status": {"phase": "A", "result": {"mean": 1, "ci": 2}, "old": "x"}}
    assert asyncio.run(writer.write(body, {"phase": "B", "result": {"mean": 3}, "old": None}))
    assert kube.patches[-1][1] == {"status": {"phase": "B", "result": {"mean": 3}}}


class RefusingKube(RecordingKube):
    """Answers as the API server does when the UID test fails (a bare 422), and holds an object
    of another UID under the name."""

    async def json_patch(self, path: str, operations: list[Any], *, uid: str | None = None) -> dict[str, Any]:
        raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request")

    async def get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        assert (path, params) == ("/apis/g.io/v1/namespaces/ns/things", {"fieldSelector": "metadata.name=x"})
        return {"items": [{"metadata": {"uid": "another"}}]}


def test_a_write_for_an_object_replaced_under_its_name_is_superseded_not_retried():
    writer = StatusWriter(RefusingKube(), "g.io", "v1", "things")  # type: ignore[arg-type]
    with pytest.raises(SupersededError):
        asyncio.run(writer.write(BODY, {"phase": "B"}))
    assert writer.last(BODY) is None


class InvalidKube(RefusingKube):
    """A 422 for another reason: the object under the name is still ours."""

    async def get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        return {"items": [{"metadata": {"uid": "u"}}]}


def test_a_refused_write_for_the_same_object_is_an_error_not_superseded():
    writer = StatusWriter(InvalidKube(), "g.io", "v1", "things")  # type: ignore[arg-type]
    with pytest.raises(ApiError):
        asyncio.run(writer.write(BODY, {"phase": "B"}))


def test_after_its_echo_the_last_write_is_held_as_the_bodys_objects_not_a_copy():
    """The work queue stores the echo's body: our last write then refers to its status's values
    (one copy per object), and still answers last/current/is_echo as before."""
    kube = AnsweringKube(first_revision=9)
    writer = StatusWriter(kube, "g.io", "v1", "things")  # type: ignore[arg-type]
    conditions = [{"type": "Ready", "status": "True"}]
    assert asyncio.run(writer.write(at(9, {}), {"ready": 1, "conditions": conditions, "gone": None}))
    echo = at(10, {"ready": 1, "conditions": [{"type": "Ready", "status": "True"}], "other": "x"})
    assert writer.is_echo(echo)
    last = writer.last(echo)
    assert last == {"ready": 1, "conditions": conditions}  # the status as written (None: removed)
    assert last is not None and last["conditions"] is echo["status"]["conditions"]
    assert writer.is_echo(echo) and writer.current(echo) == echo["status"]
    assert not writer.is_echo(at(11, {"ready": 0, "conditions": conditions}))


def test_an_echo_that_came_before_the_writes_answer_is_shared_by_the_next_pass():
    """Under load the watch can deliver our write before the PATCH's answer is back: is_echo
    then compares with the write before, the pass it wakes reads the body, and from then on
    the last write is held as the body's values all the same."""
    kube = AnsweringKube(first_revision=9)
    writer = StatusWriter(kube, "g.io", "v1", "things")  # type: ignore[arg-type]
    echo = at(10, {"ready": 1, "conditions": [{"type": "Ready", "status": "True"}]})
    assert not writer.is_echo(echo)  # nothing written yet: a pass is woken
    assert asyncio.run(
        writer.write(at(9, {}), {"ready": 1, "conditions": [{"type": "Ready", "status": "True"}]})
    )
    assert writer.current(echo) == echo["status"]  # the pass: the body is as new as the write
    last = writer.last(echo)
    assert last is not None and last["conditions"] is echo["status"]["conditions"]
    assert writer.is_echo(echo) and not writer.is_echo(at(11, {"ready": 0}))
    assert writer.current(at(9, {})) == last  # an older body still reads our write


def test_an_echo_of_the_whole_write_is_held_as_the_bodys_status_itself_and_read_as_a_copy():
    """When the echo's status has exactly the keys written (the usual case), the writer keeps
    the stored body's status dict, not a dict of its values; a pass changing what current()
    gives it changes neither the body nor the writer's last write."""
    kube = AnsweringKube(first_revision=9)
    writer = StatusWriter(kube, "g.io", "v1", "things")  # type: ignore[arg-type]
    assert asyncio.run(writer.write(at(9, {}), {"ready": 1, "conditions": [{"type": "Ready"}]}))
    echo = at(10, {"ready": 1, "conditions": [{"type": "Ready"}]})
    assert writer.is_echo(echo) and writer.last(echo) is echo["status"]
    older = writer.current(at(9, {}))  # a body older than the write reads the write, as a copy
    older["path"] = "changed"
    assert "path" not in echo["status"] and writer.is_echo(echo)
