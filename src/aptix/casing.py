"""Wire casing: we emit camelCase and accept camelCase, PascalCase and snake_case (DESIGN §2)."""

from __future__ import annotations

from pydantic import AliasChoices
from pydantic.alias_generators import to_camel, to_pascal

__all__ = ["any_case"]


def any_case(name: str) -> AliasChoices:
    """The aliases a field accepts: ``workflowId``, ``WorkflowId`` and ``workflow_id``."""
    return AliasChoices(to_camel(name), to_pascal(name), name)
