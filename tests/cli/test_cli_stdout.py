"""A command's stdout holds its result alone, written whole or ended with one clear line.

- What tool modules and tools print goes to stderr, made inert, as ``aptix mcp`` keeps its
  stdout for JSON-RPC: ``--json`` output stays JSON, and no escape sequence reaches the
  terminal raw.
- A reader that leaves early (``| head -1``) ends the command quietly with 141 (128 +
  SIGPIPE, as ``cat`` would), not 1 (a failed tool call, a catalog with problems); a full
  disk or a closed stdout is one ``error:`` line and exit code 1, never a traceback.
- Tables never cut ids short: into a pipe a table is as wide as its contents, and on a
  narrow terminal the id column keeps its width while the others give way.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.cli.output import add_row, new_table

runner = CliRunner()

NOISY = '''
print("\\x1b]0;import-noise\\x07 hello from import")
import aptix


@aptix.tool(usage="Echo.")
async def noisy_echo(text: str) -> str:
    """Echo it back.

    Args:
        text: the text.
    """
    print("\\x1b]0;printed\\x07 noise from the tool")
    return text
'''


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")


@pytest.fixture
def noisy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / f"noisy_{tmp_path.name}.py"  # a file of its own: imported anew
    module.write_text(textwrap.dedent(NOISY))
    monkeypatch.setenv("APTIX_TOOL_MODULES", json.dumps([str(module)]))


@pytest.mark.usefixtures("noisy_module")
@pytest.mark.parametrize(
    "command",
    [
        ["tools", "list", "--json"],
        ["workflows", "list", "--json"],
        ["tools", "call", "noisy_echo", '{"text": "hi"}', "--json"],
    ],
)
def test_what_tool_code_prints_goes_to_stderr_inert(command: list[str]) -> None:
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # nothing but the result
    assert "\x1b" not in result.stderr
    assert "␛]0;import-noise␇ hello from import\n" in result.stderr
    if command[1] == "call":
        assert "␛]0;printed␇ noise from the tool\n" in result.stderr


FILE_LIKE = """
import subprocess
import sys

import aptix


@aptix.tool(usage="Use stdout as a file.")
async def stdout_as_file(child_says: str) -> str:
    \"\"\"Write to stdout as a file, and through a child process.

    Args:
        child_says: what the child process prints.
    \"\"\"
    sys.stdout.buffer.write(b"\\x1b]0;raw\\x07 bytes\\n")
    child = [sys.executable, "-c", f"print({child_says!r})"]
    subprocess.run(child, stdout=sys.stdout, check=True)
    return f"{sys.stdout.encoding.lower()} isatty={sys.stdout.isatty()}"
"""


def test_tool_code_finds_stdout_a_real_file_whose_output_goes_to_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 01b6132 put an object of its own in sys.stdout: no buffer, no fileno, encoding None,
    # and each of these tools failed unexpectedly.
    module = tmp_path / "file_like.py"
    module.write_text(textwrap.dedent(FILE_LIKE))
    monkeypatch.setenv("APTIX_TOOL_MODULES", json.dumps([str(module)]))
    call = ["tools", "call", "stdout_as_file", '{"child_says": "from the child"}', "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "aptix", *call],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "utf-8 isatty=False"
    assert "␛]0;raw␇ bytes\n" in done.stderr  # inert, as printed text is
    assert "from the child\n" in done.stderr  # the child's own descriptor 1 is stderr


@pytest.mark.usefixtures("noisy_module")
def test_workflows_validate_keeps_import_noise_off_stdout() -> None:
    result = runner.invoke(app, ["workflows", "validate", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True
    assert "␛]0;import-noise␇" in result.stderr


@pytest.mark.parametrize("command", [["tools", "list", "--json"], ["workflows", "list"]])
def test_a_full_disk_is_one_line_and_exit_code_1(command: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "aptix", *command],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr == "error: Cannot write the output: No space left on device.\n"


@pytest.mark.parametrize("command", [["tools", "list", "--json"], ["tools", "list"]])
def test_a_closed_stdout_is_one_line_and_exit_code_1(command: list[str]) -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" -m aptix "$@" >&-', sys.executable, *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == "error: Cannot write the output: standard output is closed.\n"


@pytest.mark.parametrize("command", [["config", "show"], ["tools", "list", "--json"]])
def test_a_reader_that_leaves_early_ends_the_command_quietly_with_141(
    command: list[str],
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aptix", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()  # before the command writes anything: the whole output is refused
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 141, stderr
    assert stderr == ""


def test_sessions_list_shows_whole_ids_into_a_pipe() -> None:
    created = runner.invoke(app, ["sessions", "create", "--title", "t " * 60, "--json"])
    session_id = json.loads(created.stdout)["sessionId"]
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 0, result.output
    assert re.findall(r"\b[0-9a-f]{32}\b", result.stdout) == [session_id]


def test_workflows_list_shows_whole_ids_into_a_pipe() -> None:
    result = runner.invoke(app, ["workflows", "list"])
    assert result.exit_code == 0, result.output
    assert "review_and_publish_workflow" in result.stdout
    assert "…" not in result.stdout


def test_on_a_narrow_terminal_the_id_column_keeps_its_width() -> None:
    session_id = "5680cbf972bd4e47a869f2cc376d9abc"
    table = new_table("Sessions", "id", "mode", "title", "updated", ids=("id", "mode"))
    add_row(table, session_id, "workflow_authoring", "A title long enough to be cut", "now")
    screen = io.StringIO()
    Console(file=screen, width=60, force_terminal=True, color_system=None).print(table)
    shown = screen.getvalue()
    assert session_id in shown
    assert max(len(line) for line in shown.splitlines()) <= 60
    # The mode key is folded over lines, whole, not cut with "…".
    modes = [line.split("│")[2].strip() for line in shown.splitlines() if line.startswith("│")]
    assert "".join(modes) == "workflow_authoring"
