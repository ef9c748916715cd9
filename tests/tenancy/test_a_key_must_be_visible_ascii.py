"""An API key is visible ASCII: one that HTTP clients cannot send as it is stops start-up.

``kü`` authenticated only when a client sent its Latin-1 byte (curl sends UTF-8 and got 401,
httpx cannot send it at all), and ``kя`` never did (review r3 F1, round 72).
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from aptix.api import create_app
from aptix.cli import serve
from aptix.cli.main import app as cli
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.settings_keys import KeyOwner, parse_api_keys
from tests.tenancy.conftest import bearer

#: Every visible ASCII character but the list's ``,``: letters, digits and punctuation.
EVERY_VISIBLE = "".join(chr(code) for code in range(0x21, 0x7F) if chr(code) != ",")


@pytest.mark.parametrize(
    ("key", "position"),
    [("kü", 2), ("kя", 2), ("k€y", 2), ("ke y", 3), ("k\tey", 2), ("key\x7f", 4), ("k\u00a0y", 2)],
)
def test_a_key_that_is_not_visible_ascii_is_refused_naming_its_entry(
    key: str, position: int
) -> None:
    message = (
        f"APTIX_API_KEYS entry #2: the key's character #{position} is not visible ASCII; a "
        "key may hold only letters, digits and punctuation (0x21-0x7E), which HTTP clients "
        "send as they are."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_api_keys(f"plain=acme:ann, {key} =acme:bob")


def test_serve_and_config_show_stop_on_such_a_key_without_showing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_API_KEYS", "s3cretü=acme:ann")
    # Were the key taken, serve would serve until stopped: fail instead.
    monkeypatch.setattr(serve, "_serve", lambda *_, **__: pytest.fail("served"))
    for command in (["serve", "--port", "0"], ["config", "show"]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr.count("\n") == 1, result.stderr
        assert "APTIX_API_KEYS entry #1: the key's character #7 is not visible" in result.stderr
        assert "s3cret" not in result.stderr + result.stdout


async def test_keys_of_every_visible_ascii_character_still_authenticate(tmp_path: Path) -> None:
    shapes = {
        "b64": "c2VjcmV0a2V5MTIzNA==",  # openssl rand -base64, padding included
        "b64url": "s3cr3t-k3y_v4.l~ue+/x=",
        "all": EVERY_VISIBLE,
    }
    listed = ",".join(f"{key}=acme:{user}" for user, key in shapes.items())
    assert parse_api_keys(listed) == {key: KeyOwner("acme", user) for user, key in shapes.items()}
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, api_keys=listed
    )
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            for user, key in shapes.items():
                answer = await client.post("/v1/sessions", json={}, headers=bearer(key))
                assert answer.status_code == 201, (user, answer.text)
                assert answer.json()["user"] == user
