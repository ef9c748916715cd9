"""Limits and usage: requests per key, concurrent turns and model tokens per org.

``Quotas`` counts (through the ``limits`` library, in Redis or in memory), ``MeteredModel``
applies the token budget around the model, ``UsageMeter`` keeps the tokens each key spent.
"""

from aptix.quotas.limiter import Quotas
from aptix.quotas.metered import (
    PAYER,
    LimitsUnavailableError,
    MeteredModel,
    Payer,
    TokenBudgetError,
)
from aptix.quotas.refusal import Refusal
from aptix.quotas.usage import UsageMeter

__all__ = [
    "PAYER",
    "LimitsUnavailableError",
    "MeteredModel",
    "Payer",
    "Quotas",
    "Refusal",
    "TokenBudgetError",
    "UsageMeter",
]
