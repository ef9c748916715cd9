import aptix


def test_public_api_is_pinned() -> None:
    assert set(aptix.__all__) == {
        "AdminLogger",
        "AgentReasoner",
        "AgentSession",
        "AgentTool",
        "AgentToolCall",
        "AgentToolExecutionContext",
        "AgentToolExecutor",
        "AgentToolRegistry",
        "AptixError",
        "ConfigurationError",
        "ErrorMessage",
        "InvokeResult",
        "LlmClient",
        "LlmError",
        "LogLevel",
        "ModeCatalog",
        "ModeDefinition",
        "NotFoundError",
        "PluginLoadError",
        "SessionManager",
        "StdlibAdminLogger",
        "ToolArgs",
        "ToolContractError",
        "ToolError",
        "ToolResult",
        "ToolResultInput",
        "TurnError",
        "TurnResult",
        "TurnStore",
        "WorkflowManifest",
        "WorkflowRegistry",
        "WorkflowStore",
        "__version__",
        "function_schema",
        "parse_arguments",
        "tool",
    }


def test_every_exported_name_exists() -> None:
    for name in aptix.__all__:
        assert getattr(aptix, name) is not None


def test_every_export_is_lazily_importable() -> None:
    assert set(aptix.__all__) - {"__version__"} == set(aptix._EXPORTS)
