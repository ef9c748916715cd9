"""One ``[mcp_servers.NAME]`` entry of the settings (read by tools/mcp_source/)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ApprovalPolicy", "McpServerConfig", "tool_prefix"]

ApprovalPolicy = Literal["never", "destructive", "always"]

_OUTSIDE_NAME = re.compile(r"[^a-zA-Z0-9_-]")


class McpServerConfig(BaseModel):
    """How to reach one MCP server and how its tools are governed."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    command: str | None = Field(None, description="Executable of a stdio server.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] | None = Field(None, description="Extra environment variables.")
    cwd: str | None = Field(None, description="Working directory of the stdio server.")
    url: str | None = Field(None, description="Endpoint of a streamable HTTP server.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers to send.")
    prefix: str | None = Field(None, description="Tool name prefix (default: the server name).")
    timeout_seconds: float = Field(30.0, gt=0, le=3600, description="Limit per connect or call.")
    approval: ApprovalPolicy = Field(
        "destructive", description="Which calls the user approves first."
    )
    enabled: bool = Field(True, description="False leaves the server out.")
    modes: list[str] | None = Field(
        None,
        description="Keys of the modes that offer the server's tools (default: the default "
        "mode). Approval applies in every mode.",
    )
    max_result_bytes: int = Field(
        1_048_576, gt=0, description="Largest tool result accepted from the server."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if self.command and self.url:
            raise ValueError("give either 'command' (stdio) or 'url' (streamable HTTP), not both")
        if not self.command and not self.url:
            raise ValueError("give 'command' (a stdio server) or 'url' (a streamable HTTP server)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError("'url' must start with http:// or https://")
        return self

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command else "http"


def tool_prefix(name: str, config: McpServerConfig) -> str:
    """The prefix of the server's tool names, with characters outside the pattern replaced."""
    return _OUTSIDE_NAME.sub("_", config.prefix if config.prefix is not None else name)


def local_tool_name(prefix: str, remote: str) -> str:
    """``<prefix>_<tool>``, characters outside ``[a-zA-Z0-9_-]`` replaced by ``_``."""
    return _OUTSIDE_NAME.sub("_", f"{prefix}_{remote}")
