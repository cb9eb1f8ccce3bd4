"""The quantity parser against what the API server's own (resource.ParseQuantity, v0.34.4) said
for the same strings: valid or not, and the value."""

from decimal import Decimal

import pytest

from shared.api import quantity

# Each answer was taken from the Go parser (a small program calling resource.ParseQuantity).
GO = {
    "250m": "0.25",
    "1.5Gi": "1610612736",
    "0.5Gi": "536870912",
    "1e3": "1000",
    "1E3": "1000",
    "1E": "1e18",
    "1k": "1000",
    "1Ki": "1024",
    "5.": "5",
    ".5": "0.5",
    "1.Gi": "1073741824",
    "12e-3": "0.012",
    "-1": "-1",
    "0": "0",
    "+0": "0",
    "-0": "0",
    ".": "0",
    "+": "0",
    "Mi": "0",
    "Ti": "0",
    "1e-10": "1e-9",  # rounded up to the nearest nano
    "1.5n": "2e-9",
    "0.1n": "1e-9",
    "99999999999999999999Ei": "9223372036854775807",  # binary values are capped at 2^63 - 1
    "1e2147483647": "1e2147483647",
    "-5e4294967297": "-50",  # the exponent wraps around int32
    5: "5",
    -3: "-3",
}
REFUSED = [
    "",
    "1E.5",
    "1e1.5",
    "Pi",
    "Ei",
    ".e-10",
    "1e",
    "1K",
    "1ki",
    "1mi",
    "1e99999999999999999999",
    "1+5",
    "1 ",
]


@pytest.mark.parametrize("text", sorted(GO, key=str))
def test_values_match_the_api_servers_parser(text):
    assert quantity.parse(text) == Decimal(GO[text])
    assert quantity.is_quantity(text)


@pytest.mark.parametrize("text", REFUSED)
def test_what_the_api_server_refuses_is_refused(text):
    with pytest.raises(quantity.QuantityError):
        quantity.parse(text)
    assert not quantity.is_quantity(text)


@pytest.mark.parametrize("value", [True, 1.5, None, ["1"]])
def test_only_strings_and_integers_are_quantities(value):
    assert not quantity.is_quantity(value)
