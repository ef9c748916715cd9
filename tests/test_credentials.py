"""Credentials in URLs and user text stay out of answers, stored turns, logs and config show."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import create_engine
from aptix.errors import ConfigurationError
from aptix.urls import mask_credentials, mask_url
from tests.api.live import free_port, served

SECRET = "s3cret-pw"


def test_mask_credentials_in_any_text() -> None:
    assert mask_credentials("at http://ann:pw@host:1/v1 and https://tok@h/x") == (
        "at http://***@host:1/v1 and https://***@h/x"
    )
    assert mask_credentials("mail ann@example.com, http://host/a@b") == (
        "mail ann@example.com, http://host/a@b"
    )


def test_mask_query_values_of_any_url() -> None:
    shown = mask_credentials("for url 'https://gw/v1?api-key=k3y&v=2#f' and http://h/?tok")
    assert shown == "for url 'https://gw/v1?api-key=***&v=***#f' and http://h/?***"


def test_model_url_credentials_leak_nowhere(tmp_path: Path) -> None:
    # Nothing listens there. Gateways may take the key in the query string.
    base = f"http://ann:{SECRET}@127.0.0.1:{free_port()}/v1?api-key={SECRET}"
    instruction = "my private instruction XYZZY"
    with served(
        tmp_path,
        APTIX_LLM_BASE_URL=base,
        APTIX_LLM_MODEL="m",
        APTIX_LLM_MAX_RETRIES="0",
        APTIX_LOG_LEVEL="INFO",
        APTIX_SEMANTIC_MATCHING="false",
    ) as srv:
        answer = httpx.post(f"{srv.url}/v1/agent/execute", json={"instruction": instruction})
        assert "Cannot reach the model endpoint" in answer.text
        session_id = answer.json().get("sessionId")
        sessions = httpx.get(f"{srv.url}/v1/sessions").json()
        session_id = session_id or sessions[0]["sessionId"]
        stored = httpx.get(f"{srv.url}/v1/sessions/{session_id}").text
        streamed = httpx.post(
            f"{srv.url}/v1/agent/execute",
            json={"instruction": instruction, "stream": True, "sessionId": session_id},
        ).text
        log = srv.log.read_text()
    for where in (answer.text, stored, streamed, log):
        assert SECRET not in where
    assert "***@127.0.0.1" in log or "Cannot reach" not in log
    assert "XYZZY" not in log  # user text is not logged at INFO


def test_config_show_masks_the_model_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_LLM_BASE_URL", f"https://ann:{SECRET}@llm.example/v1?key={SECRET}")
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["llm_base_url"] == "https://***@llm.example/v1?key=***"
    assert SECRET not in result.stdout


async def test_database_errors_carry_no_statement_parameters(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        async with engine.connect() as conn:
            with pytest.raises(DBAPIError) as caught:
                await conn.execute(text("SELECT * FROM missing WHERE a = :a"), {"a": "XYZZY"})
    finally:
        await engine.dispose()
    assert "XYZZY" not in str(caught.value)


@pytest.mark.parametrize(
    "password", ["Xy>9<Secret", 'a"b', "a`b", "a b", "a'b", "a/b?c", "a@b"], ids=repr
)
def test_a_malformed_database_url_never_shows_its_password(password: str) -> None:
    # A bad port makes the URL unparsable, so the error quotes it as given: the masker that
    # finds URLs in prose ended it at the password's first quote, space or angle bracket.
    url = f"postgresql://bob:{password}{SECRET}@db.example.com:5432x/aptix?password={SECRET}"
    with pytest.raises(ConfigurationError) as refused:
        create_engine(url)
    said = str(refused.value)
    assert SECRET not in said
    assert "'postgresql://***@db.example.com:5432x/aptix?password=***'" in said
    assert SECRET not in mask_url(url)


def test_a_whole_url_keeps_what_is_not_a_credential() -> None:
    assert mask_url("sqlite+aiosqlite:////tmp/a b.db") == "sqlite+aiosqlite:////tmp/a b.db"
    assert mask_url("postgresql://h:5432x/db") == "postgresql://h:5432x/db"
    assert mask_url("postgresql://ann:***@h/db") == "postgresql://ann:***@h/db"


def test_a_url_before_a_colon_keeps_the_colon_and_its_settings_shown() -> None:
    # "Cannot open the database at URL: reason": the colon was read as part of the last
    # query value and masked with it, and sslmode, the value a person had to fix, was hidden.
    said = "at postgresql://ann:pw@h/db?sslmode=require&sslpassword=k3y: rejected SSL upgrade"
    assert mask_credentials(said) == (
        "at postgresql://***@h/db?sslmode=require&sslpassword=***: rejected SSL upgrade"
    )
