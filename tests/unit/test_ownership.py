from hypothesis import given
from hypothesis import strategies as st

from shared.api import ownership

OWNER = {
    "apiVersion": "demo.k8s.io/v1alpha1",
    "kind": "WebServer",
    "metadata": {"name": "web", "namespace": "ns1", "uid": "uid-1"},
}


def test_owner_reference_is_controller_and_blocks_deletion():
    assert ownership.owner_reference(OWNER) == {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "name": "web",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_adopt_sets_labels_owner_and_namespace_without_mutating():
    child = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "labels": {"app": "web"}}}
    adopted = ownership.adopt(child, OWNER, app="webserver", component="server")
    assert "ownerReferences" not in child["metadata"]
    meta = adopted["metadata"]
    assert meta["namespace"] == "ns1"
    assert meta["ownerReferences"] == [ownership.owner_reference(OWNER)]
    assert meta["labels"] == {
        "app": "web",
        "app.kubernetes.io/name": "webserver",
        "app.kubernetes.io/instance": "web",
        "app.kubernetes.io/component": "server",
        "app.kubernetes.io/part-of": ownership.PART_OF,
        "app.kubernetes.io/managed-by": ownership.MANAGED_BY,
    }


def test_user_labels_cannot_spoof_managed_by():
    child = {"metadata": {"name": "x", "labels": {ownership.MANAGED_BY_LABEL: "someone-else"}}}
    adopted = ownership.adopt(child, OWNER, "webserver", "server", {ownership.INSTANCE: "other"})
    assert adopted["metadata"]["labels"][ownership.MANAGED_BY_LABEL] == ownership.MANAGED_BY
    assert adopted["metadata"]["labels"][ownership.INSTANCE] == "web"


def test_is_controlled_by_requires_controller_ref_with_uid():
    pod = ownership.adopt({"metadata": {"name": "p"}}, OWNER, "webserver", "server")
    assert ownership.is_controlled_by(pod, "uid-1")
    assert not ownership.is_controlled_by(pod, "uid-2")
    non_controller = {"metadata": {"ownerReferences": [{"uid": "uid-1", "controller": False}]}}
    assert not ownership.is_controlled_by(non_controller, "uid-1")
    assert not ownership.is_controlled_by({"metadata": {}}, "uid-1")


def test_managed_selector_matches_adopted_labels():
    pod = ownership.adopt({"metadata": {"name": "p"}}, OWNER, "webserver", "server")
    selector = ownership.managed_selector("webserver")
    for term in selector.split(","):
        key, value = term.split("=")
        assert pod["metadata"]["labels"][key] == value
    assert ownership.standard_labels("a", "b", "c", version="1.0")[ownership.VERSION] == "1.0"


def test_only_a_live_orphan_with_our_labels_for_that_name_is_adoptable():
    owner = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "web", "namespace": "ns", "uid": "u1"}}
    child = ownership.adopt({"metadata": {"name": "web-0"}}, owner, "webserver", "web-server")
    orphan = {"metadata": {**child["metadata"], "ownerReferences": []}}
    assert ownership.adoptable(orphan, "webserver", "web")
    assert not ownership.adoptable(child, "webserver", "web")  # has a controller
    assert not ownership.adoptable(orphan, "webserver", "other")  # labelled for another owner
    assert not ownership.adoptable(orphan, "tdset", "web")  # another operator's
    terminating = {"metadata": {**orphan["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert not ownership.adoptable(terminating, "webserver", "web")


def _child(controller: dict | None = None, labels: dict | None = None, terminating: bool = False) -> dict:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u-9"}]  # not a controller
    if controller is not None:
        refs.append({"apiVersion": "x/v1", "controller": True, **controller})
    meta: dict = {"name": "web-0", "ownerReferences": refs, "labels": labels or {}}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    return {"metadata": meta}


OUR_LABELS = ownership.standard_labels("webserver", "web", "server")


def test_classify_tells_ours_orphans_predecessors_and_strangers_apart():
    classify = ownership.classify
    holder = ownership.Holder
    assert (
        classify(_child({"kind": "WebServer", "name": "web", "uid": "uid-1"}), OWNER, "webserver")
        is holder.OURS
    )
    assert classify(_child(labels=OUR_LABELS), OWNER, "webserver") is holder.ORPHAN
    # Terminating, or labelled for another instance or app: not to adopt.
    assert classify(_child(labels=OUR_LABELS, terminating=True), OWNER, "webserver") is holder.FOREIGN
    assert classify(_child(labels=OUR_LABELS), OWNER, "netperf") is holder.FOREIGN
    other_instance = ownership.standard_labels("webserver", "web2", "server")
    assert classify(_child(labels=other_instance), OWNER, "webserver") is holder.FOREIGN
    # A deleted WebServer of the same name (delete && apply): the old object's.
    predecessor = _child({"kind": "WebServer", "name": "web", "uid": "uid-0"}, OUR_LABELS)
    assert classify(predecessor, OWNER, "webserver") is holder.PREDECESSOR
    # Another kind or name holding it: a stranger, whatever its labels say.
    for ref in (
        {"kind": "ReplicaSet", "name": "web", "uid": "u-2"},
        {"kind": "WebServer", "name": "x", "uid": "u-3"},
    ):
        assert classify(_child(ref, OUR_LABELS), OWNER, "webserver") is holder.FOREIGN


@given(
    controller=st.none()
    | st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["WebServer", "Netperf", "ReplicaSet"]),
            "name": st.sampled_from(["web", "web2"]),
            "uid": st.sampled_from(["uid-1", "uid-0"]),
        }
    ),
    labelled=st.booleans(),
    terminating=st.booleans(),
)
def test_classify_agrees_with_the_single_rules(controller, labelled, terminating):
    child = _child(controller, OUR_LABELS if labelled else {}, terminating)
    got = ownership.classify(child, OWNER, "webserver")
    assert (got is ownership.Holder.OURS) == ownership.is_controlled_by(child, "uid-1")
    assert (got is ownership.Holder.ORPHAN) == ownership.adoptable(child, "webserver", "web")
    same_name = controller is not None and controller["kind"] == "WebServer" and controller["name"] == "web"
    assert (got is ownership.Holder.PREDECESSOR) == (same_name and controller["uid"] != "uid-1")
