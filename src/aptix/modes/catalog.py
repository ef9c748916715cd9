"""The mode catalog: loaded from YAML, validated at start-up, read by tools and the reasoner."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from aptix.config_files import UnusableFile, parse_yaml, read_text
from aptix.errors import ConfigurationError, NotFoundError
from aptix.modes.models import ModeDefinition
from aptix.tool_names import is_known, is_pattern, matches

__all__ = [
    "ALWAYS_OFFERED_TOOLS",
    "BUILTIN_CATALOG",
    "MAX_MODE_KEY",
    "ModeCatalog",
    "YamlModeCatalog",
    "check_mode_tools",
    "load_mode_catalog",
]

#: Offered in every mode so the model can never get stuck (TUL-007 §3.1, DESIGN §5).
ALWAYS_OFFERED_TOOLS = ("agent_change_mode", "agent_list_modes", "agent_workflow_registry")

BUILTIN_CATALOG = "built-in catalog aptix/modes/catalog.yaml"

#: Longest mode key: ``sessions.mode`` and ``mode_history.mode`` are ``VARCHAR(100)``, which
#: PostgreSQL enforces (SQLite does not), so a longer key is refused when the catalog loads
#: rather than failing the first session that enters the mode.
MAX_MODE_KEY = 100


class ModeCatalog(Protocol):
    """Read access to the configured modes (the seeds' ``IAgentModeCatalogService``)."""

    async def get_all_modes(self) -> list[ModeDefinition]:
        """Every mode, in catalog order."""
        ...

    def get_mode(self, key: str) -> ModeDefinition:
        """The mode with ``key``; :class:`NotFoundError` naming the valid keys otherwise."""
        ...

    def tools_for_mode(self, key: str) -> list[str]:
        """The tools offered in mode ``key``, always-offered tools included."""
        ...

    @property
    def default_mode(self) -> ModeDefinition:
        """The one mode marked ``isDefault``."""
        ...

    @property
    def keys(self) -> tuple[str, ...]:
        """Every mode key, in catalog order."""
        ...


class YamlModeCatalog:
    """A validated catalog built from one YAML document.

    Its modes never change; at start-up :meth:`offer` adds the tools that come from outside
    the catalog (tool files, MCP servers) to the modes that offer them.
    """

    def __init__(self, modes: Iterable[ModeDefinition], source: str) -> None:
        self._modes = {m.key: m for m in modes}
        self.source = source
        self._default = next(m for m in self._modes.values() if m.is_default)
        self._offered: dict[str, list[str]] = {}

    def offer(
        self, tools: Iterable[str], modes: Iterable[str] | None = None, *, source: str
    ) -> None:
        """Offer ``tools`` (names or ``<prefix>_*`` patterns) in ``modes`` (None: the default).

        An unknown mode key is a :class:`ConfigurationError` naming ``source``.
        """
        keys = [self._default.key] if modes is None else list(modes)
        unknown = [k for k in keys if k not in self._modes]
        if unknown:
            raise ConfigurationError(
                f"{source} names unknown mode(s) {', '.join(unknown)}; the modes are "
                f"{', '.join(self._modes)}.",
                hint="list mode keys from the catalog (aptix modes list)",
            )
        for key in keys:
            extra = self._offered.setdefault(key, [])
            extra.extend(t for t in tools if t not in extra)

    async def get_all_modes(self) -> list[ModeDefinition]:
        """Every mode, in catalog order."""
        return list(self._modes.values())

    @property
    def modes(self) -> tuple[ModeDefinition, ...]:
        """Every mode, in catalog order (synchronous access)."""
        return tuple(self._modes.values())

    def get_mode(self, key: str) -> ModeDefinition:
        """The mode with ``key``, or :class:`NotFoundError` naming the valid keys."""
        mode = self._modes.get(key)
        if mode is None:
            raise NotFoundError(unknown_mode_message(key, self.keys))
        return mode

    def tools_for_mode(self, key: str) -> list[str]:
        """The mode's tools, those :meth:`offer` added, then the always-offered ones."""
        tools = list(self.get_mode(key).tools)
        tools += [t for t in self._offered.get(key, ()) if t not in tools]
        return tools + [t for t in ALWAYS_OFFERED_TOOLS if t not in tools]

    @property
    def default_mode(self) -> ModeDefinition:
        """The default mode."""
        return self._default

    @property
    def keys(self) -> tuple[str, ...]:
        """Every mode key, in catalog order."""
        return tuple(self._modes)


def unknown_mode_message(key: str, valid: Iterable[str]) -> str:
    """The message for a mode key that is not in the catalog."""
    return f"Unknown mode '{key}'. Valid modes: {', '.join(valid)}."


def load_mode_catalog(
    path: Path | None = None, *, registered_tools: Iterable[str] | None = None
) -> YamlModeCatalog:
    """Load and validate a catalog (the built-in one when ``path`` is None).

    Raises :class:`ConfigurationError` naming the file and the mode on: malformed YAML, a
    field that fails validation, no default or several, duplicate ids or keys, and (when
    ``registered_tools`` is given) a listed tool that is not registered.
    """
    if path is None:
        source, text = BUILTIN_CATALOG, (files("aptix.modes") / "catalog.yaml").read_text("utf-8")
    else:
        source = str(path)
        try:
            text = read_text(Path(path))
        except UnusableFile as exc:
            raise ConfigurationError(
                f"Mode catalog {source}: {exc}.",
                hint="point APTIX_MODES_PATH at a YAML file, or unset it for the built-in modes",
            ) from None
        except OSError as exc:
            raise ConfigurationError(
                f"Mode catalog {source}: cannot read the file ({exc}).",
                hint="check APTIX_MODES_PATH, or unset it for the built-in modes",
            ) from exc
        except UnicodeDecodeError as exc:
            raise ConfigurationError(
                f"Mode catalog {source}: not UTF-8 text ({exc.reason} at byte {exc.start}).",
                hint="save it as UTF-8, or unset APTIX_MODES_PATH for the built-in modes",
            ) from None
    try:
        modes = _parse(text, source)
        _check_catalog(modes, source)
    except ConfigurationError as exc:
        exc.hint = exc.hint or f"fix {source}, or unset APTIX_MODES_PATH for the built-in modes"
        raise
    catalog = YamlModeCatalog(modes, source)
    if registered_tools is not None:
        check_mode_tools(catalog, registered_tools)
    return catalog


def check_mode_tools(catalog: YamlModeCatalog, registered_tools: Iterable[str]) -> None:
    """Refuse a catalog whose modes list tools that are not registered."""
    registered = set(registered_tools)
    for mode in catalog.modes:
        unknown = [t for t in mode.tools if t not in registered and not is_known(t, registered)]
        if unknown:
            # A name under a server's <prefix>_* is unknown only once that server listed its
            # tools (is_known): it does not have that one.
            servers = sorted(p for p in registered if is_pattern(p) and _covers(p, unknown))
            raise ConfigurationError(
                f"Mode catalog {catalog.source}, mode '{mode.key}': unknown tool(s) "
                f"{', '.join(unknown)} (registered: {', '.join(sorted(registered))}).",
                hint=f"the MCP server of {', '.join(servers)} does not list it: name its tools "
                "as `aptix tools list` shows them, or all of them with the pattern"
                if servers
                else "list only registered tools, or install the plugin that provides them",
            )


def _covers(pattern: str, names: Iterable[str]) -> bool:
    return any(matches(name, pattern) for name in names)


def _parse(text: str, source: str) -> list[ModeDefinition]:
    try:
        document: Any = parse_yaml(text)
    except UnusableFile as exc:
        raise ConfigurationError(f"Mode catalog {source}: {exc}.") from None
    if not isinstance(document, dict) or not isinstance(document.get("modes"), list):
        raise ConfigurationError(
            f"Mode catalog {source}: expected a top-level 'modes' key holding a list of modes."
        )
    modes: list[ModeDefinition] = []
    for index, raw in enumerate(document["modes"]):
        label = f"mode #{index + 1}"
        if isinstance(raw, dict) and isinstance(raw.get("key"), str):
            label += f" '{raw['key']}'"
        try:
            modes.append(ModeDefinition.model_validate(raw))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise ConfigurationError(f"Mode catalog {source}, {label}: {problems}.") from None
    return modes


def _check_catalog(modes: list[ModeDefinition], source: str) -> None:
    if not modes:
        raise ConfigurationError(f"Mode catalog {source}: it defines no modes.")
    defaults = [m.key for m in modes if m.is_default]
    if len(defaults) != 1:
        found = ", ".join(defaults) if defaults else "none"
        raise ConfigurationError(
            f"Mode catalog {source}: exactly one mode must have isDefault: true (found: {found})."
        )
    seen_ids: dict[str, str] = {}
    seen_keys: set[str] = set()
    for mode in modes:
        if len(mode.key) > MAX_MODE_KEY:
            raise ConfigurationError(
                f"Mode catalog {source}, mode '{mode.key[:40]}...': the key is "
                f"{len(mode.key)} characters long; the most is {MAX_MODE_KEY}."
            )
        if mode.key in seen_keys:
            raise ConfigurationError(f"Mode catalog {source}: duplicate mode key '{mode.key}'.")
        seen_keys.add(mode.key)
        if mode.id in seen_ids:
            raise ConfigurationError(
                f"Mode catalog {source}, mode '{mode.key}': id {mode.id} is already used by "
                f"mode '{seen_ids[mode.id]}'."
            )
        seen_ids[mode.id] = mode.key
