"""Settings read from ``APTIX_*`` environment variables (and, later, an optional TOML file)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

__all__ = ["AptixSettings", "default_data_dir", "load_settings"]


def default_data_dir() -> Path:
    """The per-user data directory where the embedded SQLite database lives."""
    return Path(platformdirs.user_data_dir("aptix", appauthor=False))


class AptixSettings(BaseSettings):
    """Everything a deployment can configure; defaults give the embedded single-user setup."""

    model_config = SettingsConfigDict(env_prefix="APTIX_", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir, description="Where local data lives.")
    database_url: str | None = Field(
        None, description="SQLAlchemy async URL; default: a SQLite file in data_dir."
    )
    llm_base_url: str | None = Field(None, description="OpenAI-compatible endpoint base URL.")
    llm_api_key: SecretStr | None = Field(None, description="API key for the model endpoint.")
    llm_model: str | None = Field(None, description="Model name to request.")
    llm_api: Literal["chat", "responses"] = Field(
        "chat", description="Chat Completions (default) or the Responses API."
    )
    llm_timeout_seconds: float = Field(60.0, gt=0, description="Time limit per model request.")
    llm_max_retries: int = Field(2, ge=0, description="Retries on 429/5xx/connection errors.")
    max_iterations: int = Field(10, ge=1, description="Model calls per turn before stopping.")
    turn_token_budget: int | None = Field(
        None, gt=0, description="Tokens per turn before stopping (default: no budget)."
    )
    modes_path: Path | None = Field(None, description="A deployment's own mode catalog (YAML).")
    workflows_path: Path | None = Field(None, description="A folder of workflow manifests.")
    semantic_matching: bool | None = Field(
        None,
        description="Blend local sentence embeddings into workflow matching "
        "(default: when the 'semantic' extra is installed).",
    )
    tool_timeout_seconds: float = Field(30.0, gt=0, description="Per-tool execution time limit.")
    load_plugins: bool = Field(True, description="Load tools from the aptix.tools entry points.")
    log_level: str = Field("WARNING", description="Level of the aptix logger.")
    log_json: bool = Field(False, description="Write logs as JSON lines.")
    host: str = Field("127.0.0.1", description="Address `aptix serve` binds to.")
    port: int = Field(8000, ge=0, le=65535, description="Port `aptix serve` listens on.")
    api_keys: SecretStr | None = Field(
        None,
        description="Bearer keys and who they are: 'key1=org:user,key2=org2:user2'. "
        "Without keys the server runs as one local user on 127.0.0.1 only.",
    )
    max_body_bytes: int = Field(1_048_576, gt=0, description="Largest accepted request body.")

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
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if Path(path).is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        elif os.environ.get("APTIX_CONFIG_FILE"):
            raise ValueError(f"APTIX_CONFIG_FILE names a file that does not exist: {path}")
        return tuple(sources)

    def api_key_map(self) -> dict[str, tuple[str, str]]:
        """``APTIX_API_KEYS`` parsed into key -> (org, user); ValueError when malformed."""
        if self.api_keys is None or not self.api_keys.get_secret_value().strip():
            return {}
        keys: dict[str, tuple[str, str]] = {}
        for index, item in enumerate(self.api_keys.get_secret_value().split(","), 1):
            key, _, who = item.strip().partition("=")
            org, _, user = who.partition(":")
            if not key or not org or not user:
                raise ValueError(f"APTIX_API_KEYS entry #{index} must look like 'key=org:user'.")
            keys[key] = (org, user)
        return keys

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


def load_settings() -> AptixSettings:
    """Read the settings; a bad value or file is a :class:`ConfigurationError` naming it."""
    from pydantic import ValidationError

    from aptix.errors import ConfigurationError

    try:
        return AptixSettings()
    except ValidationError as exc:
        problems = "; ".join(
            f"APTIX_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ConfigurationError(f"Invalid settings: {problems}.") from None
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
