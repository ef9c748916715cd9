"""Credentials inside URLs (``scheme://user:password@host``) never leave the process."""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_credentials"]

MASK = "***"

# The userinfo part of any URL in a text: everything between ``scheme://`` and ``@`` that
# is not a path, query or space. A token alone (``https://token@host``) is masked too.
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/?#@\s]+@")


def mask_credentials(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced by ``***``."""
    return _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
