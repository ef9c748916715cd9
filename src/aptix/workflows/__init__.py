"""Workflows (TUL-006): manifests, the registry, matching, the boot message, authoring."""

from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.boot import build_boot_message
from aptix.workflows.guard import (
    offered_tools,
    permitted_tools,
    session_guard,
    workflow_guard,
)
from aptix.workflows.manifest import (
    RequiredInput,
    SemVer,
    WorkflowManifest,
    WorkflowStatus,
    WorkflowVisibility,
)
from aptix.workflows.outcome import AuthoringOutcome
from aptix.workflows.registry import WorkflowMatch, WorkflowRegistry
from aptix.workflows.store import (
    InMemoryWorkflowStore,
    RevisionAction,
    StoredRevision,
    WorkflowStore,
)
from aptix.workflows.validation import ALWAYS_OFFERED_TOOLS, FieldProblem, validate_manifest

__all__ = [
    "ALWAYS_OFFERED_TOOLS",
    "AuthoringOutcome",
    "FieldProblem",
    "InMemoryWorkflowStore",
    "RequiredInput",
    "RevisionAction",
    "SemVer",
    "StoredRevision",
    "WorkflowAuthoring",
    "WorkflowManifest",
    "WorkflowMatch",
    "WorkflowRegistry",
    "WorkflowStatus",
    "WorkflowStore",
    "WorkflowVisibility",
    "build_boot_message",
    "offered_tools",
    "permitted_tools",
    "session_guard",
    "validate_manifest",
    "workflow_guard",
]
