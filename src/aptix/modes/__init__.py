"""Modes as data: a validated YAML catalog and the service the tools and reasoner read."""

from aptix.modes.catalog import (
    ALWAYS_OFFERED_TOOLS,
    ModeCatalog,
    YamlModeCatalog,
    load_mode_catalog,
)
from aptix.modes.models import ModeDefinition

__all__ = [
    "ALWAYS_OFFERED_TOOLS",
    "ModeCatalog",
    "ModeDefinition",
    "YamlModeCatalog",
    "load_mode_catalog",
]
