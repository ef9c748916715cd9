"""A stdlib OTLP/HTTP trace receiver on 127.0.0.1 for tests: it decodes each export request
with ``opentelemetry-proto`` and keeps it."""

from __future__ import annotations

from typing import Any


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 that keeps the decoded export requests."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        received: list[tuple[str, Any]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.append((self.path, request))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        import threading

        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[tuple[dict[str, str], Any]]:
        """Every received span with its resource's string attributes."""
        found = []
        for _path, request in self.received:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                found += [
                    (resource, s) for scope in resource_spans.scope_spans for s in scope.spans
                ]
        return found
