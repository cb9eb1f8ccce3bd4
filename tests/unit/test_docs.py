"""The generated parts of the documentation site (``tools/generate/docs.py``): current, complete, guarded."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from operators import descriptions
from tools.generate import docs


@pytest.mark.slow  # renders every generated page
def test_committed_docs_are_what_make_docs_renders():
    assert docs.main(["--check"]) == 0


def _paths(schema: Mapping[str, Any], path: str) -> Iterator[str]:
    yield path
    for name, child in schema.get("properties", {}).items():
        yield from _paths(child, f"{path}.{name}")
    if "properties" in schema.get("items", {}):
        yield from _paths(schema["items"], f"{path}[]")


@pytest.mark.parametrize("op", descriptions(), ids=lambda op: op.name)
def test_the_reference_has_a_row_for_every_field_and_every_cel_message(op):
    page = docs.reference(op)
    schema = op.crd.openapi_schema()
    for part in ("spec", "status"):
        for path in _paths(schema["properties"][part], part):
            assert f"| `{path}` |" in page, path
    rules = [r for s in _schemas(schema) for r in s.get("x-kubernetes-validations", ())]
    assert rules
    for rule in rules:
        assert rule["message"] in page and rule["rule"] in page


def _schemas(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield schema
    for child in schema.get("properties", {}).values():
        yield from _schemas(child)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            yield from _schemas(schema[key])


def test_a_keyword_the_reference_cannot_render_fails_instead_of_being_left_out():
    with pytest.raises(ValueError, match="exclusiveMinimum"):
        docs._validation({"type": "integer", "exclusiveMinimum": 0})


@pytest.mark.slow  # renders every generated page twice
def test_check_fails_after_a_hand_edit_and_passes_after_regenerating(tmp_path, monkeypatch, capsys):
    reference = tmp_path / "reference"
    shutil.copytree(docs.REFERENCE, reference)
    monitoring, mkdocs = tmp_path / "monitoring.md", tmp_path / "mkdocs.yml"
    shutil.copy(docs.MONITORING, monitoring)
    shutil.copy(docs.MKDOCS, mkdocs)
    monkeypatch.setattr(docs, "REFERENCE", reference)
    monkeypatch.setattr(docs, "MONITORING", monitoring)
    monkeypatch.setattr(docs, "MKDOCS", mkdocs)
    assert docs.main(["--check"]) == 0

    page = reference / "webserver.md"
    page.write_text(page.read_text().replace("| 0 to 1000 |", "| 0 to 100 |", 1))
    (reference / "gone.md").write_text("# an operator that is no longer registered\n")
    assert docs.main(["--check"]) == 1
    assert f"{page}, {reference / 'gone.md'}" in capsys.readouterr().err

    assert docs.main([]) == 0
    assert docs.main(["--check"]) == 0
    assert not (reference / "gone.md").exists()
