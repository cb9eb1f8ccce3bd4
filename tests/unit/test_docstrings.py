"""Docstrings stay short, plain and true: a module's says what and why in at most 15 lines,
carries no Sphinx role (nothing renders them), and every module or file it names exists.

Checked on every Python file of the repository's own packages, by reading the files (nothing
is imported), so a stale name fails here rather than confusing the next reader.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "operators", "tools", "localcluster", "tests")
MAX_MODULE_DOCSTRING_LINES = 15
SPHINX_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|ref|obj|const):`")
# ``shared.client.kube`` or ``shared.client.kube.KubeClient``: a dotted name in our packages.
ALTERNATIVES = "|".join(PACKAGES)
DOTTED = re.compile(rf"``((?:{ALTERNATIVES})(?:\.\w+)+)``")
# ``.schema`` in a package's docstring: a module of that package.
RELATIVE = re.compile(r"``\.(\w+)``")
# ``operators/netperf/desired.py`` or ``tests/unit/test_x.py``: a file of the repository.
PATH = re.compile(rf"``((?:{ALTERNATIVES})/[\w/.-]+\.py)``")


def python_files() -> list[pathlib.Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def module_docstring(path: pathlib.Path) -> tuple[str, int] | None:
    """The module docstring's text and the lines its literal spans in the file."""
    tree = ast.parse(path.read_text())
    if not tree.body:
        return None
    first = tree.body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
        return None
    if not isinstance(first.value.value, str):
        return None
    assert first.end_lineno is not None
    return first.value.value, first.end_lineno - first.lineno + 1


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module of the repository, or a name a module defines: the
    longest prefix that is a module (file or package) must exist, and the next part, if any,
    must appear in that module's source (a class, function, constant or re-export)."""
    parts = dotted.split(".")
    module: pathlib.Path | None = None
    rest: list[str] = []
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                module, rest = candidate, parts[i:]
                break
        if module is not None:
            break
    if module is None:
        return False
    if not rest:
        return True
    return re.search(rf"\b{re.escape(rest[0])}\b", module.read_text()) is not None


def names_in(path: pathlib.Path, text: str) -> list[str]:
    """The modules and files ``text`` (the docstring of ``path``) names that do not exist."""
    missing = [name for name in DOTTED.findall(text) if not resolves(name)]
    missing += [name for name in PATH.findall(text) if not (ROOT / name).is_file()]
    if path.name == "__init__.py":
        package = path.parent
        missing += [
            f".{name}"
            for name in RELATIVE.findall(text)
            if not ((package / f"{name}.py").is_file() or (package / name / "__init__.py").is_file())
        ]
    return missing


def test_the_checks_themselves_tell_a_stale_name_from_a_real_one():
    assert resolves("shared.client.kube")
    assert resolves("shared.client.kube.KubeClient")
    assert resolves("shared.controller")
    assert not resolves("shared.controller.handlers")
    assert not resolves("shared.client.kube.NoSuchThing")
    init = ROOT / "operators" / "netperf" / "__init__.py"
    assert names_in(init, "``.schema`` and ``.handlers``, ``operators/netperf/handlers.py``") == [
        "operators/netperf/handlers.py",
        ".handlers",
    ]
    assert SPHINX_ROLE.search("see :" + "class:`KubeClient`") and not SPHINX_ROLE.search("see ``KubeClient``")


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_docstring_is_short_and_names_only_what_exists(path: pathlib.Path):
    found = module_docstring(path)
    if found is None:
        return
    text, lines = found
    assert lines <= MAX_MODULE_DOCSTRING_LINES, (
        f"{lines} lines: say what and why in at most {MAX_MODULE_DOCSTRING_LINES}; details go to "
        "the docstring of the class or function they concern, or to docs/"
    )
    assert names_in(path, text) == [], "the docstring names modules or files that do not exist"


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_sphinx_roles_anywhere_in_the_source(path: pathlib.Path):
    """Nothing renders Sphinx roles (class, meth, func, mod...): plain double backticks instead."""
    roles = [n for n, line in enumerate(path.read_text().splitlines(), 1) if SPHINX_ROLE.search(line)]
    assert roles == [], f"Sphinx roles on lines {roles}"
