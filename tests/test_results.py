from aptix import InvokeResult


def test_success_carries_the_value() -> None:
    ok = InvokeResult.create({"a": 1})
    assert ok.successful
    assert ok.result == {"a": 1}
    assert ok.errors == ()
    assert ok.error_message is None
    assert ok.to_wire() == {"successful": True, "result": {"a": 1}, "errors": []}


def test_failure_joins_its_messages() -> None:
    bad: InvokeResult[str] = InvokeResult.from_error("first", "second")
    assert not bad.successful
    assert bad.result is None
    assert bad.error_message == "first; second"
    assert bad.to_wire()["errors"] == [{"message": "first"}, {"message": "second"}]
