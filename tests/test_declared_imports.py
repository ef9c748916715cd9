"""Every package that ``src/aptix`` imports is declared in pyproject.toml, not borrowed.

A module that arrives only as a dependency of a dependency (or through the test extra) works
in the development environment and fails in a clean ``pip install aptix`` once the package
that brought it changes: ``httpx`` was imported while only the test extra named it, and
``openai`` and ``mcp`` had moved on to ``httpx2``.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Extras a deployment installs to run Aptix (not test, dev or bench).
RUNTIME_EXTRAS = ("otel", "redis", "semantic", "tokens")
#: The standard library's stub-only module: it exists for type checkers alone, is imported
#: only under ``TYPE_CHECKING`` and ships with every one of them, so no install needs it.
TYPE_CHECKER_ONLY = frozenset({"_typeshed"})


def _name(requirement: str) -> str:
    """The normalised distribution name of a PEP 508 requirement (PEP 503)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _imported_modules() -> dict[str, str]:
    """Top-level third-party modules ``src/aptix`` imports, each with one file importing it."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "src" / "aptix").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top != "aptix" and top not in sys.stdlib_module_names | TYPE_CHECKER_ONLY:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_a_declared_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    declared = {_name(r) for r in project["dependencies"]}
    for extra in RUNTIME_EXTRAS:
        declared |= {_name(r) for r in project["optional-dependencies"][extra]}
    providers = packages_distributions()
    undeclared = []
    for module, path in _imported_modules().items():
        distributions = {_name(d) for d in providers.get(module, [])}
        if not distributions & declared:
            undeclared.append(f"{module} ({path}; from {sorted(distributions) or 'nothing'})")
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
