import tomllib
from pathlib import Path

import shared


def test_shared_version_is_the_projects():
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert shared.__version__ == pyproject["project"]["version"]
