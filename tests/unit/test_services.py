from shared import ownership, services

OWNER = {"apiVersion": "v1x", "kind": "Thing", "metadata": {"name": "web", "namespace": "ns", "uid": "u9"}}


def manifest(**kw):
    return services.manifest(OWNER, "demo", selector={"app": "web"}, port=80, target_port=8080, **kw)


def test_manifest_is_owned_and_named_like_the_owner():
    svc = manifest()
    assert svc["metadata"]["name"] == "web"
    assert ownership.is_controlled_by(svc, "u9")
    assert svc["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]


def test_server_filled_fields_do_not_count_as_drift():
    observed = services.view(manifest())
    observed["nodePort"] = 31234  # allocated by the API server for a NodePort service
    assert not services.differs(observed, manifest())


def test_changes_we_own_are_drift():
    observed = services.view(manifest())
    assert services.differs(
        observed, services.manifest(OWNER, "demo", selector={"app": "web"}, port=81, target_port=8080)
    )
    assert services.differs(observed, manifest(service_type="NodePort", node_port=30080))
