"""Entry point: ``python -m operators.webserver [--namespace NS ...]``."""

from __future__ import annotations

import sys

from operators.webserver import handlers
from shared.runtime import parse_options


def main() -> None:
    handlers.runtime.options = parse_options(sys.argv[1:], prog="webserver")
    handlers.runtime.run()


if __name__ == "__main__":
    main()
