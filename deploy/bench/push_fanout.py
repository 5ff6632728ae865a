"""make bench: one content update to N users (one iOS device each) through auth's messenger and
the local APNs stand-in (HTTP/2 over TLS). Prints notifications/s from the request to the
last arrival, auth's CPU per 1,000 sends and the stand-in's own. Standard library only.
Usage: python3 push_fanout.py USERS_FILE AUTH_PID STANDIN_PID STANDIN_URL APP_ID"""
import json
import os
import sys
import time
import urllib.request

users_file, auth_pid, standin_pid, standin, app = sys.argv[1:6]
users = [u.strip() for u in open(users_file) if u.strip()]
clk = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / clk


def received():
    return json.loads(urllib.request.urlopen(standin + "/_standin/stats", timeout=10).read())["received"]


base = received()
a0, s0, t0 = cpu(auth_pid), cpu(standin_pid), time.monotonic()
# What offline's outbox sends (one message per 25,000 players), with its service credential.
for i in range(0, len(users), 25000):
    body = {"app_id": app, "key": f"bench-content-{time.time()}-{i}", "kind": "content_update",
            "data": {"changes": "5", "category": "Europe"}, "user_ids": users[i:i + 25000]}
    req = urllib.request.Request(f"http://127.0.0.1:3001/internal/notifications?app_id={app}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer local-internal-offline", "X-Service-Name": "offline"})
    urllib.request.urlopen(req, timeout=30).read()
deadline = t0 + 300
n = 0
while time.monotonic() < deadline:
    n = received() - base
    if n >= len(users):
        break
    time.sleep(0.05)
elapsed = time.monotonic() - t0
auth_ms = (cpu(auth_pid) - a0) * 1000
standin_ms = (cpu(standin_pid) - s0) * 1000
print(f"{n / elapsed:.0f} notifications/s  auth CPU {auth_ms / max(n, 1) * 1000:.0f} ms per 1,000 sends"
      f"  ({n} of {len(users)} in {elapsed:.1f} s; stand-in CPU {standin_ms / max(n, 1) * 1000:.0f} ms per 1,000)")
