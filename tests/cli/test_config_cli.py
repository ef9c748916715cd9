from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.settings import AptixSettings

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    for name in ("APTIX_API_KEYS", "APTIX_LLM_API_KEY", "APTIX_CONFIG_FILE", "APTIX_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_config_show_masks_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_LLM_API_KEY", "sk-secret")
    monkeypatch.setenv("APTIX_API_KEYS", "k1=acme:ann")
    monkeypatch.setenv("APTIX_DATABASE_URL", "postgresql+asyncpg://aptix:pw@db/aptix")
    monkeypatch.setenv("APTIX_LLM_EXTRA_HEADERS", '{"api-key": "az-secret"}')
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["llm_api_key"] == "********"
    assert shown["api_keys"] == "********"
    assert "pw" not in result.stdout
    assert "sk-secret" not in result.stdout
    assert shown["llm_extra_headers"] == {"api-key": "********"}
    assert "az-secret" not in result.stdout
    assert shown["effective_database_url"] == "postgresql+asyncpg://aptix:***@db/aptix"


def test_toml_file_is_read_and_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "aptix.toml").write_text('llm_model = "from-toml"\nport = 9001\n')
    monkeypatch.setenv("APTIX_PORT", "9002")
    settings = AptixSettings()
    assert settings.llm_model == "from-toml"
    assert settings.port == 9002


def test_named_config_file_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_CONFIG_FILE", str(tmp_path / "missing.toml"))
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2
    assert "APTIX_CONFIG_FILE names a file that does not exist" in result.stderr


def test_a_config_file_that_is_not_utf8_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "aptix.toml"
    path.write_bytes(b'llm_model = "caf\xe9"\n')  # Latin-1, not UTF-8
    monkeypatch.setenv("APTIX_CONFIG_FILE", str(path))
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {path} is not valid TOML (not UTF-8 text: ")
    assert f"save {path} as UTF-8" in result.stderr


def test_a_config_file_that_is_a_directory_is_named_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_CONFIG_FILE", str(tmp_path))
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2, result.output
    assert f"APTIX_CONFIG_FILE names a directory, not a file: {tmp_path}." in result.stderr


@pytest.mark.parametrize("keys", ["justakey", "k=org", "k=:user", "=org:user"])
def test_malformed_api_keys_are_refused(keys: str) -> None:
    with pytest.raises(ValueError, match="must look like 'key=org:user'"):
        AptixSettings(api_keys=keys).api_key_map()


def test_api_keys_map_to_org_user_and_role() -> None:
    settings = AptixSettings(api_keys="k1=acme:ann, k2=globex:bob:admin,k3=acme:cy:author")
    keys = settings.api_key_map()
    assert keys == {
        "k1": ("acme", "ann", "user"),
        "k2": ("globex", "bob", "admin"),
        "k3": ("acme", "cy", "author"),
    }


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="entry #1 has the unknown role 'root'"):
        AptixSettings(api_keys="k1=acme:ann:root").api_key_map()


def test_serve_refuses_a_public_host_without_keys() -> None:
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "Refusing to serve on 0.0.0.0 without APTIX_API_KEYS" in result.stderr


def test_serve_reports_malformed_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_API_KEYS", "broken")
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 2
    assert "APTIX_API_KEYS entry #1" in result.stderr


@pytest.mark.parametrize(
    "command", [["tools", "list"], ["serve"], ["db", "upgrade"], ["workflows", "validate"]]
)
def test_invalid_settings_end_every_command_cleanly(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_PORT", "eighty")
    result = runner.invoke(app, command)
    assert result.exit_code == 2
    assert "Invalid settings: APTIX_PORT" in result.stderr


def test_a_key_listed_twice_is_refused_naming_positions_not_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = "s3cret-one=acme:ann,k2=acme:amy,s3cret-one=globex:bob:admin"
    with pytest.raises(ValueError, match="entry #3 repeats the key of entry #1") as caught:
        AptixSettings(api_keys=keys).api_key_map()
    assert "s3cret-one" not in str(caught.value)
    monkeypatch.setenv("APTIX_API_KEYS", keys)
    for command in (["serve"], ["config", "show"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, command
        assert "APTIX_API_KEYS entry #3 repeats the key of entry #1" in result.stderr
        assert "s3cret-one" not in result.stderr + result.stdout


def test_config_show_refuses_a_role_that_serve_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_API_KEYS", "k1=acme:ann:root")
    for command in (["serve"], ["config", "show"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, command
        assert "entry #1 has the unknown role 'root'" in result.stderr


def test_a_config_file_name_of_spaces_is_shown_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_CONFIG_FILE", " ")
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2
    assert "APTIX_CONFIG_FILE names a file that does not exist: ' '." in result.stderr
