"""The OpenAI APIs Aptix does not serve, and what a client that calls one is told.

Aptix serves Chat Completions only (DESIGN §17). Clients that call another OpenAI API first
(the Vercel AI SDK's default provider and the OpenAI Agents SDK call the Responses API) would
otherwise read a bare "No such route." and not learn where Aptix answers.
"""

from __future__ import annotations

__all__ = ["method_not_served", "not_served"]

#: OpenAI's APIs by their first path segment under ``/v1/``, as OpenAI's docs name them.
_APIS = {
    "responses": "the Responses API",
    "completions": "the legacy Completions API",
    "embeddings": "embeddings",
    "conversations": "the Conversations API",
    "assistants": "the Assistants API",
    "threads": "the Assistants API",
    "realtime": "the Realtime API",
    "audio": "audio",
    "images": "images",
    "moderations": "moderations",
    "files": "files",
    "uploads": "uploads",
    "batches": "batches",
    "vector_stores": "vector stores",
    "fine_tuning": "fine-tuning",
}

#: Where OpenAI keeps stored chat completions (``retrieve``, ``update``, ``messages.list``).
_STORED = "/v1/chat/completions/"

_MESSAGE = (
    "Aptix does not serve {api}. It serves the OpenAI Chat Completions API: "
    "POST /v1/chat/completions, with its models at GET /v1/models."
)


#: OpenAI calls that reach a path Aptix serves with a method it does not serve there: the
#: openai SDK's ``chat.completions.list()`` and ``models.delete()``.
_METHODS = {
    ("GET", "/v1/chat/completions"): "stored chat completions",
    ("DELETE", "/v1/models/"): "model deletion",
}


def method_not_served(method: str, path: str) -> str:
    """The 405 message for ``method`` on an OpenAI path Aptix serves with other methods."""
    served = "/v1/models/" if path.startswith("/v1/models/") else path
    api = _METHODS.get((method, served), f"{method} requests at this path")
    return _MESSAGE.format(api=api)


def not_served(path: str) -> str | None:
    """The 404 message for a path of an OpenAI API Aptix does not serve, or None."""
    if path.startswith(_STORED):
        return _MESSAGE.format(api="stored chat completions")
    first, _, _ = path.removeprefix("/v1/").partition("/")
    if not path.startswith("/v1/") or first not in _APIS:
        return None
    return _MESSAGE.format(api=_APIS[first])
