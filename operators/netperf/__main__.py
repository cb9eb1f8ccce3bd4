"""Entry point: ``python -m operators.<name> [--namespace NS ...]``, the same in every operator."""

from operators import main

if __name__ == "__main__":
    main(__package__)
