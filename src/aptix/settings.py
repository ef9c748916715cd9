"""Settings read from ``APTIX_*`` environment variables (and, later, an optional TOML file)."""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tomllib
from collections.abc import Collection, Iterable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

import platformdirs
from pydantic import BeforeValidator, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from aptix.config_files import UnusableFile, file_kind, read_text
from aptix.errors import ConfigurationError
from aptix.settings_keys import ROLES, KeyOwner, parse_api_keys
from aptix.settings_mcp import McpServerConfig
from aptix.urls import mask_credentials

__all__ = [
    "ROLES",
    "AptixSettings",
    "KeyOwner",
    "default_data_dir",
    "load_settings",
    "unknown_variables",
]

SETTINGS_HINT = "fix the variable; docs/settings.md lists them all"
#: Why a JSON value nested deeper than the parser's recursion limit is refused.
TOO_DEEP = "nests too deeply for Aptix to read"

#: Level names of :mod:`logging`, accepted in any case.
LogLevelName = Annotated[
    Literal["CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"],
    BeforeValidator(lambda v: v.strip().upper() if isinstance(v, str) else v),
]


#: The longest time setting: a day. Larger values overflow the clocks they are added to
#: (``timedelta``, socket timeouts) and ``inf`` would lift a limit the docs promise.
MAX_SECONDS = 86_400.0

#: RFC 9110 ``token`` characters, the only ones a header name may have.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def default_data_dir() -> Path:
    """The per-user data directory where the embedded SQLite database lives."""
    return Path(platformdirs.user_data_dir("aptix", appauthor=False))


class AptixSettings(BaseSettings):
    """Everything a deployment can configure; defaults give the embedded single-user setup."""

    model_config = SettingsConfigDict(env_prefix="APTIX_", extra="ignore")

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where local data lives: the SQLite file by default, and in index/ the "
        "workflow catalog's encodings, which a restart reads instead of running the models.",
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL, `sqlite+aiosqlite:///PATH` or "
        "`postgresql+asyncpg://USER:PASSWORD@HOST/DB`; `sqlite:///PATH` and other PostgreSQL "
        "drivers (`postgresql://`) are taken with those two, another SQLite driver stops "
        "start-up. Default: a SQLite file in data_dir. `aptix config show` masks its password "
        "and query values (a SQLite URL's options, such as `mode=ro`, are shown) and shows its "
        "user name, the role Aptix connects as, with a "
        "password or without (`bob:***@`, `bob@`).",
    )
    llm_base_url: str | None = Field(
        None,
        description="OpenAI-compatible endpoint base URL: `http://` or `https://` with a host "
        "(a malformed one, a host with a space among them, stops start-up); its userinfo and "
        "query values (`?api-key=...`) are masked wherever it is shown.",
    )
    llm_api_key: SecretStr | None = Field(None, description="API key for the model endpoint.")
    llm_model: str | None = Field(
        None,
        description="Model name to request; spaces around it are dropped, and a blank one is "
        "no model (as unset).",
    )
    llm_api: Literal["chat", "responses"] = Field(
        "chat", description="Chat Completions (default) or the Responses API."
    )
    llm_temperature: float | None = Field(
        None,
        ge=0,
        le=2,
        description="Sampling temperature sent with every model request "
        "(default: the endpoint's own).",
    )
    llm_max_output_tokens: int | None = Field(
        None,
        gt=0,
        description="Most tokens one model response may have: `max_completion_tokens` for "
        "OpenAI and Azure, `max_tokens` for other Chat Completions endpoints, "
        "`max_output_tokens` for the Responses API (default: the endpoint's own).",
    )
    llm_extra_headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers added to every model request, as a JSON object "
        '(`{"api-key": "..."}`); values are masked by `aptix config show`. The variable, when '
        "set, replaces the file's `[llm_extra_headers]` whole (`{}`: no headers).",
    )
    llm_timeout_seconds: float = Field(
        60.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False, description="Time limit per model request."
    )
    llm_max_retries: int = Field(2, ge=0, description="Retries on 429/5xx/connection errors.")
    max_iterations: int = Field(10, ge=1, description="Model calls per turn before stopping.")
    turn_token_budget: int | None = Field(
        None, gt=0, description="Tokens per turn before stopping (default: no budget)."
    )
    turn_lease_seconds: float = Field(
        30.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Lease of a running turn, renewed while its process lives; after it "
        "expires the turn is marked interrupted.",
    )
    llm_context_tokens: int = Field(
        32_000,
        ge=256,
        description="Token budget of every request to the model; older turns are left out to fit.",
    )
    context_strategy: Literal["drop", "summarize"] = Field(
        "drop",
        description="What happens to turns left out of the context budget: dropped, or "
        "replaced by a summary the model writes.",
    )
    max_tool_calls_per_response: int = Field(
        32, ge=1, description="Tool calls run from one model response; the rest are refused."
    )
    max_model_text_chars: int = Field(
        100_000,
        ge=1,
        description="Characters of one model response's text that are kept "
        "(and streamed as text_delta); as many of its refusal, apart.",
    )
    history_turns: int = Field(
        50,
        ge=0,
        description="Most recent ended turns (any status) read to build a turn's transcript; "
        "older turns are left out, counted in its contextDropped.",
    )
    modes_path: Path | None = Field(None, description="A deployment's own mode catalog (YAML).")
    workflows_path: Path | None = Field(None, description="A folder of workflow manifests.")
    semantic_matching: bool | None = Field(
        None,
        description="Blend local sentence embeddings into workflow matching "
        "(default: when the 'semantic' extra is installed).",
    )
    match_cascade: bool | None = Field(
        None,
        description="Let the larger encoder (the 'aptix-routing-mpnet' weights, installed from "
        "weights/ of the source tree) re-order the workflow matches MiniLM's ranker is unsure "
        "of (with semantic matching on; default: when those weights are installed). Costs one "
        "larger encoding (35 to 130 ms on one core) per such match, a few to a third of "
        "accepted ones, and ~100 MB of memory plus ~50 MB per 1,000 workflows; after a catalog "
        "change its index is rebuilt in "
        "the background, 25 to 65 new texts a second (15 minutes for 10,000 workflows). "
        "Set to true, it warns when the weights are missing.",
    )
    match_arbiter: Literal["off", "ambiguous", "always"] = Field(
        "off",
        description="Let the configured model choose among the top five matched workflows: "
        "'off', 'ambiguous' (only when the ranker or the gate is unsure, or the fit is weak) or "
        "'always'. Costs one "
        "model call (about 300-600 prompt tokens, up to 10 s) per such match_workflow; answers "
        "are cached per catalog revision and message. Without a model (APTIX_LLM_MODEL) it is "
        "off, and start-up warns once.",
    )
    tool_timeout_seconds: float = Field(
        30.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Per-tool execution time limit.",
    )
    tool_max_result_bytes: int = Field(
        1_048_576,
        gt=0,
        description="Largest result a tool may return, in bytes of JSON text; a bigger one "
        "is a failed call saying its size (an MCP server's `max_result_bytes` applies too).",
    )
    tool_threads: int = Field(
        8,
        ge=1,
        description="Threads each org's plain-function (sync) tools run in. A call left running "
        "past its time limit holds its thread until it returns; while all of an org's threads "
        "are held so, its new sync calls fail at once (503 over HTTP).",
    )
    load_plugins: bool = Field(True, description="Load tools from the aptix.tools entry points.")
    tool_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Python files or module names whose `@aptix.tool` functions and "
        "`AgentTool` classes are registered and offered in the default mode: "
        "'tools.py,pkg.tools' or a JSON list (`aptix serve --tools PATH` adds one).",
    )
    log_level: LogLevelName = Field(
        "WARNING", description="Level of the aptix logger: DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )
    log_json: bool = Field(False, description="Write logs as JSON lines.")
    otel: bool = Field(
        False,
        description="Emit OpenTelemetry traces of turns, model calls and tool calls, exported "
        "over OTLP/HTTP as the standard OTEL_* variables say (needs the 'otel' extra).",
    )
    host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="Address `aptix serve` binds to; spaces around it are dropped, and a blank "
        "one stops start-up.",
    )
    port: int = Field(8000, ge=0, le=65535, description="Port `aptix serve` listens on.")
    api_keys: SecretStr | None = Field(
        None,
        description="Bearer keys and who they are: 'key1=org:user[:role],key2=org2:user2'; "
        "role user (default), author or admin; each key once. A key ends at its entry's last "
        "'=' (so base64 padding is part of it); spaces around each part are not; org and user "
        "names are at most 200 characters. A key is visible ASCII (letters, digits and "
        "punctuation, 0x21-0x7E): one with a space, a control or any other character, which "
        "HTTP clients would not send as it is, stops start-up. Without keys the server runs "
        "as one local admin user on 127.0.0.1 only.",
    )
    max_body_bytes: int = Field(
        1_048_576,
        gt=0,
        description="Largest accepted request body; also the longest stdio line `aptix mcp` "
        "reads (a longer one is answered -32700).",
    )
    mcp_servers: dict[str, McpServerConfig] = Field(
        default_factory=dict,
        description="MCP servers whose tools are offered as `<prefix>_<tool>`: TOML tables "
        "`[mcp_servers.NAME]` or APTIX_MCP_SERVERS as JSON (command/args/env or url/headers, "
        "prefix, timeout_seconds, approval, enabled). The variable, when set, replaces the "
        "file's tables whole (`{}`: no servers).",
    )
    rate_limit: str | None = Field(
        None,
        description="Requests each API key may make, one limit in the `limits` library's "
        "notation (`60/minute`, `1000 per hour`, `5/10 seconds`; count and window > 0); beyond "
        "it 429 (default: no limit).",
    )
    max_concurrent_turns: int | None = Field(
        None, gt=0, description="Turns one org may run at once; beyond it 429 (default: no limit)."
    )
    token_budget: str | None = Field(
        None,
        description="Model tokens (prompt and completion) one org may use per window, e.g. "
        "`2000000/day` (count and window > 0); the window starts at the first use. A turn "
        "that reaches it ends with status `error` saying so, and new turns answer 429 "
        "(default: no budget).",
    )
    redis_url: SecretStr | None = Field(
        None,
        description="Redis shared by every process for the limits and the usage counts "
        "(`redis://host:6379/0`, the database a number; `rediss://` for TLS, `unix:///path/"
        "redis.sock?db=0` for a socket); without it each process counts on its own. A URL the "
        "Redis client cannot read or use (a query option it does not take, such as "
        "`?ssl_cert_reqs=` on a `redis://` URL), or a database or password Redis refuses at "
        "start, stops start-up; a Redis that does not answer is an outage (see "
        "APTIX_LIMITS_WHEN_REDIS_DOWN).",
    )
    redis_key_prefix: str = Field(
        "aptix",
        min_length=1,
        description="Prefix of every Redis key Aptix writes; spaces around it are dropped, and "
        "a blank one stops start-up.",
    )
    limits_when_redis_down: Literal["open", "closed"] = Field(
        "open",
        description="While Redis cannot be reached: `open` lets requests through unlimited, "
        "`closed` refuses them with 503 and `Retry-After` (logged once per outage either way). "
        "After a call to Redis fails, the limits do without it for 5 s, then try it again; "
        "ending a turn or a model call that began before still tries it, and a model call's "
        "hold that could not be settled then is settled once Redis answers.",
    )
    public_metrics: bool = Field(
        False, description="With API keys: serve /metrics, /docs and /openapi.json without a key."
    )
    openai_client_tools: bool = Field(
        True,
        description="`POST /v1/chat/completions`: offer the tools a client sends in `tools` to "
        "the model as client-final tools (under the workflow guard); false ignores them.",
    )

    @field_validator("llm_extra_headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if any(c in text for c in "\r\n\0") or not text.isascii():
                raise ValueError(f"the value of header {name!r} must be one line of ASCII")
        return value

    @field_validator("host", "redis_key_prefix")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Stripped: a stray space from a shell or .env file is no part of an address or a key.
        if not value.strip():
            raise ValueError("must not be empty or only spaces")
        return value.strip()

    @field_validator("llm_model")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        # Blank is no model, as unset is: a model named ' ' would count as configured.
        if value is None or not value.strip():
            return None
        return value.strip()

    @field_validator("tool_modules", mode="before")
    @classmethod
    def _modules(cls, value: object) -> object:
        if isinstance(value, str):  # from the environment: a JSON list or comma-separated
            text = value.strip()
            try:
                items = json.loads(text) if text.startswith("[") else text.split(",")
            except RecursionError:
                raise ValueError(TOO_DEEP) from None
            return [str(item).strip() for item in items if str(item).strip()]
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _check_redis_url(value.get_secret_value())
        return value

    @field_validator("rate_limit", "token_budget")
    @classmethod
    def _limit(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from limits.util import SINGLE_EXPR, parse_many

        try:
            one = len(parse_many(value)) == 1
        except ValueError:
            one = False
        if not one:
            raise ValueError(
                f"{value!r} is not one limit; write it as '<count>/<unit>', e.g. '60/minute'"
            )
        # The groups parse_many read: it takes a count of 0 as is (every request refused) and
        # a window of 0 units as 1 unit; neither is what the value says.
        found = SINGLE_EXPR.match(value)
        assert found is not None  # parse_many matched it
        count, _, multiple, _ = found.groups()
        if int(count) == 0:
            raise ValueError(f"{value!r} allows nothing; the count must be > 0, e.g. '60/minute'")
        if multiple is not None and int(multiple) == 0:
            raise ValueError(
                f"{value!r} has a window of 0; the number of units must be > 0, e.g. '5/10 minutes'"
            )
        return value.strip()

    @field_validator("llm_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip().lower().startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL such as http://localhost:11434/v1")
        # Stripped: a stray space or newline from a shell or .env file is no part of a URL.
        _check_http_url(value.strip())
        return value.strip()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then ``APTIX_*`` variables, then the optional TOML file."""
        path = os.environ.get("APTIX_CONFIG_FILE") or "aptix.toml"
        # The variables read by a source of our own, configured as env_settings is (from
        # model_config): a JSON value too deep to parse is then a SettingsError naming it.
        sources: list[PydanticBaseSettingsSource] = [init_settings, _Variables(settings_cls)]
        if Path(path).is_file():
            other = "or point APTIX_CONFIG_FILE at another file"
            try:
                toml = _TomlFile(settings_cls, toml_file=path)
            except UnusableFile as exc:
                raise ConfigurationError(
                    f"{path} {exc}.", hint=f"keep {path} a regular file of at most 1 MiB, {other}"
                ) from None
            except RecursionError:
                raise ConfigurationError(
                    f"{path} nests too deeply for Aptix to read.",
                    hint=f"fix {path}, {other}",
                ) from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigurationError(
                    f"{path} is not valid TOML ({exc}).", hint=f"fix the syntax in {path}, {other}"
                ) from None
            except UnicodeDecodeError as exc:
                raise ConfigurationError(
                    f"{path} is not valid TOML (not UTF-8 text: {exc.reason} at byte {exc.start}).",
                    hint=f"save {path} as UTF-8, {other}",
                ) from None
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot read {path} ({exc.strerror or exc}).",
                    hint=f"check the file's permissions, {other}",
                ) from None
            _refuse_unknown_keys(path, toml.toml_data, settings_cls.model_fields)
            sources.append(toml)
        elif os.environ.get("APTIX_CONFIG_FILE") and Path(path).is_dir():
            raise ConfigurationError(
                f"APTIX_CONFIG_FILE names a directory, not a file: {path}.",
                hint="point APTIX_CONFIG_FILE at a TOML file, or unset it",
            )
        elif os.environ.get("APTIX_CONFIG_FILE") and os.path.exists(path):
            raise ConfigurationError(
                f"APTIX_CONFIG_FILE names {file_kind(os.stat(path).st_mode)}, "
                f"not a regular file: {path}.",
                hint="point APTIX_CONFIG_FILE at a TOML file, or unset it",
            )
        elif os.environ.get("APTIX_CONFIG_FILE"):
            raise ConfigurationError(
                # Quoted: a name of spaces alone would read as nothing at all.
                f"APTIX_CONFIG_FILE names a file that does not exist: {str(path)!r}.",
                hint="create the file, or unset APTIX_CONFIG_FILE",
            )
        return tuple(sources)

    def api_key_map(self) -> dict[str, KeyOwner]:
        """``APTIX_API_KEYS`` parsed into key -> (org, user, role); ValueError when malformed."""
        if self.api_keys is None:
            return {}
        return parse_api_keys(self.api_keys.get_secret_value())

    @property
    def model_configured(self) -> bool:
        """True when a model endpoint is configured (``APTIX_LLM_MODEL`` at least)."""
        return bool(self.llm_model)

    @property
    def effective_database_url(self) -> str:
        """The configured database URL, or the embedded SQLite file."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'aptix.db'}"


#: ``APTIX_*`` variables that are not settings: the settings file, and the project's own
#: scripts and test harness (``APTIX_TEST_*``).
OTHER_VARIABLES = frozenset(
    {"APTIX_CONFIG_FILE", "APTIX_CI", "APTIX_VENV", "APTIX_SCHEMATHESIS_EXAMPLES"}
)
_warned: set[str] = set()


#: A host name or IPv4 address as the model client reads it (letters of any script allowed).
_HOST_NAME = re.compile(r"[\w.-]+")


def _check_http_url(url: str) -> None:
    """Raise ``ValueError`` unless the model client can open ``url`` (scheme, host, port)."""
    import httpx2

    # The check the model client's HTTP library (httpx2, under openai) makes on the first
    # request, made here so a bad URL stops start-up with one line instead of a traceback
    # mid-request. The value is shown escaped (no control characters reach the terminal) and
    # without its credentials.
    shown = mask_credentials(repr(url))
    example = "write it as http(s)://host[:port]/path, e.g. http://localhost:11434/v1"
    try:
        parsed = httpx2.URL(url)
        host, port = parsed.host, parsed.port  # the host is decoded (IDNA) only when read
    except (httpx2.InvalidURL, ValueError) as exc:
        reason = mask_credentials(str(exc).rstrip(".")) or type(exc).__name__
        raise ValueError(f"{shown} is not a valid URL ({reason}); {example}") from None
    if not host:
        raise ValueError(f"{shown} names no host; {example}")
    # httpx2 percent-encodes what a host cannot hold ('a b' reads 'a%20b'); an IPv6 address
    # (it has ':') may carry a zone id after '%'.
    if ":" not in host and not _HOST_NAME.fullmatch(host):
        raise ValueError(
            f"{shown} names the host {unquote(host)!r}, which has characters no host name has; "
            f"{example}"
        )
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"{shown} has port {port}, not one of 1-65535; {example}")


def _check_redis_url(url: str) -> None:
    """Raise ``ValueError`` unless the Redis client can read ``url`` and the database it names."""
    # Never echo the URL, nor a part of it: it may carry a password.
    example = "e.g. redis://127.0.0.1:6379/0"
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"must be a redis://, rediss:// or unix:// URL, {example}")
    try:
        if parts.port == 0:  # urllib raises on a port that is not a number up to 65535
            raise ValueError
    except ValueError:
        raise ValueError(f"has a port that is not a number from 1 to 65535; {example}") from None
    try:
        from redis.asyncio.connection import ConnectionPool
    except ImportError:
        return  # the limits then name the package to install
    # The parse the Redis client makes when the limits start, made here so a bad URL stops
    # start-up with one line instead of a traceback; and the connection it would then make
    # (without connecting), which takes only its own options: an unknown one in the query
    # (?ssl_cert_reqs= on redis://, ?timeout=) failed every later call, read as an outage.
    try:
        pool = ConnectionPool.from_url(url)
        options = pool.connection_kwargs
        pool.connection_class(**options)
    except ValueError as exc:
        raise ValueError(f"cannot be read by the Redis client ({exc}); {example}") from None
    except TypeError as exc:
        raise ValueError(_unknown_redis_option(str(exc), scheme, example)) from None
    if scheme != "unix" and unquote(parts.path).replace("/", "") and "db" not in options:
        # The client would quietly use database 0, which other programs may be using.
        raise ValueError(f"names a database that is not a number; {example}")


def _unknown_redis_option(error: str, scheme: str, example: str) -> str:
    """Why the Redis client refused the URL's options: the one it names, never a value."""
    found = re.search(r"keyword argument '([A-Za-z_]\w{0,40})'", error)
    if found is None:
        return f"has query options the Redis client does not take; {example}"
    name = found.group(1)
    tls = " (TLS options need a rediss:// URL)" if name.startswith("ssl") else ""
    return (
        f"has the query option {name!r}, which the Redis client does not take in a "
        f"{scheme}:// URL{tls}; {example}"
    )


def _nearest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" Did you mean {close[0]}?" if close else ""


class _NestedTooDeeply(ValueError):
    """A variable's JSON value nests deeper than the parser can read."""


class _Variables(EnvSettingsSource):
    """The ``APTIX_*`` variables, a JSON value nested too deeply refused as one not JSON is."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        """``value`` read as JSON; a ``ValueError`` (so a ``SettingsError``) when too deep."""
        try:
            return super().decode_complex_value(field_name, field, value)
        except RecursionError:
            raise _NestedTooDeeply(TOO_DEEP) from None


class _TomlFile(TomlConfigSettingsSource):
    """The settings file, read as every configured file is (regular, at most 1 MiB)."""

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        return tomllib.loads(read_text(Path(str(file_path))))

    def __call__(self) -> dict[str, Any]:
        """The file's values of the settings no variable (nor argument) has set."""
        # A variable replaces the file's value whole: pydantic-settings would merge a JSON
        # object into the file's table key by key, so APTIX_MCP_SERVERS='{}' turned no server
        # off and a server named in both took the file's args beside the variable's command.
        given = self.current_state
        return {key: value for key, value in super().__call__().items() if key not in given}


def _refuse_unknown_keys(path: str, data: Mapping[str, object], fields: Iterable[str]) -> None:
    """An unknown top-level key in the settings file stops start-up, naming its nearest key."""
    names = list(fields)
    for key in data:
        if key not in names:
            raise ConfigurationError(
                f"{path}: unknown setting '{key}'.{_nearest(key, names)}",
                hint="docs/settings.md lists every setting (the variable names in lower case)",
            )


def _where(loc: tuple[int | str, ...], given: Collection[str]) -> tuple[str, str | None]:
    """Where the invalid value at ``loc`` was set: its variable, or its key and the file.

    ``given`` are the settings the variables gave a value. Such a value replaces the file's
    whole (:class:`_TomlFile`), so a value under any other setting is the file's. A place
    inside a variable's JSON follows its name (``APTIX_MCP_SERVERS (time.timeout)``): no
    variable is named for it.
    """
    variable = f"APTIX_{str(loc[0]).upper()}" if loc else "APTIX_*"
    path = os.environ.get("APTIX_CONFIG_FILE") or "aptix.toml"
    if (loc and loc[0] in given) or not Path(path).is_file():
        inside = ".".join(str(p) for p in loc[1:])
        return (f"{variable} ({inside})" if inside else variable), None
    return f"{'.'.join(str(p) for p in loc)} in {path}", path


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A one-line warning for each ``APTIX_*`` variable that names no setting.

    The name is outside text: its control characters are escaped as a log line escapes them.
    """
    known = {f"APTIX_{name.upper()}" for name in AptixSettings.model_fields} | OTHER_VARIABLES
    unknown = [
        name
        for name in sorted(environ)
        if name.startswith("APTIX_") and name not in known and not name.startswith("APTIX_TEST_")
    ]
    if not unknown:
        return []
    from aptix.log_setup import escape_controls  # its libraries only when there is one

    return [
        f"{escape_controls(name)} is not an Aptix setting and is ignored.{_nearest(name, known)}"
        for name in unknown
    ]


def load_settings() -> AptixSettings:
    """Read the settings; a bad value or file is a :class:`ConfigurationError` naming it.

    Each unknown ``APTIX_*`` variable is logged once per process as a warning: other
    tools may use the prefix, so it does not stop start-up.
    """
    try:
        settings = _read_settings()
    except ConfigurationError:
        _warn_unknown_variables(None)
        raise
    _warn_unknown_variables(settings)
    return settings


def _warn_unknown_variables(settings: AptixSettings | None) -> None:
    """Log each unknown ``APTIX_*`` variable's warning once per process, in the log's format.

    Before a command sets up its log (no handler yet), Python's last resort would write the
    bare message, plain under ``APTIX_LOG_JSON``: the line is written as the log will write
    it, at its level, by the settings just read. Settings that could not be read (None) name
    no format: the bare line, as the error line after it.
    """
    log = logging.getLogger("aptix.settings")
    fresh = [warning for warning in unknown_variables(os.environ) if warning not in _warned]
    _warned.update(fresh)
    if settings is None or log.hasHandlers():
        for warning in fresh:
            log.warning("%s", warning)
        return
    if not fresh or logging.getLevelNamesMapping()[settings.log_level] > logging.WARNING:
        return
    from aptix.log_setup import JsonLinesFormatter, LogContextFilter, PlainFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(JsonLinesFormatter() if settings.log_json else PlainFormatter())
    handler.addFilter(LogContextFilter(None if settings.log_json else "-"))
    for warning in fresh:
        handler.handle(
            log.makeRecord(log.name, logging.WARNING, __file__, 0, "%s", (warning,), None)
        )


def _read_settings() -> AptixSettings:
    from pydantic import ValidationError

    try:
        return AptixSettings()
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # Read again by the source that read them (it succeeded, so it does again): a variable
        # that sets nothing (JSON null) leaves the file's value, and the blame, in place.
        given = _Variables(AptixSettings)().keys()
        places = [_where(e["loc"], given) for e in errors]
        problems = "; ".join(
            f"{name}: {e['msg']}" for (name, _), e in zip(places, errors, strict=True)
        )
        files = sorted({file for _, file in places if file is not None})
        fixes = ["the variable"] if any(file is None for _, file in places) else []
        fixes += [f"the key in {file}" for file in files]
        hint = f"fix {' and '.join(fixes)}; docs/settings.md lists them all"
        raise ConfigurationError(f"Invalid settings: {problems}.", hint=hint) from None
    except SettingsError as exc:
        # A complex value (APTIX_MCP_SERVERS) that is not JSON: name the variable, not the parser.
        found = re.search(r'field "(\w+)"', str(exc))
        name = f"APTIX_{found.group(1).upper()}" if found else "a setting"
        why = TOO_DEEP if isinstance(exc.__cause__, _NestedTooDeeply) else "not valid JSON"
        raise ConfigurationError(f"Invalid settings: {name}: {why}.", hint=SETTINGS_HINT) from None
