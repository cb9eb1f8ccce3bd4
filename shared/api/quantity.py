"""Kubernetes resource quantities (``1.5Gi``, ``250m``, ``1e3``) exactly as the API server parses them (pure).

The CRD's OpenAPI ``pattern`` for a quantity is the published grammar, which admits strings the
API server's parser (``resource.ParseQuantity``, also behind CEL's ``isQuantity``) refuses,
e.g. ``1E.5`` (an exponent must be an integer). The controller re-checks specs without CEL,
so ``parse`` mirrors that parser: which strings it accepts, and the value it gives them
(for comparing a request with its limit): rounded up to a multiple of 10^-9 away from zero,
and binary-suffixed values capped at 2^63 - 1, as the API server does.
"""

from __future__ import annotations

import decimal
import re

from shared.api.errors import OperatorError

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# sign, integer digits, optional fraction, then suffix letters, an optional sign and digits.
_SYNTAX = re.compile(r"([+-]?)([0-9]*+)(?:\.([0-9]*+))?([eEinumkKMGTP]*+[+-]?[0-9]*+)")
_INT64_MAX = 2**63 - 1
_NANO = decimal.Decimal("1e-9")


class QuantityError(OperatorError, ValueError):
    pass


def _exponent(suffix: str) -> tuple[int, int, bool] | None:
    """(base, exponent, binary) for a suffix, as ``suffixHandler.interpret`` reads it."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], False
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        exponent = int(suffix[1:])
        if -(2**63) <= exponent <= _INT64_MAX:  # strconv.ParseInt(.., 64), then int32(): wraps
            return 10, (exponent + 2**31) % 2**32 - 2**31, False
    return None


def parse(value: str | int) -> decimal.Decimal:
    """The value of a quantity (a string, or an integer as JSON carries it); raises
    ``QuantityError`` for anything ``resource.ParseQuantity`` refuses."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise QuantityError(f"{value!r} is not a quantity: must be a string or an integer")
    text = str(value)
    if not text:
        raise QuantityError("'' is not a quantity")
    if not (text[1:] if text[0] in "+-" else text).strip("0"):
        return decimal.Decimal(0)  # the parser returns 0 once only zeros follow the sign
    match = _SYNTAX.fullmatch(text)
    interpreted = _exponent(match.group(4)) if match else None
    if match is None or interpreted is None:
        raise QuantityError(f"{text!r} is not a quantity")
    sign, whole, fraction, _ = match.groups()
    _, exponent, binary = interpreted
    digits = whole + (fraction or "")
    if not digits:
        # Zero, but only where the int64 fast path takes it: the slow path finds no digits.
        fast = 13 - int(exponent * 3 / 10) >= 0 if binary else exponent >= -9
        if not fast:
            raise QuantityError(f"{text!r} is not a quantity: no digits")
        return decimal.Decimal(0)
    context = decimal.Context(prec=len(text) + 64, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    amount = decimal.Decimal(f"{sign}{digits}E-{len(fraction or '')}")
    if binary:
        amount = context.multiply(amount, decimal.Decimal(2**exponent))
    else:
        amount = context.scaleb(amount, exponent)
    if amount and int(amount.as_tuple().exponent) < -9:
        amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=context)
    if binary and abs(amount) > _INT64_MAX:
        amount = decimal.Decimal(_INT64_MAX).copy_sign(amount)
    return amount


def is_quantity(value: object) -> bool:
    if not isinstance(value, (str, int)):
        return False
    try:
        parse(value)
    except QuantityError:
        return False
    return True
