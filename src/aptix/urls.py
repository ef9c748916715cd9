"""Credentials inside URLs never leave the process.

Two places hold them: the userinfo (``scheme://user:password@host``) and the query string
(``?api-key=...``, as some gateways take the key). Both are masked wherever a URL is shown.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_credentials"]

MASK = "***"

# A URL in a text: a scheme, then anything up to a space or a quote.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")
# The userinfo part: everything between ``scheme://`` and ``@`` that is not a path, query
# or space. A token alone (``https://token@host``) is masked too.
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://)[^/?#@]+@")
# A userinfo whose password is masked already (``user:***@``, as SQLAlchemy shows a URL): a
# text masked twice, once where it was made and once where it is logged, keeps its user.
_MASKED_USERINFO = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*://[^/?#@:]*:" + re.escape(MASK) + "@")
# One query parameter's value (a bare ``?token`` counts as a value).
_QUERY_VALUE = re.compile(r"([?&;])([^=&;#]*=)?([^&;#]*)")


def mask_credentials(text: str) -> str:
    """``text`` with the userinfo and the query values of every URL in it replaced by ``***``."""
    return _URL.sub(_mask_url, text)


def _mask_url(match: re.Match[str]) -> str:
    url = _USERINFO.sub(_mask_userinfo, match[0])
    head, mark, rest = url.partition("?")
    if not mark:
        return url
    query, hash_mark, fragment = rest.partition("#")
    masked = _QUERY_VALUE.sub(lambda m: f"{m[1]}{m[2] or ''}{MASK if m[3] else ''}", "?" + query)
    return head + masked + hash_mark + fragment


def _mask_userinfo(match: re.Match[str]) -> str:
    if _MASKED_USERINFO.match(match[0]):
        return match[0]
    return f"{match.group(1)}{MASK}@"
