"""make bench (#33): 10,000 events at 500 events/s handed to auth (`POST /internal/events`, what
the services' outboxes send), delivered signed to a local receiver. Prints deliveries/s (from the
first event handed over to the last receipt) and the p99 of commit -> receipt (from the moment
auth acknowledged the event, i.e. committed it, to its arrival). Standard library only.
Usage: python3 webhooks.py APP_ID API_KEY [EVENTS] [RATE]"""
import json
import sys
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

app, key = sys.argv[1:3]
events = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
rate = int(sys.argv[4]) if len(sys.argv) > 4 else 500
committed, received = {}, {}
lock = threading.Lock()


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            received.setdefault(self.headers.get("webhook-id"), time.monotonic())
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
admin = {"X-App-ID": app, "X-API-Key": key, "Authorization": "Bearer local-admin-token", "Content-Type": "application/json"}
req = urllib.request.Request("http://127.0.0.1:3001/auth/v1/admin/webhooks", method="POST", headers=admin,
                             data=json.dumps({"url": f"http://127.0.0.1:{server.server_port}/hook", "events": ["credits.earned"],
                                              "description": "bench receiver"}).encode())
endpoint = json.loads(urllib.request.urlopen(req, timeout=10).read())["endpoint"]["id"]
internal = {"Authorization": "Bearer local-internal-subscription", "X-Service-Name": "subscription", "Content-Type": "application/json"}


def hand_over(i):
    eid = str(uuid.uuid4())
    body = {"type": "credits.earned", "id": eid, "app_id": app, "version": i + 1,
            "data": {"user_id": str(uuid.uuid4()), "transaction_id": i + 1, "amount": 1, "balance": i + 1, "source": "ad_reward"}}
    r = urllib.request.Request("http://127.0.0.1:3001/internal/events", method="POST", headers=internal, data=json.dumps(body).encode())
    urllib.request.urlopen(r, timeout=30).read()
    with lock:
        committed[eid] = time.monotonic()


start = time.monotonic()
with ThreadPoolExecutor(16) as pool:
    for i in range(events):
        due = start + i / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        pool.submit(hand_over, i)
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    with lock:
        if len(received) >= events:
            break
    time.sleep(0.05)
with lock:
    got = {k: v for k, v in received.items() if k in committed}
    latencies = sorted((got[k] - committed[k]) * 1000 for k in got)
    last = max(received.values()) if received else start
urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:3001/auth/v1/admin/webhooks/{endpoint}", method="DELETE", headers=admin), timeout=10).read()
if len(got) < events:
    print(f"only {len(got)} of {events} delivered")
    sys.exit(1)
p99 = latencies[int(len(latencies) * 0.99) - 1]
print(f"{events / (last - start):.0f} deliveries/s  commit->receipt p99 {p99:.0f} ms")
