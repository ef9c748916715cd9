"""Credentials inside URLs never leave the process.

Two places hold them: the userinfo (``scheme://user:password@host``) and the query string
(``?api-key=...``, as some gateways take the key). Both are masked wherever a URL is shown,
but for the query of a SQLite URL: it holds the file's options (``?mode=ro&uri=true``), no
secret, and ``mode=ro`` is what a failed write needs shown.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_credentials", "mask_url"]

MASK = "***"

# A URL in a text: a scheme, then anything up to a space or a quote, less a colon that ends
# a clause after it (``… at URL: reason``).
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://(?:[^\s'\"<>`:]|:(?!\s|$))+")
# The userinfo part: everything between ``scheme://`` and ``@`` that is not a path, query
# or space. A token alone (``https://token@host``) is masked too.
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://)[^/?#@]+@")
# A userinfo whose password is masked already (``user:***@``, as SQLAlchemy shows a URL): a
# text masked twice, once where it was made and once where it is logged, keeps its user.
_MASKED_USERINFO = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*://[^/?#@:]*:" + re.escape(MASK) + "@")
# Parameters whose values are settings, never secrets: shown, since a person fixing the URL
# needs to read them (``?sslmode=require`` refused by a server without TLS).
_PLAIN_PARAMETERS = frozenset(
    {"sslmode", "application_name", "connect_timeout", "target_session_attrs", "host", "port"}
)
# A SQLite URL (``sqlite://``, ``sqlite+aiosqlite://``): its query holds only the file's
# options (SQLite's URI parameters, the driver's ``timeout``); a passphrase would be userinfo.
_SQLITE_SCHEME = re.compile(r"sqlite(\+\w+)?", re.IGNORECASE)
# One query parameter's value (a bare ``?token`` counts as a value).
_QUERY_VALUE = re.compile(r"([?&;])([^=&;#]*=)?([^&;#]*)")


def mask_credentials(text: str) -> str:
    """``text`` with the userinfo and the query values of every URL in it replaced by ``***``."""
    return _URL.sub(_mask_url, text)


def mask_url(url: str, *, keep_user: bool = False) -> str:
    """``url``, known to be one whole URL, with its userinfo and query values masked.

    Unlike :func:`mask_credentials`, which must find URLs inside prose and so ends one at a
    space, quote or ``<``, this masks everything up to the URL's last ``@``: a password with
    such characters, or an unencoded ``/`` or ``?``, in a URL too malformed to parse, stays
    hidden (an ``@`` later in the path only hides more).

    With ``keep_user``, for a URL a parser wrote (its user name percent-encoded, so up to the
    first ``:``), the user name is kept, with a password or without: only the password is
    masked (``bob:***@``, ``bob@``).
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return mask_credentials(url)
    userinfo, at, after = rest.rpartition("@")
    if at and keep_user:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}{':' + MASK if colon else ''}@{after}"
    elif at and not _MASKED_USERINFO.match(f"{scheme}://{userinfo}@"):
        rest = MASK + "@" + after
    head, mark, query = f"{scheme}://{rest}".partition("?")
    if not mark:
        return head
    return f"{head}?{query}" if _SQLITE_SCHEME.fullmatch(scheme) else head + _masked_query(query)


def _mask_url(match: re.Match[str]) -> str:
    url = _USERINFO.sub(_mask_userinfo, match[0])
    head, mark, rest = url.partition("?")
    if not mark or _SQLITE_SCHEME.fullmatch(head.partition("://")[0]):
        return url
    query, hash_mark, fragment = rest.partition("#")
    return head + _masked_query(query) + hash_mark + fragment


def _masked_query(query: str) -> str:
    """``?query`` with every parameter's value masked but those that are never secrets."""
    return _QUERY_VALUE.sub(_masked_parameter, "?" + query)


def _masked_parameter(match: re.Match[str]) -> str:
    separator, name, value = match[1], match[2] or "", match[3]
    if name[:-1].lower() in _PLAIN_PARAMETERS:
        return separator + name + value
    return f"{separator}{name}{MASK if value else ''}"


def _mask_userinfo(match: re.Match[str]) -> str:
    if _MASKED_USERINFO.match(match[0]):
        return match[0]
    return f"{match.group(1)}{MASK}@"
