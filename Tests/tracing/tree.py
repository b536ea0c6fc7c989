#!/usr/bin/env python3
"""Prints one job's trace as the OTLP receiver decoded it (Tests/tracing/otlp_receiver.py's JSON lines): the
spans of the first trace that has a `process` span, as a tree, each with its kind and duration.

    python3 Tests/tracing/tree.py SPANS_FILE
"""

import json
import sys

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def main():
    spans = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    spans = [span for span in spans if "error" not in span]
    trace = next((s["trace_id"] for s in spans if s["name"].startswith("process ")), None)
    if trace is None:
        print("no process span decoded")
        return 1
    mine = sorted((s for s in spans if s["trace_id"] == trace), key=lambda s: s["start"])
    ids = {s["span_id"] for s in mine}
    children = {}
    for span in mine:
        children.setdefault(span["parent_span_id"] if span["parent_span_id"] in ids else None, []).append(span)

    def show(span, depth):
        micros = (span["end"] - span["start"]) / 1000
        print(f"{'  ' * depth}{span['name']} ({KINDS.get(span['kind'], span['kind'])}, {micros:,.0f} µs)")
        for child in children.get(span["span_id"], []):
            show(child, depth + 1)

    print(f"trace {trace} (service {mine[0]['service']}):")
    for root in children.get(None, []):
        parent = root["parent_span_id"]
        if parent:
            print(f"  (the job's own span {parent}, the producer's: not exported by the worker)")
        show(root, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
