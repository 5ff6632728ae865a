"""The local stack's trace collector (#49): an OTLP/HTTP receiver (`POST /v1/traces`,
protobuf or JSON, as the OpenTelemetry specification defines it) that appends every span it
receives, one JSON object per line, to `$DATA_DIR/traces/spans.jsonl`.

`make trace ID=...` (trace.py) reads that file. In Kubernetes the OpenTelemetry Collector
(deploy/k8s/otel-collector.yaml) takes this one's place.

Usage: otlp_receiver.py PORT OUT_FILE
       otlp_receiver.py PORT --discard     (make bench: accepts and drops, parsing nothing)
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
MAX_BODY = 16 * 1024 * 1024
lock = threading.Lock()


def value(v):
    """An OTLP AnyValue as plain JSON."""
    which = v.WhichOneof("value")
    if which == "array_value":
        return [value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which) if which else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def spans_of(request):
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                yield {
                    "service": resource.get("service.name", "?"),
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex() or None,
                    "name": s.name,
                    "kind": KINDS.get(s.kind, str(s.kind)),
                    "start_ns": s.start_time_unix_nano,
                    "end_ns": s.end_time_unix_nano,
                    "attributes": attributes(s.attributes),
                    "events": [{"name": e.name, "attributes": attributes(e.attributes)} for e in s.events],
                    "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex(), "attributes": attributes(l.attributes)}
                              for l in s.links],
                    "trace_state": s.trace_state,
                    "status": {0: "unset", 1: "ok", 2: "error"}.get(s.status.code, "?"),
                }


class Receiver(BaseHTTPRequestHandler):
    out = None
    protocol_version = "HTTP/1.1"  # keep-alive: the exporters reuse their connection

    def do_POST(self):
        if self.path.split("?")[0] != "/v1/traces":
            return self.answer(404, b"")
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            return self.answer(400, b"")
        body = self.rfile.read(length)
        if self.out is None:  # --discard: an empty ExportTraceServiceResponse is zero bytes
            return self.answer(200, b"", "application/x-protobuf")
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        request = trace_service_pb2.ExportTraceServiceRequest()
        try:
            if (self.headers.get("Content-Type") or "").startswith("application/json"):
                json_format.Parse(body, request)
            else:
                request.ParseFromString(body)
        except Exception:  # a malformed export is the sender's error, not ours
            return self.answer(400, b"")
        lines = "".join(json.dumps(s, separators=(",", ":")) + "\n" for s in spans_of(request))
        with lock, open(self.out, "a") as f:
            f.write(lines)
        self.answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        self.answer(200 if self.path == "/health" else 404, b"")

    def answer(self, status, body, content_type="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    Receiver.out = None if sys.argv[2] == "--discard" else sys.argv[2]
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver).serve_forever()
