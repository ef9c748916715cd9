"""The check for a number that is not finite walks what the tool gets, and only that, once.

Review r3 F1 (round 73): the walk read every field of a dataclass in the arguments, so a
``field(init=False)`` nothing had set raised ``AttributeError`` and every call of the tool
failed, whatever was sent. A field that was never set holds no number: it is skipped. An
object reached twice (a parent link or a shared part set after validation) is walked once, so
the walk ends and stays linear.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import Field
from pydantic.dataclasses import dataclass

import aptix
from aptix import ToolArgs, parse_arguments
from aptix.testing import RecordingLogger
from aptix.tools.context import AgentToolExecutionContext

CONTEXT = AgentToolExecutionContext(org="acme", user="ann", conversation_id="c")


@dataclass
class Box:
    w: float = 1.0
    area: float = dataclasses.field(init=False)


@dataclasses.dataclass(slots=True)
class Crate:
    w: float = 1.0
    area: float = dataclasses.field(init=False)


class _Boxes(ToolArgs):
    box: Box | None = Field(None, description="A box.")
    crates: list[Crate] = Field(default_factory=list, description="Crates.")


@aptix.tool(usage="Call this to test.")
async def boxed(box: Box) -> dict[str, Any]:
    """Tests.

    Args:
        box: A box.
    """
    return {"w": box.w}


async def test_a_function_tool_with_an_unset_field_runs() -> None:
    ran = await boxed(RecordingLogger()).execute('{"box": {"w": 2}}', CONTEXT)
    assert ran.error_message is None
    assert json.loads(ran.result or "") == {"w": 2.0}


def test_unset_fields_are_skipped_and_numbers_beside_them_still_checked() -> None:
    parsed = parse_arguments(_Boxes, '{"box": {"w": 3}, "crates": [{"w": 1}, {"w": 2}]}')
    assert parsed.error_message is None
    assert parsed.result is not None
    assert [crate.w for crate in parsed.result.crates] == [1.0, 2.0]
    refused = parse_arguments(_Boxes, '{"box": {"w": 3}, "crates": [{"w": 1}, {"w": NaN}]}')
    assert refused.error_message == (
        "Invalid arguments: 'crates.1.w': input should be a finite number."
    )


# Run apart: a walk that goes back to what it reached runs out of memory on the parent
# links, and never ends on the shared layers.
_REACHED_AGAIN = """
from __future__ import annotations
import dataclasses, resource, sys
from typing import Any
from pydantic import Field
from pydantic.dataclasses import dataclass
from aptix import ToolArgs, parse_arguments

resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@dataclass
class Node:
    name: str = ""
    children: list[Node] = dataclasses.field(default_factory=list)
    parent: Any = dataclasses.field(init=False, default=None)

    def __post_init__(self) -> None:
        for child in self.children:
            child.parent = self


@dataclass
class Layer:
    below: Layer | None = None
    left: Any = dataclasses.field(init=False, default=None)
    right: Any = dataclasses.field(init=False, default=None)

    def __post_init__(self) -> None:
        # Both sides share the layer below: 60 layers are 2**60 ways down.
        self.left = self.right = self.below


class Args(ToolArgs):
    tree: Node | None = Field(None, description="A tree.")
    layer: Layer | None = Field(None, description="Layers.")


tree = '{"tree": {"name": "a", "children": [{"name": "b"}, {"name": "c", "children": [{}]}]}}'
print(parse_arguments(Args, tree).error_message)
layer = "null"
for _ in range(60):
    layer = '{"below": %s}' % layer
print(parse_arguments(Args, '{"layer": %s}' % layer).error_message)
"""


def test_an_object_reached_twice_is_walked_once() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _REACHED_AGAIN],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the walk did not end")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "None"]
