"""``APTIX_API_KEYS`` entries: keys with ``=`` in them, spaces around the parts, long names."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.settings_keys import MAX_OWNER_NAME, KeyOwner, owner_name_problem, parse_api_keys
from tests.tenancy.conftest import bearer

#: What ``openssl rand -base64 12`` makes: a key that ends in ``=`` padding.
BASE64_KEY = "c2VjcmV0a2V5MTIzNA=="


def test_a_key_ending_in_base64_padding_is_kept_whole() -> None:
    keys = parse_api_keys(f"{BASE64_KEY}=acme:alice:admin")
    assert keys == {BASE64_KEY: KeyOwner("acme", "alice", "admin")}


def test_spaces_around_the_parts_are_not_part_of_them() -> None:
    keys = parse_api_keys(" k-ops = acme : ops , k-bob=acme :bob: author ")
    assert keys == {
        "k-ops": KeyOwner("acme", "ops", "user"),
        "k-bob": KeyOwner("acme", "bob", "author"),
    }


@pytest.mark.parametrize("part", ["org", "user"])
def test_a_name_longer_than_its_column_is_refused_naming_the_entry(part: str) -> None:
    long = "x" * (MAX_OWNER_NAME + 1)
    entry = f"k1=acme:ann,k2={long}:bob" if part == "org" else f"k1=acme:ann,k2=acme:{long}"
    message = (
        f"APTIX_API_KEYS entry #2: the {part} name is {MAX_OWNER_NAME + 1} characters long; "
        f"the most is {MAX_OWNER_NAME}."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_api_keys(entry)
    assert parse_api_keys(f"k=acme:{'x' * MAX_OWNER_NAME}")["k"].user == "x" * MAX_OWNER_NAME


def test_owner_name_problem_names_what_is_wrong() -> None:
    assert owner_name_problem("acme") is None
    assert owner_name_problem("  ") == "is empty"
    assert owner_name_problem("x" * 201) == "is 201 characters long; the most is 200"


async def test_the_whole_base64_key_authenticates_and_its_prefix_does_not(
    tmp_path: Path,
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        api_keys=f"{BASE64_KEY}=acme:alice:admin, k-bob = acme :bob",
    )
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            whole = await client.get("/v1/usage", headers=bearer(BASE64_KEY))
            prefix = await client.get("/v1/usage", headers=bearer(BASE64_KEY.rstrip("=")))
            bob = await client.post("/v1/sessions", json={}, headers=bearer("k-bob"))
    assert whole.status_code == 200, whole.text
    assert whole.json()["org"] == "acme"
    assert prefix.status_code == 401
    assert bob.status_code == 201, bob.text
    assert (bob.json()["org"], bob.json()["user"]) == ("acme", "bob")
