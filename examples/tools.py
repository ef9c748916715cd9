"""Tools in a plain file: ``aptix serve --tools examples/tools.py`` serves them.

Every ``@aptix.tool`` function (and every ``AgentTool`` subclass) defined here is registered
with the same contract checks as a packaged plugin and offered in the default mode. No
package, no entry point.
"""

from __future__ import annotations

from pydantic import BaseModel

import aptix


class WordCount(BaseModel):
    """How long a text is."""

    words: int
    characters: int


@aptix.tool(usage="Call this when the user asks how many words or characters a text has.")
async def word_count(text: str) -> WordCount:
    """Count the words and characters of a text.

    Args:
        text: The text to measure.

    """
    return WordCount(words=len(text.split()), characters=len(text))


@aptix.tool(usage="Call this when the user asks to turn a text into a URL slug.")
async def slugify(text: str) -> str:
    """A lower-case, hyphen-separated slug of a text.

    Args:
        text: The text to turn into a slug, e.g. a title.

    """
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    if not words:
        raise aptix.ToolError("The text has no letters or digits to make a slug of.")
    return "-".join(words)
