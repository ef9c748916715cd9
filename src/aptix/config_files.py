"""Reading the files a deployment names: mode catalogs, workflow files, the settings file.

A configured path is read only when it is a regular file (after resolving symlinks) of at most
:data:`MAX_FILE_BYTES`: a FIFO would block start-up and ``/dev/zero`` would never end. YAML is
read strictly: a key given twice is refused (the last one would win unseen), nesting is
bounded, and what the anchors and aliases expand to is held to the same size as the file, so a
small file cannot make megabytes of copies ("billion laughs").
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_YAML_DEPTH",
    "UnusableFile",
    "file_kind",
    "parse_yaml",
    "read_text",
]

#: The largest configured file read (1 MiB), and the most text its YAML aliases expand to.
MAX_FILE_BYTES = 1_048_576
#: The deepest YAML nesting read; a workflow or mode catalog needs 3 or 4 levels.
MAX_YAML_DEPTH = 50


class UnusableFile(ValueError):
    """A configured file that is not used; its text completes a sentence naming the file."""


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` is, as a sentence says it ("a FIFO (named pipe)")."""
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``.

    Raises :class:`UnusableFile` for anything else or a file over ``limit`` bytes, and
    ``OSError``/``UnicodeDecodeError`` as reading does.
    """
    # Non-blocking: opening a FIFO for reading would otherwise wait for a writer.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = file_kind(mode)
        if kind != "not a regular file":
            kind += ", not a regular file"
        target = os.path.realpath(path)
        link = f" (it resolves to {target})" if target != os.path.abspath(path) else ""
        raise UnusableFile(f"is {kind}{link}")
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise UnusableFile(f"is larger than {limit:,} bytes, the most a configured file may be")
    return data.decode("utf-8")


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses repeated keys and bounds nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise UnusableFile(
                    f"nests more than {MAX_YAML_DEPTH} levels deep (line {mark.line + 1}, "
                    f"column {mark.column + 1}), deeper than Aptix reads"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<" merges another mapping; its keys may be overridden here
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the construction below says why
            if first is not None:
                raise ConstructorError(
                    None, None, f"the key '{key}' is given twice, on lines {first} and {line}", None
                )
            seen[key] = line
        return super().construct_mapping(node, deep)


def _expanded_size(root: Node, limit: int) -> int:
    """The characters and nodes ``root`` stands for once every alias is expanded.

    Stops counting past ``limit``. An alias shares its anchor's node, so each node is
    measured once; a node that contains itself raises :class:`UnusableFile`.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            open_nodes.discard(key)
            if sizes[key] > limit:
                return sizes[key]
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise UnusableFile(
                "holds an alias inside the node it refers to (a recursive structure, line "
                f"{node.start_mark.line + 1}), which Aptix does not read"
            )
        if isinstance(node, ScalarNode):
            sizes[key] = 1 + len(node.value)
            continue
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """PyYAML's error on one line: where, then what.

    Its own layout quotes the text over several lines, which a one-line diagnostic would show
    as line-break pictures.
    """
    if isinstance(exc, ReaderError) and isinstance(exc.character, int):
        # PyYAML tells this one by offset in "<unicode string>"; a reader looks for a line.
        mark = _mark_at(text, exc.position)
        return f"{_at(mark)}: unacceptable character #x{exc.character:04x}: {exc.reason}"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        problem = f"{_at(exc.problem_mark)}: {exc.problem}"
        started = exc.context_mark
        if exc.context and started is not None and _at(started) != _at(exc.problem_mark):
            # Where the parser gave up can be the file's end; what it read from is the mistake.
            return f"{_at(started)}: {exc.context}; {problem}"
        return f"{_at(exc.problem_mark)}: {exc.context}, {exc.problem}" if exc.context else problem
    return " ".join(str(exc).split())


#: A line break as PyYAML counts lines: CR LF is one, and CR, NEL, LS and PS alone are too.
_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
#: What a quoted line stops at: a line break, or the NUL PyYAML puts after the text.
_LINE_ENDS = "\r\n\x85\u2028\u2029\0"
#: Left out at a quoted line's ends: indentation, trailing blanks and a byte order mark.
_BLANK = " \t\ufeff"
#: How much of the line a YAML error points at is quoted: a line can be as long as the file.
_LINE_QUOTED = 80


def _mark_at(text: str, position: int) -> yaml.Mark:
    """The mark PyYAML's reader gives ``position`` in ``text``: its line and column."""
    line, start = 0, 0
    for found in _BREAK.finditer(text, 0, position):
        line, start = line + 1, found.end()
    column = position - start - text.count("\ufeff", start, position)  # a BOM has no column
    return yaml.Mark("<unicode string>", position, line, column, text + "\0", position)


def _at(mark: yaml.Mark) -> str:
    """Where ``mark`` is, with the text around it on its line: what a reader looks for."""
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    buffer, pointer = mark.buffer, mark.pointer
    if not isinstance(buffer, str) or not isinstance(pointer, int):
        return where
    start = max(buffer.rfind(c, 0, pointer) for c in _LINE_ENDS) + 1
    ends = [i for c in _LINE_ENDS if (i := buffer.find(c, pointer)) >= 0]
    whole = buffer[start : min(ends, default=len(buffer))]
    line = whole.lstrip(_BLANK)
    place = pointer - start - (len(whole) - len(line))  # where the mark is in ``line``
    line = line.rstrip(_BLANK)
    if len(line) > _LINE_QUOTED:
        # A window around the place named: from the line's start, a long line never shows it.
        first = min(max(place - _LINE_QUOTED // 2, 0), len(line) - _LINE_QUOTED)
        last = first + _LINE_QUOTED
        line = ("…" if first else "") + line[first:last] + ("…" if last < len(line) else "")
    return f"{where} ('{line}')" if line else where


def parse_yaml(text: str, limit: int = MAX_FILE_BYTES) -> Any:
    """The one YAML document in ``text``, read strictly (see the module's docstring).

    Raises :class:`UnusableFile` saying what is wrong (with the line where YAML gives one).
    """
    try:
        loader = _StrictLoader(text)
    except yaml.YAMLError as exc:  # a character YAML does not allow
        raise UnusableFile(f"is not valid YAML ({_yaml_problem(exc, text)})") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, limit)
        if size > limit:
            raise UnusableFile(
                f"expands through its YAML aliases ('*name') to more than {limit:,} "
                "characters, the most a configured file may hold; write the repeated parts "
                "out, or shorten them"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise UnusableFile(f"is not valid YAML ({_yaml_problem(exc, text)})") from None
    except RecursionError:
        raise UnusableFile("nests too deeply for Aptix to read") from None
    except MemoryError:
        raise UnusableFile("is too large to read into memory") from None
    finally:
        loader.dispose()
