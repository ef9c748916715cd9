"""``aptix serve`` and ``aptix config show``."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from aptix.cli.output import fail, print_json, say, warn
from aptix.cli.runtime import check_runtime, settings_or_exit
from aptix.log_setup import configure_logging, logging_config
from aptix.loopback import is_loopback
from aptix.urls import mask_credentials, mask_url

if TYPE_CHECKING:
    import uvicorn

    from aptix.settings import AptixSettings, KeyOwner

#: uvicorn's default backlog.
BACKLOG = 2048

config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)


def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default APTIX_HOST).")] = None,
    port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="Port (default APTIX_PORT, 8000)."),
    ] = None,
    reload: Annotated[
        bool, typer.Option(metavar="", help="Restart when the code changes (development).")
    ] = False,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo/--no-demo",
            metavar="",
            help="Answer with the built-in offline demo model (APTIX_LLM_MODEL=demo).",
        ),
    ] = False,
    tools: Annotated[
        list[Path] | None,
        typer.Option(
            "--tools",
            metavar="<file>",
            help="A Python file whose @aptix.tool functions and AgentTool classes are served "
            "(repeatable; adds to APTIX_TOOL_MODULES).",
        ),
    ] = None,
) -> None:
    """Start the HTTP API (and MCP at /mcp) on the embedded default or the configured database."""
    from aptix.llm.demo import use_demo_model

    if demo:  # through the environment, which the app factory (and --reload's child) reads
        use_demo_model()
    settings = settings_or_exit()
    if tools:  # through the environment too: the app factory builds its own settings
        paths = [str(p.expanduser().resolve()) for p in tools]
        os.environ["APTIX_TOOL_MODULES"] = json.dumps([*settings.tool_modules, *paths])
        settings = settings_or_exit()
    # Before anything else can fail: with APTIX_LOG_JSON the line saying why start-up stopped
    # is JSON too (the settings themselves must be read first to know that).
    configure_logging(settings.log_level, json_lines=settings.log_json)
    keys = _keys_or_exit(settings)
    bind = host or settings.host
    if not keys and not is_loopback(bind):
        fail(
            f"Refusing to serve on {bind} without APTIX_API_KEYS: with no keys every caller "
            "is the single local user — set APTIX_API_KEYS, or bind 127.0.0.1.",
            code=2,
        )
    listen_port = port if port is not None else settings.port
    # Bound first: a port in use (another program, a second `aptix serve`) is one line at
    # once, not uvicorn's log lines after a banner naming an address another program answers.
    listener = _bound(bind, listen_port)
    with listener:
        _serve(settings, listener, keys=bool(keys), reload=reload)


def _serve(settings: AptixSettings, listener: socket.socket, *, keys: bool, reload: bool) -> None:
    """Check the runtime, announce the address bound, and serve on ``listener``."""
    import uvicorn

    from aptix.cli.stopping_server import GRACEFUL_SECONDS, StoppingServer
    from aptix.llm.demo import is_demo

    # Everything the app opens at start-up is opened once here first, so that a bad
    # database URL, catalog or manifest is one line before "Aptix API on ..." is printed.
    check_runtime(settings)
    notice = _notices(settings)
    if not keys:
        notice("No APTIX_API_KEYS set: serving one local user (org 'local'), on loopback only.")
    if is_demo(settings.llm_model, settings.llm_base_url):
        notice(
            "Using the built-in demo model: offline and rule-based, not a language model "
            "(set APTIX_LLM_MODEL and APTIX_LLM_BASE_URL for a real one)."
        )
    elif not settings.model_configured:
        notice(
            "No model configured (APTIX_LLM_MODEL): /v1/agent/execute answers 503; "
            "every other route works."
        )
    # Listening from the banner on: a request sent at once waits for the app, not refused.
    listen(listener)
    host, listen_port = _shown_address(listener)
    notice(
        f"Aptix API on http://{host}:{listen_port} (console at /console, OpenAPI at /docs). "
        "Ctrl-C stops.",
        logging.INFO,
    )
    options: dict[str, Any] = {
        "factory": True,
        "host": listener.getsockname()[0],
        "port": listen_port,
        # One configuration for aptix's and uvicorn's loggers: the same format (JSON lines
        # with APTIX_LOG_JSON), request ids on every line, an access line per request.
        "log_config": logging_config(settings.log_level, json_lines=settings.log_json),
        "timeout_graceful_shutdown": GRACEFUL_SECONDS,
    }
    if reload:  # the reloader binds in this process and hands the socket to each child
        listener.close()
        _reload(uvicorn.Config("aptix.api.app:create_app", reload=True, **options))
        return
    server = StoppingServer(uvicorn.Config("aptix.api.app:create_app", **options))
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[listener])
    except SystemExit:
        if server.started:
            raise
        # uvicorn exits 3 when the app cannot start: said below, with the code it deserves.
    if not server.started:
        from aptix.api.app import STARTUP_REFUSALS

        # A configuration error found as the app started exits as one found before it did;
        # anything else (logged above) is a command that could not finish, as the README's
        # exit codes say: 3, uvicorn's own, is not one of them.
        raise typer.Exit(2 if STARTUP_REFUSALS else 1)


def _bound(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (as uvicorn binds one); if it cannot be, one line.

    Exit code 2, as for a configuration error: what to change is ``--port``/``APTIX_PORT``
    or ``--host``/``APTIX_HOST`` (or the program already listening there).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # As uvicorn: a port left in TIME_WAIT by a server just stopped can be bound again.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        _unusable(host, port, exc)
    # Not inheritable (unlike uvicorn's): every process the server starts, a stdio MCP server
    # among them, would hold the port, and a restart after a kill -9 would find it in use.
    return sock


def _reload(config: uvicorn.Config) -> None:
    """Serve as ``uvicorn.run`` does with ``reload``; its children keep the socket to themselves."""
    from uvicorn.supervisors import ChangeReload

    from aptix.cli.reloaded_server import ReloadedServer

    # uvicorn binds an inheritable socket here for its children; ReloadedServer, run in each,
    # makes it non-inheritable there, so the processes they start do not get it.
    sock = config.bind_socket()
    with contextlib.suppress(KeyboardInterrupt):
        ChangeReload(config, target=ReloadedServer(config).run, sockets=[sock]).run()


def listen(listener: socket.socket) -> None:
    """Listen on ``listener``; if the port was taken meanwhile, one line and exit code 2.

    Two sockets may bind one port until either listens (``SO_REUSEADDR``), so a second serve
    started at the same moment as another learns that the port is taken only here.
    """
    try:
        listener.listen(BACKLOG)
    except OSError as exc:
        host, port = listener.getsockname()[:2]
        listener.close()
        _unusable(host, port, exc)


def _unusable(host: str, port: int, exc: OSError) -> NoReturn:
    """Say in one line why ``host``:``port`` cannot be served on, and exit 2."""
    if exc.errno == errno.EADDRINUSE:
        fail(
            f"Port {port} on {host} is in use (another program, or another aptix serve, "
            "listens there) — stop it, or choose another port with --port or APTIX_PORT",
            code=2,
        )
    fail(
        f"Cannot listen on {host} port {port}: {exc.strerror or exc} — choose another "
        "address with --host or APTIX_HOST, or another port with --port or APTIX_PORT",
        code=2,
    )


def _shown_address(listener: socket.socket) -> tuple[str, int]:
    """The host and port a browser reaches ``listener`` at (the port chosen for port 0)."""
    host, port = listener.getsockname()[:2]
    return (f"[{host}]" if ":" in host else host), port


def _keys_or_exit(settings: AptixSettings) -> dict[str, KeyOwner]:
    """``APTIX_API_KEYS`` parsed; a malformed list ends the command (serve and config show)."""
    try:
        return settings.api_key_map()
    except ValueError as exc:
        fail(f"{exc} — fix APTIX_API_KEYS, or unset it for one local user", code=2)


def _notices(settings: AptixSettings) -> Callable[..., None]:
    """Print start-up notices on stderr: as log lines with APTIX_LOG_JSON, so all is JSON."""
    if not settings.log_json:
        return lambda message, level=logging.WARNING: warn(message)
    log = logging.getLogger("aptix.serve")
    return lambda message, level=logging.WARNING: log.log(level, "%s", message)


#: What ``aptix config show`` prints in place of a secret value.
_HIDDEN = "********"


def _masked_mcp_server(server: dict[str, Any]) -> dict[str, Any]:
    """One ``mcp_servers`` entry as ``config show`` prints it: its credentials masked.

    Header and ``env`` values carry tokens (``Authorization: Bearer ...``, ``GITHUB_TOKEN``),
    as ``llm_extra_headers`` do; a URL, the server's own or one among ``args``, has its
    userinfo and query values masked as every URL Aptix shows.
    """
    masked = dict(server)
    masked["headers"] = dict.fromkeys(server.get("headers") or {}, _HIDDEN)
    if server.get("env") is not None:
        masked["env"] = dict.fromkeys(server["env"], _HIDDEN)
    if server.get("url"):
        masked["url"] = mask_url(server["url"])
    masked["args"] = [mask_credentials(arg) for arg in server.get("args") or ()]
    return masked


@config_app.command("show")
def show(
    as_json: Annotated[
        bool, typer.Option("--json/--no-json", metavar="", help="Print JSON.")
    ] = False,
) -> None:
    """Print the effective settings, secrets masked; API keys that serve refuses fail here too."""
    from aptix.db.engine import shown_url

    settings = settings_or_exit()
    _keys_or_exit(settings)
    values: dict[str, Any] = settings.model_dump(mode="json")
    for secret in ("llm_api_key", "api_keys"):
        if values.get(secret):
            values[secret] = _HIDDEN
    # Extra headers usually carry credentials (Azure's api-key, a gateway token).
    values["llm_extra_headers"] = dict.fromkeys(values.get("llm_extra_headers") or {}, _HIDDEN)
    values["effective_database_url"] = shown_url(settings.effective_database_url)
    if values.get("database_url"):
        values["database_url"] = shown_url(values["database_url"])
    if values.get("llm_base_url"):
        values["llm_base_url"] = mask_credentials(values["llm_base_url"])
    values["mcp_servers"] = {
        name: _masked_mcp_server(server)
        for name, server in (values.get("mcp_servers") or {}).items()
    }
    if as_json:
        print_json(values)
        return
    for key, value in values.items():
        say((key, "bold"), f" = {value}")
