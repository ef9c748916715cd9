"""Tool arguments read in any casing: each key as the property of the schema it spells.

A model writes ``orderId``, ``OrderId`` or ``order_id`` alike; a field given in two of them is
refused by its path (:class:`FieldGivenTwice`). The schema is :func:`reading_schema`'s.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

from pydantic.alias_generators import to_camel, to_pascal, to_snake

from aptix.tools.spellings import SPELLINGS, reading_schema

__all__ = ["DocumentedKeys", "FieldGivenTwice", "match_documented_keys", "reading_schema"]


def _letters(key: str) -> str:
    return key.replace("_", "").lower()


def _casings(name: str) -> tuple[str, ...]:
    """``name`` and its camelCase, PascalCase and snake_case spellings (``Path``, ``order_id``)."""
    # A lower-case name is its own snake_case: to_snake would split s3_bucket as s_3_bucket.
    snake = name if name.islower() and "-" not in name else to_snake(name)
    return tuple(dict.fromkeys((name, snake, to_camel(snake), to_pascal(snake))))


def _keeps_extra(node: dict[str, Any]) -> bool:
    """Whether the object ``node`` describes keeps keys it does not document (``extra="allow"``)."""
    return node.get("additionalProperties") not in (None, False)


def _index(
    props: Iterable[str], keeps_extra: bool, spellings: dict[str, list[str]]
) -> dict[str, list[str]]:
    """The properties each undocumented key may spell, by :func:`_lookup` of the key.

    An object that drops unknown keys reads a key as the property its letters spell
    (``ORDER_ID``); one that keeps them reads only the casings of a property, any other key
    (``PATH`` beside ``path``) being one of its extra keys.
    """
    index: dict[str, list[str]] = {}
    for name in props:
        for key in _spellings_of(name, spellings) if keeps_extra else (_letters(name),):
            names = index.setdefault(key, [])
            if name not in names:
                names.append(name)
    return index


def _spellings_of(name: str, spellings: dict[str, list[str]]) -> tuple[str, ...]:
    """The keys property ``name`` is read by: pydantic's own for its field, and its casings."""
    # Both: a field's own AliasChoices (bucket_name, bucket) do not hold the camelCase key
    # its schema advertises (bucketName). A snake_case worked out from that camelCase name is
    # left out when the field's own keys spell it otherwise: s3Bucket gives s_3_bucket, and
    # that key is an extra one beside s3_bucket.
    own = spellings.get(name, ())
    letters = {_letters(key) for key in own}
    snake = to_snake(name)
    casings = [k for k in _casings(name) if k != snake or k in own or _letters(k) not in letters]
    return tuple(dict.fromkeys((*own, *casings)))


def _lookup(key: str, keeps_extra: bool) -> str:
    return key if keeps_extra else _letters(key)


def match_documented_keys(value: Any, schema: dict[str, Any], depth: int = 0) -> Any:
    """``value`` with each object key renamed to the property it spells in another casing.

    ``schema`` is a JSON schema with its ``$defs``: nested models of tool arguments (user
    types without our aliases) then read ``Street``, ``street`` or ``zip_code``/``zipCode``
    alike. A key already documented, or ambiguous, is kept as sent; so is one of an object
    that keeps extra keys (``additionalProperties``) unless it is a casing of a property.
    Two keys of one object that spell the same property raise :class:`FieldGivenTwice`: one
    value would go unread.
    """
    return _match(value, schema, schema.get("$defs", {}), depth, None)


class DocumentedKeys:
    """:func:`match_documented_keys` for one object schema, its own keys worked out once.

    Most tool calls give each field once in one of its casings and nest no object: their
    keys are read with a lookup each, and only the other calls are walked.
    """

    __slots__ = ("_defs", "_schema", "_top", "_walked")

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self._defs: dict[str, Any] = schema.get("$defs", {})
        self._top: _Reading | None = None
        self._walked: frozenset[str] = frozenset()
        props = schema.get("properties")
        if isinstance(props, dict):
            self._walked = frozenset(k for k, sub in props.items() if _holds_objects(sub))
            self._top = _Reading(schema, walked=self._walked)

    def match(self, value: Any) -> Any:
        """``value`` read as :func:`match_documented_keys` reads it; raises FieldGivenTwice."""
        top = self._top
        if top is None or not isinstance(value, dict):
            return match_documented_keys(value, self._schema)
        if not value.keys() <= top.names:
            try:
                renamed = {top.spelled[key]: item for key, item in value.items()}
            except KeyError:  # a key spelled otherwise, unknown or extra: look at each
                return _match_object(value, top, self._defs, 0, None)
            if len(renamed) < len(value):  # a field given twice: named with the keys sent
                return _match_object(value, top, self._defs, 0, None)
            value = renamed
        if self._walked.isdisjoint(value):
            return value
        return _match_object(value, top, self._defs, 0, None)


#: Where an object is, as (where its parent is, its key or index); None at the top.
_Path = tuple["_Path", Any] | None


class FieldGivenTwice(ValueError):
    """An object gives one property in two spellings; the message names it and them."""


def _match(value: Any, node: dict[str, Any], defs: dict[str, Any], depth: int, path: _Path) -> Any:
    if depth > 64:
        return value
    node = _resolved(node, defs)
    if "anyOf" in node or "oneOf" in node:
        value = _match_either(value, _options(node, defs, depth), defs, depth, path)
    shaped = [o for o in node.get("allOf", ()) if isinstance(o, dict) and o.get("type") != "null"]
    if len(shaped) == 1:
        value = _match(value, shaped[0], defs, depth + 1, path)
    if isinstance(value, dict):
        if isinstance(node.get("properties"), dict):
            return _match_object(value, _Reading(node), defs, depth, path)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return {
                key: _match(item, extra, defs, depth + 1, (path, key))
                for key, item in value.items()
            }
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        return [
            _match(item, node["items"], defs, depth + 1, (path, index))
            for index, item in enumerate(value)
        ]
    return value


def _resolved(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        found = defs.get(ref.rsplit("/", 1)[-1], {})
        return found if isinstance(found, dict) else {}
    return node


def _options(
    node: dict[str, Any], defs: dict[str, Any], depth: int, out: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The shapes a value of the union ``node`` may take, nested unions flattened, not null."""
    out = [] if out is None else out
    for option in (*node.get("anyOf", ()), *node.get("oneOf", ())):
        if not isinstance(option, dict):
            continue
        option = _resolved(option, defs)
        if option.get("type") == "null" or any(option is seen for seen in out):
            continue  # one model reached twice (both members' ``owner: Owner``) is one shape
        if ("anyOf" in option or "oneOf" in option) and "properties" not in option:
            if depth < 64:
                _options(option, defs, depth + 1, out)
            continue
        out.append(option)
    return out


def _takes(option: dict[str, Any], kind: str) -> bool:
    """Whether a value of JSON type ``kind`` may be the shape ``option`` describes."""
    if "const" in option or "enum" in option:
        return False
    kinds = option.get("type")
    if kinds is None:  # any value, or a shape this reading cannot tell
        return True
    return kind in kinds if isinstance(kinds, list) else kinds == kind


def _match_either(
    value: Any, options: list[dict[str, Any]], defs: dict[str, Any], depth: int, path: _Path
) -> Any:
    """``value`` of a union read as the one shape that takes it, or as all its models at once.

    Pydantic tries each shape: an object's keys are read as the field they spell in the
    models that document it (``Cat | Dog``). Beside a map or any value (``Cat | dict[str,
    int]``) its keys may be data, so they are kept as sent.
    """
    if isinstance(value, dict):
        objects = [o for o in options if _takes(o, "object")]
        if len(objects) == 1:  # ``Model | None``, ``Model | str``: one shape to follow
            return _match(value, objects[0], defs, depth + 1, path)
        if objects and all(isinstance(o.get("properties"), dict) for o in objects):
            return _match_object(value, _EitherReading(objects), defs, depth, path)
    elif isinstance(value, list):
        arrays = [o for o in options if _takes(o, "array")]
        if len(arrays) == 1:
            return _match(value, arrays[0], defs, depth + 1, path)
        items = [o.get("items") for o in arrays]
        if items and all(isinstance(item, dict) for item in items):
            either = {"type": "array", "items": {"anyOf": items}}
            return _match(value, either, defs, depth + 1, path)
    return value


def _match_object(
    value: dict[Any, Any],
    reading: _Reading | _EitherReading,
    defs: dict[str, Any],
    depth: int,
    path: _Path,
) -> dict[Any, Any]:
    props = reading.props
    walked = reading.walked
    out: dict[Any, Any] = {}
    for key, item in value.items():
        target = reading.documented(key)
        if target in out:
            raise FieldGivenTwice(_given_twice(value, target, reading, path))
        sub = props.get(target)
        if isinstance(sub, dict) and (walked is None or target in walked):
            item = _match(item, sub, defs, depth + 1, (path, target))
        out[target] = item
    return out


class _Reading:
    """How the keys of one object schema are read.

    For one object, its index is built only if a key is not documented. Given ``walked``
    (the properties whose values may hold objects), it reads a tool's top level on every
    call, so all of it is worked out at once.
    """

    __slots__ = ("_index", "_keeps_extra", "_spellings", "names", "props", "spelled", "walked")

    def __init__(self, node: dict[str, Any], *, walked: frozenset[str] | None = None) -> None:
        self.props: dict[str, Any] = node["properties"]
        self._keeps_extra = _keeps_extra(node)
        #: Each property's keys as pydantic reads them, where :class:`SpelledSchema` said.
        self._spellings: dict[str, list[str]] = node.get(SPELLINGS) or {}
        self._index: dict[str, list[str]] | None = None
        #: None: every property's value is walked (not worth working out for one object).
        self.walked = walked
        self.names: frozenset[str] = frozenset()
        self.spelled: dict[str, str] = {}
        if walked is not None:
            self._index = _index(self.props, self._keeps_extra, self._spellings)
            self.names = frozenset(self.props)
            self.spelled = self._spelled()

    def documented(self, key: Any) -> Any:
        """The property ``key`` spells: itself when documented, else the one it names."""
        if not isinstance(key, str) or key in self.props:
            return key
        if self._index is None:
            self._index = _index(self.props, self._keeps_extra, self._spellings)
        names = self._index.get(_lookup(key, self._keeps_extra), [])
        return names[0] if len(names) == 1 else key

    def _spelled(self) -> dict[str, str]:
        """Each property's casings that :meth:`documented` reads as it, to that property."""
        out: dict[str, str] = {}
        for name in self.props:
            for key in _spellings_of(name, self._spellings):
                if self.documented(key) == name:
                    out[key] = name
        return out


class _EitherReading:
    """How the keys of an object that may be any of several models are read.

    A key reads as the property it spells in each model that documents it; one that two of
    them read as different properties is kept as sent. A property's value may be any of its
    models' shapes of it.
    """

    __slots__ = ("_readings", "props", "walked")

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self._readings = [_Reading(node) for node in nodes]
        shapes: dict[str, list[Any]] = {}
        for reading in self._readings:
            for name, sub in reading.props.items():
                shapes.setdefault(name, []).append(sub)
        self.props: dict[str, Any] = {
            name: subs[0] if len(subs) == 1 else {"anyOf": subs} for name, subs in shapes.items()
        }
        self.walked: frozenset[str] | None = None

    def documented(self, key: Any) -> Any:
        """The property ``key`` spells in every model that reads it, else ``key`` itself."""
        found = None
        for reading in self._readings:
            target = reading.documented(key)
            if target not in reading.props:
                continue
            if found is not None and found != target:
                return key
            found = target
        return key if found is None else found


def _holds_objects(node: Any) -> bool:
    """Whether a value that ``node`` describes may hold an object whose keys are read."""
    if isinstance(node, dict):
        if "$ref" in node or "properties" in node:
            return True
        if isinstance(node.get("additionalProperties"), dict):
            return True
        return any(_holds_objects(item) for item in node.values())
    if isinstance(node, list):
        return any(_holds_objects(item) for item in node)
    return False


def _given_twice(
    value: dict[Any, Any], target: str, reading: _Reading | _EitherReading, path: _Path
) -> str:
    """Which field is given twice, by its path, and in which keys, as they were sent."""
    given = [key for key in value if reading.documented(key) == target]
    parts = [target]
    while path is not None:
        path, part = path
        parts.append(part)
    where = ".".join(_shown(part) for part in reversed(parts))
    quoted = " and ".join(f"'{_shown(key)}'" for key in given)
    return f"'{where}' is given twice ({quoted}): use one casing per field."


def _shown(part: Any) -> str:
    """``part`` of a path or a key as sent, its control and invisible characters escaped."""
    return "".join(
        f"\\u{ord(char):04x}" if unicodedata.category(char) in _HIDDEN else char
        for char in str(part)
    )


#: Control, format (bidi overrides), surrogate and line-separating characters.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
