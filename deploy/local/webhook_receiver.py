"""An app's server receiving our webhooks, as its developers would write it: every call is
verified with the `standardwebhooks` package from PyPI (the reference implementation of Standard
Webhooks), against each secret in --secrets (one per line; during a rotation, the old and the new).

Each call is appended to --out as a JSON line: the event, its webhook-id, which secrets verified
it, and the status answered. --fail-first N answers 503 to the first N calls of each event id
(a receiver that is down, then back). Run by the stack tests (Tests/StackTests/WebhookStackTests).
"""
import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--secrets", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--fail-first", type=int, default=0)
args = parser.parse_args()
lock = threading.Lock()
seen = {}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            secrets = [s.strip() for s in open(args.secrets).read().splitlines() if s.strip()]
        except FileNotFoundError:
            secrets = []
        verified = []
        for i, secret in enumerate(secrets):
            try:
                Webhook(secret).verify(body, headers)
                verified.append(i)
            except WebhookVerificationError:
                pass
        with lock:
            n = seen.get(headers.get("webhook-id"), 0) + 1
            seen[headers.get("webhook-id")] = n
            status = 503 if n <= args.fail_first else (200 if verified else 401)
            with open(args.out, "a") as out:
                out.write(json.dumps({"webhook_id": headers.get("webhook-id"), "attempt": n, "status": status, "verified_by": verified,
                                      "signatures": len(headers.get("webhook-signature", "").split()),
                                      "event": json.loads(body or b"{}")}) + "\n")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
