"""The camelCase JSON shape of a session, shared by the CLI and the HTTP API."""

from __future__ import annotations

from typing import Any

from aptix.sessions.models import AgentSession

__all__ = ["session_to_json"]


def session_to_json(session: AgentSession) -> dict[str, Any]:
    """A session as JSON (times in ISO 8601, UTC)."""
    return {
        "sessionId": session.id,
        "org": session.org,
        "user": session.user,
        "title": session.title,
        "mode": session.mode,
        "modeReason": session.mode_reason,
        "modeSetAt": session.mode_set_at.isoformat() if session.mode_set_at else None,
        "modeHistory": [
            {
                "previousMode": h.previous_mode,
                "mode": h.mode,
                "reason": h.reason,
                "changedAt": h.changed_at.isoformat(),
                "changedBy": h.changed_by,
            }
            for h in session.mode_history
        ],
        "parentSessionId": session.parent_session_id,
        "activeWorkflowId": session.active_workflow_id,
        "createdAt": session.created_at.isoformat(),
        "updatedAt": session.updated_at.isoformat(),
        "version": session.version,
    }
