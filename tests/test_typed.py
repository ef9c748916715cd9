"""A downstream package checked with ``mypy --strict`` sees Aptix's types (``py.typed``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import aptix

DOWNSTREAM = '''
"""A package built on Aptix."""

from aptix import AgentToolExecutionContext, InvokeResult, __version__


def greet(name: str) -> InvokeResult[str]:
    """A typed use of the public API."""
    return InvokeResult.create(f"hi {name} from {__version__}")


def who(context: AgentToolExecutionContext) -> str | None:
    """Another one."""
    return context.session_id


wrong: int = greet("ann").result
'''


def test_downstream_mypy_strict_sees_aptix_types(tmp_path: Path) -> None:
    package = tmp_path / "downstream"
    package.mkdir()
    (package / "__init__.py").write_text(DOWNSTREAM)
    source_root = Path(aptix.__file__).resolve().parents[1]
    assert (source_root / "aptix" / "py.typed").is_file()
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "downstream"],
        cwd=tmp_path,
        # Aptix is found as an installed package (as pip would place it), so mypy reads its
        # types only because of the py.typed marker.
        env={**os.environ, "PYTHONPATH": str(source_root), "MYPY_CACHE_DIR": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert "missing library stubs or py.typed marker" not in out, out
    # Exactly the one deliberate mistake is found, which needs Aptix's types to see.
    assert 'expression has type "str | None", variable has type "int"' in out, out
    assert "Found 1 error in 1 file" in out, out
