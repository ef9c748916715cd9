"""Settings read from ``APTIX_*`` environment variables (and, later, an optional TOML file)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["AptixSettings", "default_data_dir"]


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
