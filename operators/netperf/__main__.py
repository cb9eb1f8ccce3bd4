"""Entry point: ``python -m operators.netperf [--namespace NS ...]``."""

from __future__ import annotations

import sys

from operators.netperf import handlers
from shared.runtime import parse_options


def main() -> None:
    handlers.runtime.options = parse_options(sys.argv[1:], prog="netperf")
    handlers.runtime.run()


if __name__ == "__main__":
    main()
