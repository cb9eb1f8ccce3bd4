"""The containers/image pull policy and registries.d files localcluster/signing.py writes."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from localcluster import signing

SCOPE = "127.0.0.1:25001/ghcr.io/k8s-operators-py"
scopes = st.lists(
    st.from_regex(r"[a-z0-9.-]{1,20}(:[0-9]{1,5})?(/[a-z0-9-]{1,10}){0,3}", fullmatch=True), min_size=1
)


@given(scopes)
def test_every_scope_needs_our_key_and_everything_else_is_rejected(given_scopes):
    doc = signing.policy(given_scopes, "/keys/cosign.pub")
    assert doc["default"] == [{"type": "reject"}]
    for scope in given_scopes:
        (requirement,) = doc["transports"]["docker"][scope]
        assert requirement == {
            "type": "sigstoreSigned",
            "keyPath": "/keys/cosign.pub",
            "signedIdentity": {"type": "matchRepository"},
        }


@given(scopes)
def test_registries_d_reads_sigstore_attachments_for_every_scope(given_scopes):
    doc = signing.registries_d(given_scopes)
    assert doc == {"docker": {scope: {"use-sigstore-attachments": True} for scope in given_scopes}}


def test_policy_files_are_written_with_the_key_beside_them(tmp_path):
    key = tmp_path / "in.pub"
    key.write_text("-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n")
    files = signing.write_policy_files(tmp_path / "out", [SCOPE], key)
    policy = json.loads(files["policy.json"].read_text())
    assert policy["transports"]["docker"][SCOPE][0]["keyPath"] == str(files["cosign.pub"])
    assert files["cosign.pub"].read_text() == key.read_text()
    assert yaml.safe_load(files["registries.d"].read_text())["docker"][SCOPE] == {
        "use-sigstore-attachments": True
    }


def test_the_configmap_names_the_key_where_a_container_mounts_it(tmp_path):
    key = tmp_path / "cosign.pub"
    key.write_text("PUBLIC KEY\n")
    cm = signing.policy_configmap("containers-policy", "olmv1-system", [SCOPE], key)
    policy = json.loads(cm["data"]["policy.json"])
    assert policy["transports"]["docker"][SCOPE][0]["keyPath"] == signing.CONTAINER_KEY_PATH
    assert cm["data"]["cosign.pub"] == "PUBLIC KEY\n"
    assert signing.REGISTRIES_D_FILE in cm["data"]


@pytest.mark.parametrize("ref", ["reg/x:1", "reg/x", "reg/x:sha256"])
def test_signing_by_tag_is_refused(ref, tmp_path):
    with pytest.raises(ValueError, match="by digest"):
        signing.sign(ref, key=tmp_path / "k")
