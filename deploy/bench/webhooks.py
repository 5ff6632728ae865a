"""make bench (#33, #45): 10,000 events at 500 events/s handed to auth (`POST /internal/events`, what
the services' outboxes send), delivered signed to a receiver. Prints deliveries/s (from the first
event handed over to the last receipt), the p99 of commit -> receipt (from the moment auth
acknowledged the event, i.e. committed it, to its arrival) and what each side spent in CPU.

A measuring tool must cost less than what it measures (#45: on a slow host the Python receiver and a
new connection per hand-over were the bound, 293 deliveries/s): the receiver is nginx, answering 204
and logging `$msec` and the `webhook-id` (its CPU is printed), and the hand-over goes over kept-alive
connections from a few threads, each paced to its share of the rate.
Usage: python3 webhooks.py APP_ID API_KEY AUTH_PID WORKDIR [EVENTS] [RATE]"""
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid

from handover import hand_over

app, key, auth_pid, workdir = sys.argv[1:5]
events = int(sys.argv[5]) if len(sys.argv) > 5 else 10000
rate = int(sys.argv[6]) if len(sys.argv) > 6 else 500
senders = 32
clk = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clk


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# The receiver: nginx, one worker, a line per delivery ($msec is the time the answer was sent).
os.makedirs(f"{workdir}/logs", exist_ok=True)
port = free_port()
log_path = f"{workdir}/logs/hooks.log"
open(log_path, "w").close()
with open(f"{workdir}/nginx.conf", "w") as f:
    f.write(f"""worker_processes 1;
error_log {workdir}/logs/error.log;
pid {workdir}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    log_format hook '$msec $http_webhook_id';
    client_body_temp_path {workdir}/body;
    server {{
        listen 127.0.0.1:{port};
        keepalive_requests 1000000;
        keepalive_timeout 300s;
        access_log {log_path} hook buffer=64k flush=100ms;
        location = /hook {{ return 204; }}
    }}
}}
""")
subprocess.run(["nginx", "-p", workdir, "-c", f"{workdir}/nginx.conf", "-g", "user root;"], check=True)
time.sleep(0.3)
with open(f"{workdir}/nginx.pid") as f:
    master = int(f.read())
workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()]

admin = {"X-App-ID": app, "X-API-Key": key, "Authorization": "Bearer local-admin-token", "Content-Type": "application/json"}
req = urllib.request.Request("http://127.0.0.1:3001/auth/v1/admin/webhooks", method="POST", headers=admin,
                             data=json.dumps({"url": f"http://127.0.0.1:{port}/hook", "events": ["credits.earned"],
                                              "description": "bench receiver"}).encode())
endpoint = json.loads(urllib.request.urlopen(req, timeout=10).read())["endpoint"]["id"]


def event(i):
    eid = str(uuid.uuid4())
    return eid, json.dumps({"type": "credits.earned", "id": eid, "app_id": app, "version": i + 1,
                            "data": {"user_id": str(uuid.uuid4()), "transaction_id": i + 1, "amount": 1, "balance": i + 1,
                                     "source": "ad_reward"}})


auth_before = cpu_seconds(auth_pid)
tool_before = cpu_seconds(os.getpid()) + sum(cpu_seconds(w) for w in workers)
start_wall = time.time()
committed, failures = hand_over(events, rate, senders, event)


def receipts():
    out = {}
    with open(log_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                out.setdefault(parts[1], float(parts[0]))
    return out


deadline = time.monotonic() + 120
got = {}
while time.monotonic() < deadline:
    got = {k: v for k, v in receipts().items() if k in committed}
    if len(got) >= len(committed):
        break
    time.sleep(0.2)
auth_cpu = cpu_seconds(auth_pid) - auth_before
tool_cpu = cpu_seconds(os.getpid()) + sum(cpu_seconds(w) for w in workers) - tool_before
urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:3001/auth/v1/admin/webhooks/{endpoint}", method="DELETE", headers=admin),
                       timeout=10).read()
subprocess.run(["nginx", "-p", workdir, "-c", f"{workdir}/nginx.conf", "-g", "user root;", "-s", "quit"], check=False)
if failures or len(got) < events:
    print(f"only {len(got)} of {events} delivered ({len(failures)} hand-overs failed: {failures[:3]})")
    sys.exit(1)
latencies = sorted(max(0.0, got[k] - committed[k]) * 1000 for k in got)
p99 = latencies[int(len(latencies) * 0.99) - 1]
last = max(got.values())
print(f"{events / (last - start_wall):.0f} deliveries/s  commit->receipt p99 {p99:.0f} ms  "
      f"auth {auth_cpu * 1e6 / events:.0f} us CPU per delivery (hand-over and send)  bench tools {tool_cpu * 1e6 / events:.0f} us per event")
