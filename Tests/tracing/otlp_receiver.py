#!/usr/bin/env python3
"""A test OTLP/HTTP trace receiver: decodes every export with OpenTelemetry's own protocol definitions
(opentelemetry-proto from PyPI) and appends each span as one JSON line to a file.

    .deps/venv/bin/python Tests/tracing/otlp_receiver.py PORT_FILE SPANS_FILE [--fail-first N [STATUS]]

It listens on a free loopback port, writes the port to PORT_FILE, and answers POST /v1/traces with 200 and an
empty ExportTraceServiceResponse (or STATUS, 503 by default, for the first N requests, to test a collector that is
away or refusing; a 429 or 503 says Retry-After: 1). A gzip body (Content-Encoding: gzip) is decompressed first. A
body that does not decode is answered 400 and recorded as {"error": ...}: the worker's encoding is checked exactly.
Each span's line carries the request's Content-Encoding, its headers named x-*, and its resource's attributes.
"""

import gzip
import http.server
import json
import sys

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                     ExportTraceServiceResponse)


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def spans(request, headers):
    for resource_spans in request.resource_spans:
        resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
        sent = {"content_encoding": headers.get("Content-Encoding"), "resource": resource,
                "headers": {name.lower(): text for name, text in headers.items() if name.lower().startswith("x-")}}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(), "name": span.name, "kind": span.kind,
                    "start": span.start_time_unix_nano, "end": span.end_time_unix_nano,
                    "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                    "status_code": span.status.code, "status_message": span.status.message,
                    "flags": span.flags, "service": resource.get("service.name"), "scope": scope_spans.scope.name,
                    **sent,
                }


def main():
    port_file, spans_file = sys.argv[1], sys.argv[2]
    failing = len(sys.argv) > 4 and sys.argv[3] == "--fail-first"
    failures = [int(sys.argv[4])] if failing else [0]
    failure_status = int(sys.argv[5]) if failing and len(sys.argv) > 5 else 503

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if failures[0] > 0:
                failures[0] -= 1
                self.send_response(failure_status)
                if failure_status in (429, 503):
                    self.send_header("Retry-After", "1")
                self.end_headers()
                return
            try:
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                lines = [json.dumps(span) for span in spans(request, self.headers)]
                status = 200
            except Exception as error:  # a body that is not an ExportTraceServiceRequest
                lines, status = [json.dumps({"error": str(error)})], 400
            with open(spans_file, "a", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in lines))
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            self.wfile.write(ExportTraceServiceResponse().SerializeToString())

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file, "w", encoding="utf-8") as out:
        out.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
