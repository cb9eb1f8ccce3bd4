"""The image archive cache: archives are named by their inputs, reused only for the same inputs,
never rewritten, and the newest few per image and version are kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localcluster import images


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("IMAGES_CACHE", str(tmp_path))
    images.archive_dir().mkdir(parents=True)
    return tmp_path


def saved(name: str, version: str, inputs: str, mtime: float, *, image_id: str = "sha256:1") -> Path:
    """An archive as save_archive leaves it: the tarball, its metadata and its SBOM files."""
    path = images._archive_path(name, version, inputs)
    path.write_bytes(b"archive")
    path.with_name(path.name + ".json").write_text(
        json.dumps({"id": image_id, "size": 7, "ref": f"x/{name}:{version}", "inputs": inputs})
    )
    path.with_name(path.name + ".spdx.json").write_text("{}")
    os.utime(path, (mtime, mtime))
    return path


def test_an_archive_is_reused_only_for_the_same_inputs() -> None:
    path = saved("web", "0.1.0", "a" * 64, 1000)
    assert images._saved_archive("web", "0.1.0", "a" * 64) == (
        path,
        {"id": "sha256:1", "size": 7, "ref": "x/web:0.1.0", "inputs": "a" * 64},
    )
    assert images._saved_archive("web", "0.1.0", "b" * 64) is None
    assert images._saved_archive("web", "0.1.1", "a" * 64) is None


def test_an_archive_without_its_metadata_or_with_another_inputs_metadata_is_not_reused() -> None:
    path = saved("web", "0.1.0", "a" * 64, 1000)
    meta = path.with_name(path.name + ".json")
    meta.write_text(json.dumps({"id": "sha256:1", "size": 7, "inputs": "a" * 16 + "c" * 48}))
    assert images._saved_archive("web", "0.1.0", "a" * 64) is None
    meta.unlink()
    assert images._saved_archive("web", "0.1.0", "a" * 64) is None


def test_two_sources_of_one_tag_get_two_archives() -> None:
    assert images._archive_path("web", "0.1.0", "a" * 64) != images._archive_path("web", "0.1.0", "b" * 64)


def test_pruning_keeps_the_newest_of_one_image_and_version_only(cache: Path) -> None:
    digests = [f"{i:x}" * 64 for i in range(7)]
    paths = [saved("web", "0.1.0", d, 1000 + i) for i, d in enumerate(digests)]
    other_version = saved("web", "0.1.0-pinned", "f" * 64, 1)
    other_image = saved("web-extra", "0.1.0", "e" * 64, 1)
    legacy = images.archive_dir() / "web-0.1.0.tar"
    legacy.write_bytes(b"old layout")
    images._prune_archives("web", "0.1.0")
    kept = sorted(p.name for p in images.archive_dir().iterdir())
    newest = paths[-images.ARCHIVES_KEPT :]
    expected = {legacy, other_version, other_image, *newest}
    expected |= {
        p.with_name(p.name + suffix) for p in expected - {legacy} for suffix in (".json", ".spdx.json")
    }
    assert kept == sorted(p.name for p in expected)


def test_a_reused_archive_counts_as_recent() -> None:
    old = saved("web", "0.1.0", "a" * 64, 1000)
    for i in range(1, images.ARCHIVES_KEPT):
        saved("web", "0.1.0", f"{i:x}" * 64, 2000 + i)
    assert images._saved_archive("web", "0.1.0", "a" * 64) is not None  # touched now
    saved("web", "0.1.0", "b" * 64, 3000)
    images._prune_archives("web", "0.1.0")
    assert old.exists()


def test_the_plain_name_links_to_the_archive_used_last() -> None:
    first = saved("web", "0.1.0", "a" * 64, 1000)
    second = saved("web", "0.1.0", "b" * 64, 1001)
    link = images.archive_dir() / "web-0.1.0.tar"
    link.write_bytes(b"a regular file from the old layout")
    images._link_latest(second, "web", "0.1.0")
    assert link.resolve() == second.resolve()
    images._link_latest(first, "web", "0.1.0")
    assert link.resolve() == first.resolve()
    assert link.read_bytes() == b"archive"
