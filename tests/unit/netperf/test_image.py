"""The default benchmark image is versioned with the operator."""

from pathlib import Path

import shared
from operators.netperf.schema import DEFAULT_IMAGE

DOCKERFILE = Path(__file__).resolve().parents[3] / "images" / "netperf" / "Dockerfile"


def test_default_image_tag_and_dockerfile_version_follow_the_release():
    text = DOCKERFILE.read_text()
    assert DEFAULT_IMAGE.endswith(f":{shared.__version__}")
    assert f'org.opencontainers.image.version="{shared.__version__}"' in text
    assert f"docker build -f images/netperf/Dockerfile -t {DEFAULT_IMAGE} ." in text


def test_image_runs_as_the_user_the_pods_ask_for():
    assert "USER 65534:65534" in DOCKERFILE.read_text()
