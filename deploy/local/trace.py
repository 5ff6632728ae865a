"""`make trace ID=...`: one request's story as a waterfall (#49).

ID is a request id (the `X-Request-ID` every answer carries, also in every log line and error
envelope) or a trace id (32 hex digits, the `trace_id` of a log line). The spans come from the
local collector's file (otlp_receiver.py). Traces joined by a span link (an outbox delivery or a
job run that happened later, linked to the transaction that wrote it) are printed too, each
after the one it came from.

Usage: trace.py ID [SPANS_FILE]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/../.."
WIDTH = 40


def load(path):
    spans = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                spans.append(json.loads(line))
    return spans


def story(spans, wanted):
    """The trace ids to print, in the order they happened: those holding `wanted` (a trace id
    or a span's request_id), then every trace linked to one of them, either way."""
    by_trace = {}
    for s in spans:
        by_trace.setdefault(s["trace_id"], []).append(s)
    seeds = {t for t, ss in by_trace.items()
             if t == wanted.lower() or any(s["attributes"].get("request_id") == wanted for s in ss)}
    found, todo = set(), list(seeds)
    while todo:
        t = todo.pop()
        if t in found or t not in by_trace:
            continue
        found.add(t)
        for s in by_trace[t]:
            todo.extend(l["trace_id"] for l in s["links"])
        # Traces that link to this one (a later delivery of a row this trace wrote).
        todo.extend(o for o, ss in by_trace.items() if any(l["trace_id"] == t for s in ss for l in s["links"]))
    return sorted(found, key=lambda t: min(s["start_ns"] for s in by_trace[t])), by_trace


def waterfall(trace_id, spans, origin):
    start = min(s["start_ns"] for s in spans)
    end = max(s["end_ns"] for s in spans)
    total = max(end - start, 1)
    ids = {s["span_id"] for s in spans}
    children = {}
    for s in spans:
        parent = s["parent_span_id"] if s["parent_span_id"] in ids else None
        children.setdefault(parent, []).append(s)
    links = sorted({l["trace_id"] for s in spans for l in s["links"]} - {trace_id})
    print("trace %s  +%.1f ms after the first  (%.1f ms)%s" % (
        trace_id, (start - origin) / 1e6, total / 1e6, ("  linked to " + ", ".join(links)) if links else ""))

    def show(s, depth):
        a = int((s["start_ns"] - start) / total * WIDTH)
        b = max(a + 1, int((s["end_ns"] - start) / total * WIDTH))
        bar = " " * a + "#" * (b - a) + " " * (WIDTH - b)
        attrs = s["attributes"]
        detail = " ".join(str(x) for x in (attrs.get("server.address"), attrs.get("http.response.status_code")) if x)
        link = "  (linked)" if s["links"] else ""
        print("  %8.1f ms %8.1f ms |%s| %s%-12s %s %s%s%s" % (
            (s["start_ns"] - start) / 1e6, (s["end_ns"] - s["start_ns"]) / 1e6, bar, "  " * depth, s["service"], s["name"],
            detail, "  ERROR" if s["status"] == "error" else "", link))
        for c in sorted(children.get(s["span_id"], []), key=lambda c: c["start_ns"]):
            show(c, depth + 1)

    for root in sorted(children.get(None, []), key=lambda s: s["start_ns"]):
        show(root, 0)


def main():
    if len(sys.argv) < 2 or not sys.argv[1]:
        sys.exit("usage: make trace ID=<request id or trace id>")
    path = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("TRACES_FILE", ROOT + "/.data/traces/spans.jsonl")
    if not os.path.exists(path):
        sys.exit("no traces at %s: is the stack running with its collector (make run)?" % path)
    order, by_trace = story(load(path), sys.argv[1])
    if not order:
        sys.exit("no trace holds %s (spans are exported within a few seconds; try again)" % sys.argv[1])
    origin = min(s["start_ns"] for s in by_trace[order[0]])
    for t in order:
        waterfall(t, by_trace[t], origin)


if __name__ == "__main__":
    main()
