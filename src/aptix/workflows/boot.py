"""The boot message (TUL-006 §6.8): the workflows a new session may use, and how to use them.

Deterministic: the same served set always gives the same text (workflows sorted by id,
patterns in manifest order), so prompts can be cached and tests can compare it exactly.
"""

from __future__ import annotations

from aptix.workflows.manifest import WorkflowManifest, WorkflowVisibility
from aptix.workflows.registry import WorkflowRegistry

__all__ = ["BOOT_INSTRUCTION", "NO_WORKFLOWS", "boot_workflows", "build_boot_message"]

BOOT_INSTRUCTION = (
    "These are the workflows available to you. If the user's input matches these patterns, "
    "call the workflow registry tool (agent_workflow_registry, operation "
    "get_workflow_manifest) to get the workflow manifest, confirm with the user unless the "
    "workflow is marked auto-start, then call agent_workflow_run start_workflow and follow "
    "the manifest's instructionText exactly. If you are unsure which workflow applies, call "
    "agent_workflow_registry with match_workflow or list_workflows. Never invent a workflow "
    "that is not listed here or returned by the registry, and never change a workflow's steps."
)

NO_WORKFLOWS = (
    "No workflows are available in this session. Never invent a workflow; if the user asks "
    "for one, say that none is defined."
)


def boot_workflows(registry: WorkflowRegistry, org: str | None = None) -> list[WorkflowManifest]:
    """The workflows ``org``'s boot message lists: public and runnable, by id."""
    return [m for m in registry.listed(org) if m.visibility is WorkflowVisibility.PUBLIC]


def build_boot_message(registry: WorkflowRegistry, org: str | None = None) -> str:
    """The boot message text for a new session of ``org``: never another org's workflows."""
    workflows = boot_workflows(registry, org)
    if not workflows:
        return NO_WORKFLOWS
    lines = ["# Available workflows", "", BOOT_INSTRUCTION, ""]
    for manifest in workflows:
        flags = [
            flag
            for flag, on in (
                ("auto-start", manifest.auto_start),
                ("requires approval", manifest.requires_approval),
                ("deprecated", manifest.status.value == "deprecated"),
            )
            if on
        ]
        suffix = f" [{', '.join(flags)}]" if flags else ""
        lines.append(f"## {manifest.workflow_id}: {manifest.title}{suffix}")
        lines.append(f"Summary: {' '.join(manifest.description.split())}")
        patterns = "; ".join(f'"{p}"' for p in manifest.user_intent_patterns)
        lines.append(f"Intent patterns: {patterns}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
