from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from aptix.errors import ConfigurationError, NotFoundError
from aptix.modes.catalog import ALWAYS_OFFERED_TOOLS, MAX_MODE_KEY, load_mode_catalog
from aptix.runtime import BUILTIN_TOOLS, open_runtime
from aptix.settings import AptixSettings

GOOD_MODE = """
  - id: {id}
    key: {key}
    displayName: {key}
    description: A mode.
    isDefault: {default}
    instructions: Behave.
    tools: [{tools}]
"""
ID_A = "a" * 32
ID_B = "b" * 32


def _catalog(tmp_path: Path, *modes: str) -> Path:
    path = tmp_path / "modes.yaml"
    path.write_text("modes:\n" + "".join(textwrap.dedent(m) for m in modes))
    return path


def _mode(id: str = ID_A, key: str = "alpha", default: bool = True, tools: str = "") -> str:
    return GOOD_MODE.format(id=id, key=key, default=str(default).lower(), tools=tools)


def test_builtin_catalog_is_valid_against_the_builtin_tools() -> None:
    catalog = load_mode_catalog(registered_tools=[t.TOOL_NAME for t in BUILTIN_TOOLS])
    assert {"general", "workflow_authoring"} <= set(catalog.keys)
    assert len(catalog.keys) >= 3
    assert catalog.default_mode.key == "general"
    for key in catalog.keys:
        mode = catalog.get_mode(key)
        assert mode.instructions
        assert mode.welcome_message
        assert mode.description


def test_tools_for_mode_always_include_the_always_offered_tools() -> None:
    catalog = load_mode_catalog()
    for key in catalog.keys:
        tools = catalog.tools_for_mode(key)
        assert set(ALWAYS_OFFERED_TOOLS) <= set(tools)
        assert len(tools) == len(set(tools))
    assert catalog.tools_for_mode("calculation")[0] == "agent_calculator"


def test_unknown_mode_key_names_the_valid_keys() -> None:
    with pytest.raises(NotFoundError, match=r"Unknown mode 'x'\. Valid modes: general, "):
        load_mode_catalog().get_mode("x")


def test_pascal_case_keys_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    path.write_text(
        f"modes:\n  - Id: {ID_A}\n    Key: alpha\n    DisplayName: A\n    Description: d\n"
        "    IsDefault: true\n    Instructions: i\n"
    )
    assert load_mode_catalog(path).default_mode.display_name == "A"


@pytest.mark.parametrize(
    ("modes", "message"),
    [
        ((_mode(default=False),), "exactly one mode must have isDefault: true (found: none)"),
        (
            (_mode(), _mode(id=ID_B, key="beta")),
            "exactly one mode must have isDefault: true (found: alpha, beta)",
        ),
        ((_mode(), _mode(id=ID_B, default=False)), "duplicate mode key 'alpha'"),
        (
            (_mode(), _mode(key="beta", default=False)),
            f"mode 'beta': id {ID_A} is already used by mode 'alpha'",
        ),
        ((_mode(id="not-a-guid"),), "mode #1 'alpha': id: Value error, must be 32 lowercase hex"),
        ((_mode(id=ID_A.upper()),), "must be 32 lowercase hex characters"),
        ((_mode(key="Alpha Mode"),), "key: Value error, must be snake_case"),
    ],
)
def test_invalid_catalog_is_refused_naming_file_and_mode(
    tmp_path: Path, modes: tuple[str, ...], message: str
) -> None:
    path = _catalog(tmp_path, *modes)
    with pytest.raises(ConfigurationError) as raised:
        load_mode_catalog(path)
    assert str(path) in str(raised.value)
    assert message in str(raised.value)


def test_unknown_tool_is_refused(tmp_path: Path) -> None:
    path = _catalog(tmp_path, _mode(tools="agent_calculator, agent_teleport"))
    with pytest.raises(ConfigurationError, match=r"mode 'alpha': unknown tool\(s\) agent_teleport"):
        load_mode_catalog(path, registered_tools=["agent_calculator"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("modes: [unclosed", "not valid YAML"),
        ("something: else", "expected a top-level 'modes' key"),
        ("modes: []", "it defines no modes"),
        (f"modes:\n  - id: {ID_A}\n    key: alpha\n", "displayName: Field required"),
        (
            f"modes:\n  - id: {ID_A}\n    key: alpha\n    displayName: A\n    description: d\n"
            "    instructions: i\n    isDefault: true\n    colour: red\n",
            "colour: Extra inputs are not permitted",
        ),
    ],
)
def test_malformed_file_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "modes.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        load_mode_catalog(path)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read the file"):
        load_mode_catalog(tmp_path / "absent.yaml")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    path.write_bytes(b"modes:\n  - key: caf\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(ConfigurationError, match=r"modes\.yaml: not UTF-8 text \(invalid"):
        load_mode_catalog(path)


async def test_runtime_start_up_refuses_a_catalog_with_an_unregistered_tool(
    tmp_path: Path,
) -> None:
    path = _catalog(tmp_path, _mode(tools="agent_teleport"))
    settings = AptixSettings(data_dir=tmp_path, modes_path=path, load_plugins=False)
    with pytest.raises(ConfigurationError, match="agent_teleport"):
        async with open_runtime(settings):
            pass


async def test_runtime_uses_the_deployment_catalog(tmp_path: Path) -> None:
    path = _catalog(tmp_path, _mode(tools="agent_calculator"))
    settings = AptixSettings(data_dir=tmp_path, modes_path=path, load_plugins=False)
    async with open_runtime(settings) as runtime:
        assert runtime.services.modes.keys == ("alpha",)


def test_a_key_longer_than_the_mode_column_is_refused(tmp_path: Path) -> None:
    # sessions.mode is VARCHAR(100): PostgreSQL would refuse the first session in this mode.
    longest, too_long = "k" * MAX_MODE_KEY, "k" * (MAX_MODE_KEY + 1)
    assert load_mode_catalog(_catalog(tmp_path, _mode(key=longest))).keys == (longest,)
    path = _catalog(tmp_path, _mode(key="alpha"), _mode(id=ID_B, key=too_long, default=False))
    with pytest.raises(ConfigurationError) as raised:
        load_mode_catalog(path)
    assert str(raised.value) == (
        f"Mode catalog {path}, mode '{'k' * 40}...': the key is 101 characters long; "
        "the most is 100."
    )
