"""The CSV's capability level is the one docs/operations/capabilities.md proves, row by row."""

from __future__ import annotations

import re
from pathlib import Path

from tools.generate import bundle

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "operations" / "capabilities.md"
COUNTS = {"met", "n/a"}
STATUSES = COUNTS | {"partly", "no"}
NO_PROOF = "\N{EN DASH}"  # the table's empty cell


def rows() -> list[dict[str, str]]:
    out = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in bundle.CAPABILITY_LEVELS:
            out.append(dict(zip(("level", "criterion", "status", "what", "proof"), cells, strict=True)))
    return out


def proven_level(table: list[dict[str, str]]) -> str | None:
    """The highest level whose criteria, and every lower level's, are all met or n/a."""
    claimed = None
    for level in bundle.CAPABILITY_LEVELS:
        if not all(r["status"] in COUNTS for r in table if r["level"] == level):
            break
        claimed = level
    return claimed


def test_every_level_has_criteria_with_a_known_status():
    table = rows()
    assert {r["level"] for r in table} == set(bundle.CAPABILITY_LEVELS)
    assert all(r["status"] in STATUSES for r in table), [r for r in table if r["status"] not in STATUSES]


def test_the_csv_claims_exactly_the_level_the_table_proves():
    assert bundle.csv("0.1.0", bundle.DEFAULT_REGISTRY)["metadata"]["annotations"]["capabilities"] == (
        bundle.CAPABILITY
    )
    assert proven_level(rows()) == bundle.CAPABILITY
    assert f"**Claimed: {bundle.CAPABILITY}.**" in DOC.read_text()


def test_every_met_criterion_names_a_test_that_exists():
    for row in rows():
        if row["status"] in ("met", "partly") and row["proof"] != NO_PROOF:
            match = re.fullmatch(r"`(tests/[\w/]+\.py)::(test_\w+)`", row["proof"])
            assert match, row
            path, name = match.groups()
            assert re.search(rf"^(async )?def {name}\(", (REPO / path).read_text(), re.M), row
        if row["status"] == "met":
            assert row["proof"] != NO_PROOF, f"a met criterion needs its proof: {row}"


def test_the_level_rule_stops_at_the_first_unmet_level():
    table = [
        {"level": "Basic Install", "status": "met"},
        {"level": "Seamless Upgrades", "status": "n/a"},
        {"level": "Full Lifecycle", "status": "partly"},
        {"level": "Deep Insights", "status": "met"},
    ]
    assert proven_level(table) == "Seamless Upgrades"
    assert proven_level([{"level": "Basic Install", "status": "no"}]) is None
