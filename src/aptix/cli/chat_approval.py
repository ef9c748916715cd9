"""How ``aptix chat`` lays out an approval question, so that it names what it approves.

Escaping is not enough here: a run of 2,000 plain spaces in an argument wraps the text after
it to column 0, where it can draw a fake ``approval needed:`` header for another tool right
above the question, and push the real header off the screen. So:

- the request's text (its prompt, an MCP call's arguments, the model's details) is folded with
  an indent, so none of it starts at column 0, where the chat's own labels are;
- a run of :data:`WHITESPACE_RUN` or more whitespace characters is shown as its length,
  ``⟨2,100 spaces⟩``;
- the arguments (or details) show their first :data:`APPROVAL_LINES` rows, as the screen
  wraps them, and say how many more there are (``s`` shows them all);
- after them, the header is said again on the rows right before ``approve? [y/n]``, so the
  question on screen is always under the real tool's name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from aptix.cli.output import Part, folded, inert, say, say_rows

__all__ = ["APPROVAL_LINES", "WHITESPACE_RUN", "ApprovalQuestion"]

#: How many rows of the arguments (or details) are shown before the question.
APPROVAL_LINES = 12
#: A run of this many whitespace characters or more is shown as its length.
WHITESPACE_RUN = 16
#: At most this many rows of the header are said again before the question.
_RESTATED_ROWS = 3
#: JSON indentation (nesting) shorter than this is kept as it is.
_KEPT_INDENT = 32
_LABEL = ("approval needed:", "bold magenta")
_RUN = re.compile(rf"[^\S\n]{{{WHITESPACE_RUN},}}")


@dataclass
class ApprovalQuestion:
    """One approval request as the chat shows it: header, arguments or details, question."""

    prompt: str
    #: An MCP call's arguments as indented JSON, the model's details, or nothing.
    body: str | None
    arguments: bool

    @classmethod
    def of(cls, request: dict[str, Any]) -> ApprovalQuestion:
        """The question for ``request`` (an ``approval_request`` tool result)."""
        prompt = str(request.get("prompt") or "")
        if "arguments" in request:
            # `details` is cut at 2,000 characters, and what hides past the cut (`; rm -rf /`)
            # is what the person approves: the arguments are shown, and all of them on request.
            body = json.dumps(request["arguments"], indent=2, ensure_ascii=False)
            return cls(prompt, body, arguments=True)
        details = request.get("details")
        return cls(prompt, str(details) if details else None, arguments=False)

    def show(self) -> int:
        """Print the header and the first rows of the body; how many rows are left unshown."""
        say_rows(self._header())
        rows = self._body()
        if not rows:
            return 0
        if self.arguments:
            say(("  arguments:", "bold"))
        say_rows(rows[:APPROVAL_LINES])
        hidden = len(rows) - APPROVAL_LINES
        if hidden > 0:
            say((f"  … {hidden:,} more lines not shown; answer s to show them all.", "yellow"))
        return max(hidden, 0)

    def show_all(self) -> None:
        """Print the whole body (the answer ``s``)."""
        if self.arguments:
            say(("  arguments, in full:", "bold"))
        say_rows(self._body())

    def restate(self) -> None:
        """Say the header again, right before the question, when a body came between."""
        if not self.body:
            return
        rows = self._header()
        if len(rows) > _RESTATED_ROWS:
            rows = rows[:_RESTATED_ROWS]
            more = inert("…")  # "..." on a terminal that is not UTF-8
            rows[-1] = rows[-1][: len(rows[-1]) - len(more)] + Text(more)
        say_rows(rows)

    def _header(self) -> list[Text]:
        # Each line of the prompt under the label's indent: a newline (in a hostile MCP tool
        # name too) never starts a row at column 0.
        indent = len(_LABEL[0]) + 1
        rows: list[Text] = []
        for line in inert(self.prompt).split("\n"):
            label = "" if rows else _LABEL
            rows.extend(folded(*_runs_shown(line), indent=indent, label=label))
        return rows

    def _body(self) -> list[Text]:
        if not self.body:
            return []
        indent = 4 if self.arguments else 2
        rows: list[Text] = []
        for line in inert(self.body).split("\n"):
            rows.extend(folded(*_runs_shown(line), indent=indent))
        return rows


def _runs_shown(text: str) -> list[Part]:
    """``text`` with each long run of whitespace shown as its length (JSON's indent kept)."""
    start = len(text) - len(text.lstrip(" "))
    parts: list[Part] = [text[:start]] if start < _KEPT_INDENT else []
    end = start if start < _KEPT_INDENT else 0
    for run in _RUN.finditer(text, end):
        parts.append(text[end : run.start()])
        kind = "spaces" if not run.group().strip(" ") else "whitespace characters"
        parts.append((f"⟨{len(run.group()):,} {kind}⟩", "yellow"))
        end = run.end()
    parts.append(text[end:])
    return parts
