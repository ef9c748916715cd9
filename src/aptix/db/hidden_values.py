"""No statement parameter reaches a log: not even inside a driver's error message.

``hide_parameters=True`` keeps SQLAlchemy's own ``[parameters: ...]`` out of its errors, but
asyncpg words a value it cannot encode into its message (``invalid input for query argument
$2: 'the model's text...'``), and a logged traceback shows every exception of the chain.
"""

from __future__ import annotations

import re

from sqlalchemy import event
from sqlalchemy.engine import Engine, ExceptionContext

__all__ = ["hide_values_in_errors"]

# asyncpg: f"invalid input for query argument {pos}: {value_repr} ({encoder error})".
_ARGUMENT = re.compile(
    r"(invalid input for query argument \$\d+)"
    r"(?: in element #\d+ of executemany\(\) sequence)?: .*",
    re.DOTALL,
)


def hide_values_in_errors(engine: Engine) -> None:
    """Strip bound values from the messages of every error ``engine`` raises."""
    event.listen(engine, "handle_error", _hide)


def _hide(context: ExceptionContext) -> None:
    # The wrapper is not chained to the driver's error yet: each chain is walked on its own.
    seen: set[int] = set()
    for start in (context.sqlalchemy_exception, context.original_exception):
        _hide_in_chain(start, seen)


def _hide_in_chain(error: BaseException | None, seen: set[int]) -> None:
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if error.args and isinstance(error.args[0], str) and _ARGUMENT.search(error.args[0]):
            hidden = _ARGUMENT.sub(r"\1: (value hidden)", error.args[0])
            error.args = (hidden, *error.args[1:])
        error = error.__cause__ or error.__context__
